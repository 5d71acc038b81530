"""No verdict against an untuned model (``framings.edge_gate``): on hand-made tables of PT and UT at 3 scales, a
scale where the baseline lost while its best LR sits on an edge of its tuning range reads "undecided: ut's LR is at
the edge of its tuning range (<lr>)" in every statement (as-run differences, framings, every-scale verdicts and
statements, winners, report lines); a model that won there keeps its win; PT that lost on the edge of its LR grid
is gated the same way; without an edge flag the losses decide."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ptsweep.analysis import framings
from ptsweep.analysis.model_spread import cell_spreads

SCALES = [32, 64, 128]
EDGE = "undecided: ut's LR is at the edge of its tuning range (0.004)"


def _comparisons(ut_offset: float, edges: dict[int, str], pt_edges: dict[int, str] | None = None) -> dict:
    """PT and UT at 3 scales x 2 seeds, UT's loss ``ut_offset`` above PT's (well beyond the seed noise +-0.004),
    both learned context; UT's lr_edge per scale from ``edges`` (best LR 4e-3 everywhere), PT's from ``pt_edges``
    (best LR 2e-2)."""
    rows = []
    for series, offset in (("pt", 0.0), ("ut", ut_offset)):
        for i, s in enumerate(SCALES):
            params = 1e6 * 2 ** i
            for seed, eps in ((0, -0.004), (1, 0.004)):
                rows.append({"series": series, "model": series, "scale": s, "seed": seed, "params": params,
                             "non_embedding_params": params / 2, "train_flops": 6 * params * 1e5,
                             "loss": 6.0 + offset - 0.05 * i + eps, "context_gain": 0.25, "context_gain_se": 0.02})
    runs = pd.DataFrame(rows)
    table = runs.groupby(["series", "scale"], as_index=False).agg(
        loss=("loss", "mean"), context_gain=("context_gain", "mean"), context_gain_se=("context_gain_se", "mean"))
    table["best_lr"] = np.where(table["series"] == "ut", 4e-3, 2e-2)
    table["lr_edge"] = [(edges if x == "ut" else pt_edges or {}).get(s, "")
                        for x, s in zip(table["series"], table["scale"])]
    return framings.comparisons(runs, table, cell_spreads(runs), ["pt"], ["ut"], SCALES)


def _report(comp: dict) -> str:
    return "\n".join(framings.report_lines({"match": "total", **comp})) + framings.winners_text(comp["winners"])


def test_a_baseline_that_lost_on_the_edge_of_its_lr_range_gets_no_verdict_there():
    comp = _comparisons(0.3, {64: "high"})
    diff = comp["differences"]["pt-ut"]
    assert diff["64"]["diff"] == pytest.approx(-0.3) and diff["64"]["hi"] < 0  # the losses alone: PT lower
    assert diff["64"]["decided"] == "undecided" and diff["64"]["reason"] == EDGE and diff["64"]["lr_edge"] == "ut"
    assert diff["32"]["decided"] == diff["128"]["decided"] == "a_lower" and "reason" not in diff["32"]
    for name, res in comp["framings"].items():  # the fitted-curve framings: the same scale gated
        per = res["pt-ut"]["per_scale"]
        assert per["64"]["reason"] == EDGE and per["32"]["decided"] == "a_lower", name
        assert res["pt-ut"]["every_scale"] is None and res["pt-ut"]["lr_edge_at"] == ["64"], name
        assert res["pt-ut"]["undecided_at"] == [], name
    assert comp["statements"]["ut_beats_pt_at_every_scale"] == "no"  # PT's wins at 32 and 128 stand
    assert comp["winners"]["64"]["winner"] is None and comp["winners"]["64"]["reason"] == EDGE
    assert comp["winners"]["32"]["winner"] == "pt"
    report = _report(comp)
    assert f"{EDGE} (N = 64)" in report and f"64: {EDGE}" in report and "**yes**" not in report


def test_a_baseline_that_won_on_the_edge_keeps_its_win():
    comp = _comparisons(-0.3, {s: "high" for s in SCALES})  # UT lower everywhere, every LR on the edge
    assert {d["decided"] for d in comp["differences"]["pt-ut"].values()} == {"b_lower"}
    assert comp["ut_beats_pt_at_every_scale"] is True and comp["statements"]["ut_beats_pt_at_every_scale"] == "yes"
    assert all(w["winner"] == "ut" and "reason" not in w for w in comp["winners"].values())
    assert "edge of its tuning range" not in _report(comp)


def test_pt_that_lost_on_the_edge_of_its_lr_grid_gets_no_verdict_there():
    comp = _comparisons(-0.3, {}, {s: "low" for s in SCALES})  # UT lower everywhere, PT's LR grid on its low edge
    pt_edge = "undecided: pt's LR is at the edge of its tuning range (0.02)"
    assert all(d["reason"] == pt_edge and d["lr_edge"] == "pt" for d in comp["differences"]["pt-ut"].values())
    assert comp["ut_beats_pt_at_every_scale"] is None
    assert all(w["winner"] is None and w["reason"] == pt_edge for w in comp["winners"].values())
    comp = _comparisons(0.3, {}, {s: "low" for s in SCALES})  # PT lower everywhere: its wins stand
    assert {d["decided"] for d in comp["differences"]["pt-ut"].values()} == {"a_lower"}


def test_without_an_edge_flag_the_losses_decide():
    comp = _comparisons(0.3, {})
    assert {d["decided"] for d in comp["differences"]["pt-ut"].values()} == {"a_lower"}
    assert comp["ut_beats_pt_at_every_scale"] is False
    assert all(res["pt-ut"]["every_scale"] is True for res in comp["framings"].values())
    assert all(w["winner"] == "pt" for w in comp["winners"].values())
    assert "edge of its tuning range" not in _report(comp)


def test_edge_cells_read_every_flag_and_a_table_without_the_column():
    table = pd.DataFrame({"series": ["ut", "ut", "ut", "pt"], "scale": [32, 64, 128, 32],
                          "lr_edge": ["low", "", "single", ""], "best_lr": [1e-3, 2e-3, 3e-3, 2e-2]})
    assert framings.edge_cells(table) == {("ut", "32"): 1e-3, ("ut", "128"): 3e-3}
    assert framings.edge_cells(table.drop(columns=["lr_edge"])) == {}
