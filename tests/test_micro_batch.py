"""Gradient accumulation over micro-batches gives the full-batch update (train.accumulate_gradients); the
micro-batch that train.micro_batch_size=auto chooses under a memory budget; the AdamW implementations."""

import pytest
import torch

from ptsweep.config import BertConfig, PTConfig, TrainConfig
from ptsweep.errors import ConfigError
from ptsweep.models import build_model
from ptsweep.parametrization import build_optimizer
from ptsweep.train import (accumulate_gradients, choose_micro_batch, largest_fitting, micro_slices,
                           optimizer_state_allocated, resolve_micro_batch)

V, B, L = 50, 6, 12


def _batch(seed=0):
    """Rows with very different numbers of targets (0 in row 1), so 1/k weighting would be wrong."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, L), generator=g)
    frac = torch.tensor([0.9, 0.0, 0.1, 0.5, 0.2, 0.7])[:, None]
    labels = torch.where(torch.rand(B, L, generator=g) < frac, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[3, 9:] = False
    labels[3, 9:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _models():
    pt = PTConfig(width=32, base_width=32, base_channels=2, base_rank=4, n_iters=2)
    bert = BertConfig(width=32, n_layers=2, n_heads=2)
    return [("pt", pt), ("pt-blockwise", PTConfig(**{**pt.__dict__, "attention_impl": "blockwise"})),
            ("bert", bert)]


@pytest.mark.parametrize("name,cfg", _models())
@pytest.mark.parametrize("micro", [1, 2, 4])
def test_one_adamw_step_matches_full_batch(name, cfg, micro):
    torch.manual_seed(0)
    ref = build_model(cfg, V, L)
    acc = build_model(cfg, V, L)
    acc.load_state_dict(ref.state_dict())
    ref.eval()  # no dropout: the update must be deterministic
    acc.eval()
    batch = _batch()
    results = []
    for model, m in ((ref, 0), (acc, micro)):
        # eps = 1e-4: Adam's first step is ~lr * sign(g) where |g| << eps would be ill-conditioned (a 1e-8 gradient
        # whose rounding flips its sign moves a parameter by 2 lr); with this eps the step is smooth in g
        opt = build_optimizer(model, model.width, model.parametrization, lr=1e-3, eps=1e-4)
        loss = accumulate_gradients(model, batch, m, torch.device("cpu"), "fp32")
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
        results.append((float(loss), grads, {n: p.detach().clone() for n, p in model.named_parameters()}))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-6)
    for n, g in results[0][1].items():
        assert torch.allclose(results[1][1][n], g, atol=max(1e-5 * float(g.abs().max()), 1e-9), rtol=0), (name, n, "grad")
    for n, p in results[0][2].items():
        assert torch.allclose(results[1][2][n], p, atol=1e-6, rtol=0), (name, n)
    # the step moved the parameters (the comparison is not vacuous)
    assert any(not torch.equal(p, q) for p, q in zip(ref.parameters(), build_model(cfg, V, L).parameters()))


def test_micro_slices_cover_the_batch():
    assert micro_slices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert micro_slices(4, 0) == [slice(0, 4)]
    assert micro_slices(4, 9) == [slice(0, 4)]


def test_largest_fitting_bisects_a_monotone_predicate():
    for limit in (1, 2, 5, 37, 255, 256):
        probes = []

        def fits(m, limit=limit):
            probes.append(m)
            return m <= limit

        assert largest_fitting(256, fits) == limit
        assert len(probes) <= 10
    with pytest.raises(RuntimeError, match="not even one"):
        largest_fitting(8, lambda m: False)


def test_resolve_micro_batch_settings():
    batch = _batch()
    cpu = torch.device("cpu")
    assert resolve_micro_batch(0, None, batch, cpu, "fp32") == B
    assert resolve_micro_batch(4, None, batch, cpu, "fp32") == 4
    assert resolve_micro_batch(64, None, batch, cpu, "fp32") == B
    assert resolve_micro_batch("auto", None, batch, cpu, "fp32") == B  # CPU: the full batch


@pytest.mark.parametrize("bad", [-1, "half", 2.5, True])
def test_bad_micro_batch_size_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="train.micro_batch_size"):
        TrainConfig(micro_batch_size=bad).validate()


def test_auto_choice_is_the_largest_micro_batch_within_the_budget_less_headroom():
    """choose_micro_batch against brute force, with a fake device: static memory + a per-row peak, out of memory
    (None) above the device's physical limit, and a budget whose last 10 % must stay free."""
    budget = 1000.0
    for static, per_row, oom_above in ((100.0, 7.0, 10**6), (500.0, 3.0, 60), (890.0, 1.0, 64), (0.0, 1e-3, 3)):
        def peak(m, static=static, per_row=per_row, oom_above=oom_above):
            return None if m > oom_above else static + per_row * m

        want = max([m for m in range(1, 257) if peak(m) is not None and peak(m) <= 0.9 * budget], default=None)
        assert choose_micro_batch(256, peak, budget) == want
    # 0.9 of the budget: 95 rows of 10 bytes fit in the whole budget (950) but not within the headroom (900)
    assert choose_micro_batch(256, lambda m: 10.0 * m, budget) == 90
    assert choose_micro_batch(256, lambda m: 10.0 * m, budget, headroom=0.0) == 100
    with pytest.raises(RuntimeError, match="not even one"):
        choose_micro_batch(256, lambda m: 950.0 + m, budget)


