"""Losses by kind of MLM target: the visible-target loss derived from a record's all-target and [MASK]-target means
(``metric_keys.visible_targets``) against the direct mean over the visible tokens, and the report's PT - baseline
differences per kind (``analysis.target_kinds``) against scipy's Welch interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from ptsweep import metrics
from ptsweep.analysis import target_kinds
from ptsweep.metric_keys import visible_targets


def _evaluation(seed: int):
    """One synthetic evaluation over a tiny corpus under 80/10/10 corruption: (summarize's metrics, per-token model
    and no-context losses, the visible mask)."""
    rng = np.random.default_rng(seed)
    vocab, mask_id, regular = 8, 1, [2, 3, 4, 5, 6, 7]
    p = np.zeros(vocab)
    p[regular] = rng.dirichlet(np.ones(len(regular)))
    logp = torch.from_numpy(np.log(np.where(p > 0, p, 1.0)) + np.where(p > 0, 0.0, -np.inf))
    base = metrics.NoContextBaseline(logp, mask_id, len(regular), 0.1, 0.1)
    n = 900
    targets = torch.tensor(rng.choice(regular, n, p=p[regular]))
    kind = rng.choice(3, n, p=[0.8, 0.1, 0.1])  # [MASK], random, unchanged
    inputs = torch.where(torch.tensor(kind == 0), mask_id,
                         torch.where(torch.tensor(kind == 1), torch.tensor(rng.choice(regular, n)), targets))
    model = torch.tensor(rng.gamma(2.0, 1.5, n))
    nc = base.no_context_losses(inputs, targets)
    m = metrics.summarize(model, base.unigram_losses(targets), torch.tensor(np.repeat(np.arange(90), 10)),
                          is_mask=inputs == mask_id, no_context_losses=nc)
    return m, model, nc, (inputs != mask_id).numpy()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_visible_target_losses_equal_the_direct_means_over_visible_tokens(seed):
    m, model, nc, visible = _evaluation(seed)
    assert 0.1 < visible.mean() < 0.3  # the path ran: there are visible targets, and most are [MASK]
    got_model, got_nc = visible_targets(m, "val")
    assert got_model == pytest.approx(float(model.numpy()[visible].mean()), rel=1e-9)
    assert got_nc == pytest.approx(float(nc.numpy()[visible].mean()), rel=1e-9)
    test = {f"test_{k}": v for k, v in m.items() if not k.startswith("val_")}
    test.update(test_loss=m["val_loss"], test_tokens=m["val_tokens"])
    assert visible_targets(test, "test") == pytest.approx((got_model, got_nc), rel=1e-12)


def test_visible_targets_are_nan_without_counts_or_visible_tokens():
    assert all(math.isnan(x) for x in visible_targets({"val_loss": 4.0, "mask_loss": 4.5}, "val"))
    full_mask = {"val_loss": 4.0, "mask_loss": 4.0, "val_tokens": 100, "mask_tokens": 100}
    assert all(math.isnan(x) for x in visible_targets(full_mask, "val"))


def _welch(a, b):
    a, b = np.asarray(a), np.asarray(b)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    diff = a.mean() - b.mean()
    return diff, diff - half, diff + half


def test_differences_per_kind_match_scipy_welch_and_render():
    mask = {"pt": [4.70, 4.74, 4.73, 4.76], "bert": [4.85, 4.90, 4.83]}
    vis = {"pt": [4.10, 4.20, 4.15, 4.18], "bert": [3.45, 3.50, 3.40]}
    runs = pd.DataFrame([{"series": s, "scale": 32, "seed": i, "mask_loss": mask[s][i], "visible_loss": vis[s][i]}
                         for s in mask for i in range(len(mask[s]))])
    by = target_kinds.differences(runs, ["pt"], ["bert"], [32])
    for col, values in (("mask_loss", mask), ("visible_loss", vis)):
        d = by[col]["pt-bert"]["32"]
        want = _welch(values["pt"], values["bert"])
        assert (d["diff"], d["lo"], d["hi"]) == pytest.approx(want, rel=1e-9)
    assert by["mask_loss"]["pt-bert"]["32"]["decided"] == "a_lower"
    assert by["visible_loss"]["pt-bert"]["32"]["decided"] == "b_lower"
    text = "\n".join(target_kinds.report_lines({"by_target": by}))
    lo, hi = by["visible_loss"]["pt-bert"]["32"]["lo"], by["visible_loss"]["pt-bert"]["32"]["hi"]
    assert f"- visible targets, pt-bert: N=32: +{vis_diff(vis):.3f} [{lo:+.3f}, {hi:+.3f}] (4 / 3 seeds)" in text
    one_seed = runs[runs["seed"] == 0]
    assert "(no seed spread: no interval)" in "\n".join(
        target_kinds.report_lines({"by_target": target_kinds.differences(one_seed, ["pt"], ["bert"], [32, 64])}))
    assert target_kinds.report_lines({}) == []


def vis_diff(vis) -> float:
    return float(np.mean(vis["pt"]) - np.mean(vis["bert"]))
