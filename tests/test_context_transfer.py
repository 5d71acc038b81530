"""The context-transfer checks on an lr-transfer table (``ptsweep.analysis.context_transfer``), on synthetic tables
whose answers are known by construction."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ptsweep.analysis import context_transfer as ct
from ptsweep.analysis import transfer_drift as td

GRID = (2.0 ** -6, 2.0 ** -5, 2.0 ** -4)


def _rows(par, width, lr, seeds, losses, gains, se=0.015):
    return [{"label": f"lr-{par}-w{width}", "model.parametrization": par, "model.width": width, "optim.lr": lr,
             "seed": s, "val_loss": lo, "context_gain": g, "context_gain_se": se, "status": "ok"}
            for s, lo, g in zip(seeds, losses, gains)]


def _study(mup_gains: dict, sp_gains: list, mup_loss: dict, opt=2.0 ** -5, sp_opt=2.0 ** -5):
    """Every width: seed 0 over GRID (the optimum's neighbours 0.2 nats worse), seeds 0-2 at the optimum."""
    rows = []
    for w, gains in mup_gains.items():
        for lr in GRID:
            if lr != opt:
                rows += _rows("mup", w, lr, [0], [mup_loss[w][0] + 0.2], [gains[0] + 0.3])  # one seed: never "best"
        rows += _rows("mup", w, opt, [0, 1, 2], mup_loss[w], gains)
    rows += _rows("sp", 32, sp_opt, [0, 1, 2], [6.0, 6.05, 5.95], sp_gains)
    for lr in GRID:
        if lr != sp_opt:
            rows += _rows("sp", 32, lr, [0], [6.3], [0.0])
    return pd.DataFrame(rows)


def _criteria(df):
    return ct.criteria(df, td.drift(df, "optim.lr"))


FLAT = {32: [6.00, 6.05, 5.95], 64: [5.99, 6.04, 5.96], 128: [5.98, 6.04, 5.94]}


def test_context_vs_sp_is_paired_by_seed():
    """muP 0.02 below SP at every seed with a spread of 0.005: paired SE 0.003, so it fails although the seed spread
    of each (0.1) would hide it unpaired; with a seed-dependent difference of the same mean it passes."""
    sp = [0.30, 0.20, 0.40]
    tight = _criteria(_study({32: [0.285, 0.18, 0.375], 64: [0.3] * 3, 128: [0.3] * 3}, sp, FLAT))
    v = tight["context_vs_sp"]
    assert v["width"] == 32 and v["n"] == 3
    assert v["diff"] == pytest.approx(-0.02) and v["se"] == pytest.approx(0.005 / math.sqrt(3))
    assert v["passed"] is False
    loose = _criteria(_study({32: [0.32, 0.16, 0.39], 64: [0.3] * 3, 128: [0.3] * 3}, sp, FLAT))["context_vs_sp"]
    assert loose["diff"] == pytest.approx(-0.01) and loose["passed"] is True


def test_best_context_uses_only_values_with_every_seed():
    df = _study({32: [0.26, 0.27, 0.28], 64: [0.3] * 3, 128: [0.3] * 3}, [0.2, 0.2, 0.2], FLAT)
    g = df[(df["model.parametrization"] == "mup") & (df["model.width"] == 32)]
    b = ct.best_context(g, td.optimum(g, "optim.lr")["candidates"])
    assert b["x"] == 2.0 ** -5 and b["n_seeds"] == 3            # the one-seed points have +0.56, not eligible
    assert b["context_gain"] == pytest.approx(0.27)
    sd = np.std([0.26, 0.27, 0.28], ddof=1)
    assert b["context_gain_se"] == pytest.approx(math.sqrt(0.015 ** 2 + sd ** 2 / 3))


def test_context_floor_names_the_widths_below_it():
    c = _criteria(_study({32: [0.3] * 3, 64: [0.24, 0.25, 0.23], 128: [0.26] * 3}, [0.3] * 3, FLAT))
    assert c["context_floor"]["below"] == {64: pytest.approx(0.24)} and c["context_floor"]["passed"] is False
    ok = _criteria(_study({32: [0.3] * 3, 64: [0.25] * 3, 128: [0.26] * 3}, [0.3] * 3, FLAT))
    assert ok["context_floor"]["passed"] is True


def test_loss_vs_width_is_paired_and_covers_every_pair():
    """Width 128 is 0.01 worse than 32 at every seed (paired SE ~0): fails; pairs (32,64), (32,128), (64,128)."""
    worse = {32: [6.00, 6.05, 5.95], 64: [5.99, 6.04, 5.96], 128: [6.011, 6.06, 5.959]}
    c = _criteria(_study({w: [0.3] * 3 for w in worse}, [0.3] * 3, worse))
    pairs = {(p["narrow"], p["wide"]): p for p in c["loss_vs_width"]["pairs"]}
    assert set(pairs) == {(32, 64), (32, 128), (64, 128)}
    assert pairs[(32, 128)]["diff"] == pytest.approx(0.01) and pairs[(32, 128)]["passed"] is False
    assert pairs[(32, 64)]["passed"] is True and c["loss_vs_width"]["passed"] is False
    assert _criteria(_study({w: [0.3] * 3 for w in FLAT}, [0.3] * 3, FLAT))["loss_vs_width"]["passed"] is True


def test_drift_passes_within_one_factor_of_two_and_not_on_a_grid_edge():
    ok = _criteria(_study({w: [0.3] * 3 for w in FLAT}, [0.3] * 3, FLAT))
    assert ok["drift"]["drift_log2"] == 0.0 and ok["drift"]["passed"] is True and ok["passed"] is True
    edge = _criteria(_study({w: [0.3] * 3 for w in FLAT}, [0.3] * 3, FLAT, opt=2.0 ** -4))
    assert edge["drift"]["is_bound"] is True and edge["drift"]["passed"] is False
    text = ct.markdown(edge)
    assert "drift" in text and "FAIL" in text and "overall FAIL" in text


def test_missing_sp_or_context_columns_are_reported_not_guessed():
    df = _study({w: [0.3] * 3 for w in FLAT}, [0.3] * 3, FLAT)
    c = _criteria(df[df["model.parametrization"] == "mup"])
    assert c["context_vs_sp"]["passed"] is None and c["passed"] is None
    c2 = _criteria(df.drop(columns=["context_gain", "context_gain_se"]))
    assert c2["context_floor"]["passed"] is None and "n/a" in ct.markdown(c2)


def test_one_seed_gives_no_verdict():
    """Seed 0 alone (stage 1 of a running study) has no paired SE: the checks that need one say n/a, not FAIL."""
    df = _study({w: [0.3] * 3 for w in FLAT}, [0.3] * 3, FLAT)
    c = _criteria(df[df["seed"] == 0])
    assert c["context_vs_sp"]["passed"] is None and c["loss_vs_width"]["passed"] is None and c["passed"] is None
    assert "paired seed" in ct.markdown(c)


def test_the_checks_read_the_anchored_mup_variant_when_the_study_has_no_plain_mup():
    df = _study({32: [0.3] * 3, 64: [0.3] * 3, 128: [0.3] * 3}, [0.3] * 3, FLAT)
    df["model.parametrization"] = df["model.parametrization"].replace({"mup": "mup_sp"})
    df["label"] = df["label"].str.replace("lr-mup-", "lr-mup_sp-")
    c = _criteria(df)
    assert set(c["best"]) == {"mup_sp", "sp"}
    assert c["drift"]["passed"] is True and c["loss_vs_width"]["passed"] is not None
    assert c["context_vs_sp"]["width"] == 32