def test_probe_placeholders_are_the_state_adamw_allocates_at_its_first_step():
    torch.manual_seed(0)
    model = build_model(_models()[0][1], V, L)
    opt = build_optimizer(model, model.width, model.parametrization, lr=1e-3, device_type="cpu")
    with optimizer_state_allocated(opt) as placeholder_bytes:
        assert placeholder_bytes == 2 * sum(p.numel() * p.element_size() for p in model.parameters())
    accumulate_gradients(model, _batch(), 0, torch.device("cpu"), "fp32")
    opt.step()
    state_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for k, t in s.items() if k != "step")
    assert state_bytes == placeholder_bytes
    with optimizer_state_allocated(opt) as after_first_step:  # a resumed or running optimizer: nothing to add
        assert after_first_step == 0


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_foreach_and_fused_adamw_take_the_default_step(device_type):
    """build_optimizer's device paths (foreach on the CPU; the fused kernel on CUDA, run here on its CPU kernel)
    give torch's reference AdamW step; the flag really reached the optimizer."""
    torch.manual_seed(0)
    cfg = _models()[2][1]
    results = []
    for kind in (None, device_type):
        model = build_model(cfg, V, L)
        model.load_state_dict(results[0][0] if results else model.state_dict())
        model.eval()
        opt = build_optimizer(model, model.width, model.parametrization, lr=1e-3, device_type=kind)
        if kind is not None:
            assert opt.defaults["fused" if kind == "cuda" else "foreach"] is True
        start = {n: p.detach().clone() for n, p in model.named_parameters()}
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            accumulate_gradients(model, _batch(), 0, torch.device("cpu"), "fp32")
            opt.step()
        results.append((start, {n: p.detach().clone() for n, p in model.named_parameters()}))
    (start, ref), (_, got) = results
    assert any(not torch.equal(ref[n], start[n]) for n in ref)
    for n in ref:
        assert torch.allclose(got[n], ref[n], atol=1e-6, rtol=1e-5), n
    with pytest.raises(ValueError, match="device_type"):
        build_optimizer(build_model(cfg, V, L), 32, "mup", lr=1e-3, device_type="mps")


def test_memory_budget_of_an_unindexed_cuda_device_reads_the_current_device(monkeypatch):
    """'cuda' without an index is the current device: torch's fraction getter refuses an index-less device (every
    'auto' micro-batch on CUDA would fail), so the budget must ask by index. CUDA's getters are stood in for on the
    CPU, each refusing what torch refuses."""
    from types import SimpleNamespace

    from ptsweep.train.step import device_memory_budget

    def by_index(device):
        if not isinstance(device, int):
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        return device

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: SimpleNamespace(total_memory=1000 * (by_index(d) + 1)))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d: 0.1 * by_index(d), raising=False)
    assert device_memory_budget(torch.device("cuda")) == pytest.approx(4000 * 0.3)
    assert device_memory_budget(torch.device("cuda", 1)) == pytest.approx(2000 * 0.1)


def test_a_resolved_cuda_device_always_has_its_index(monkeypatch):
    """resolve_device turns 'cuda' (and 'auto' on a CUDA machine) into the current device by index, so that no later
    CUDA call meets an index-less device; an explicit index is kept. CUDA's queries are stood in for on the CPU."""
    from ptsweep.train import resolve_device

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("cuda") == torch.device("cuda", 2) and resolve_device("auto") == torch.device("cuda", 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")
