"""What a long run logs besides its losses (``ptsweep.train.monitor``): the update RMS per muP role against AdamW's
closed-form first step, MFU against datasheet peaks, and the rows and final metrics of a CPU run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ptsweep import train
from ptsweep.config import PTConfig, compose
from ptsweep.models import build_model, mlm_loss
from ptsweep.parametrization import build_optimizer
from ptsweep.train import monitor


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "disabled")


@pytest.mark.parametrize("name,precision,tflops", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.4), ("NVIDIA H100 80GB HBM3", "tf32", 494.7),
    ("NVIDIA H200", "bf16", 989.4), ("NVIDIA H100 PCIe", "bf16", 756.0), ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
    ("NVIDIA L40S", "bf16", 362.05), ("NVIDIA L4", "tf32", 60.0),
    ("NVIDIA H100 NVL", "bf16", None), ("NVIDIA L40", "bf16", None), ("Tesla T4", "bf16", None),
    ("NVIDIA H100 80GB HBM3", None, None), ("cpu", None, None)])
def test_peak_flops_of_listed_devices_only(name, precision, tflops) -> None:
    got = monitor.peak_flops(name, precision)
    assert got == (None if tflops is None else pytest.approx(tflops * 1e12))


def test_mfu_is_achieved_over_peak_flops() -> None:
    assert monitor.mfu(6e9, 50_000.0, 989.4e12) == pytest.approx(6e9 * 5e4 / 989.4e12)
    assert monitor.mfu(6e9, 50_000.0, None) is None
    assert monitor.matmul_precision(torch.device("cpu"), autocast_bf16=True) is None


def test_update_rms_of_adamw_first_step_is_the_group_lr() -> None:
    """AdamW's bias-corrected first step moves each coordinate by lr * g / (|g| + eps) (no weight decay), so the
    update RMS of a role's tracked tensors is lr_group * sqrt(mean((g / (|g| + eps))^2)), from the gradients alone."""
    torch.manual_seed(0)
    model = build_model(PTConfig(width=32, base_width=16, base_channels=2, base_rank=4, n_iters=2), 50, 12)
    eps = 1e-8
    opt = build_optimizer(model, model.width, model.parametrization, lr=1e-2, eps=eps)
    sizes = monitor.UpdateSizes(opt)
    assert set(sizes.tracked) == {g["role"] for g in opt.param_groups}
    ids = torch.randint(5, 50, (3, 12))
    loss, _ = mlm_loss(model, ids, torch.ones(3, 12, dtype=torch.bool), ids)
    loss.backward()
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    expected = {}
    for role, ps in sizes.tracked.items():
        sq = sum(float(((p.grad / (p.grad.abs() + eps)) * lr_of[id(p)]).pow(2).sum()) for p in ps)
        expected[role] = math.sqrt(sq / sum(p.numel() for p in ps))
    before = sizes.snapshot()
    opt.step()
    got = sizes.sizes(before)
    assert any(lr_of[id(ps[0])] != lr_of[id(sizes.tracked["hidden"][0])] for ps in sizes.tracked.values())
    for role, want in expected.items():
        assert want > 0
        assert got[f"update_rms/{role}"] == pytest.approx(want, rel=1e-3), role
        flat = torch.cat([p.detach().flatten() for p in sizes.tracked[role]])
        assert got[f"param_rms/{role}"] == pytest.approx(float(flat.pow(2).mean().sqrt()), rel=1e-5)


def test_cpu_run_logs_update_sizes_per_role_and_no_gpu_metrics(cache_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, rows_tracker) -> None:
    measured: list[int] = []  # the update sizes are measured at the log steps only (a copy of the tracked tensors)
    real = monitor.UpdateSizes.snapshot
    monkeypatch.setattr(monitor.UpdateSizes, "snapshot", lambda self: measured.append(1) or real(self))
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", f"data.cache_dir={cache_dir}"])
    tracker = rows_tracker()
    m = train.run(cfg, tracker)
    assert len(measured) == 4
    training = [(s, r) for s, r in tracker.rows if "train_loss" in r]
    assert [s for s, _ in training] == [4, 8, 12, 16]  # every log step (train.log_every=4)
    roles = {k.split("/", 1)[1] for k in training[0][1] if k.startswith("lr/")}
    assert {"input", "hidden", "output"} <= roles
    for _, row in training:
        for role in roles:
            assert 0 < row[f"update_rms/{role}"] < 1 and row[f"param_rms/{role}"] > 0
        assert "mfu" not in row and "gpu_peak_mem_gib" not in row and row["tokens_per_s"] > 0
    assert m["mfu"] is None and m["gpu_peak_mem_gib"] is None
    assert (m["tf32"], m["adamw"], m["compile"], m["device_name"]) == (False, "foreach", "none", "cpu")
    assert m["cpu_capability"] == torch.backends.cpu.get_cpu_capability() != ""  # the kernel set of these numbers
    assert m["micro_batch_size"] == cfg.train.batch_size and m["start_step"] == 0
