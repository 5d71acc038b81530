"""No verdict from a model still leaving its plateau (``learning_curves.plateau_cells``, ``framings.plateau_gate``):
the cells whose slowest seed reaches the context-gain threshold after budget / factor (or never) are named with the
step, checked against hand-made curves; on a hand-made table where PT's loss is far below BERT's at 2 scales, the
scale where BERT was late reads "undecided: bert first reached ..., so it was still leaving its plateau" in every
statement, the other scale keeps PT's win, and without the gate (``late`` None) both scales decide. The context gate
keeps its own reason where both apply. scaling-curves wires it from ``sweep.plateau_*`` (the demo turns it off)."""

from __future__ import annotations

import pandas as pd
import pytest

from ptsweep.analysis import framings
from ptsweep.analysis import learning_curves as lc
from ptsweep.analysis.model_spread import cell_spreads
from ptsweep.config import compose
from ptsweep.errors import ConfigError

LATE_64 = "bert first reached +1 nat of context gain at step 30, after 40 / 1.5 steps"


def _curves(rows: list[tuple[str, int, int, list[float]]]) -> pd.DataFrame:
    """Learning curves at steps 0 / 10 / 20 / 30 / 40: (series, scale, seed, gains) per run."""
    return pd.concat([pd.DataFrame({"series": s, "scale": sc, "seed": seed, "trial_key": f"{s}{sc}{seed}",
                                    "step": [0, 10, 20, 30, 40], "context_gain": gains})
                      for s, sc, seed, gains in rows], ignore_index=True)


CURVES = _curves([("bert", 32, 0, [0, 0.1, 1.1, 1.2, 1.3]), ("bert", 32, 1, [0, 0.2, 1.0, 1.3, 1.4]),
                  ("bert", 64, 0, [0, 1.1, 1.2, 1.3, 1.4]), ("bert", 64, 1, [0, 0.1, 0.5, 1.2, 1.5]),
                  ("pt", 32, 0, [0, 1.2, 1.3, 1.3, 1.3]), ("pt", 64, 0, [0, 0.2, 0.4, 0.6, 0.8])])


def test_plateau_cells_name_the_slowest_seed_past_budget_over_factor():
    late = lc.plateau_cells(CURVES, budget_steps=40, threshold=1.0, factor=1.5)  # the limit: step 26.7
    assert late == {("bert", "64"): LATE_64,  # seed 1 at 30 > 26.7; seed 0 at 10 does not save the cell
                    ("pt", "64"): "pt never reached +1 nat of context gain in 40 steps"}
    assert lc.plateau_cells(CURVES, budget_steps=45, factor=1.5) == {  # limit 30: reaching it at 30 is in time
        ("pt", "64"): "pt never reached +1 nat of context gain in 45 steps"}
    assert set(lc.plateau_cells(CURVES, 40, threshold=0.5, factor=2.0)) == {("pt", "64")}  # limit 20: 0.6 at 30
    assert lc.plateau_cells(CURVES, 40, threshold=0.1, factor=1.0) == {}


def _comparisons(late) -> dict:
    """PT 0.3 below BERT at scales 32 and 64 (2 seeds each, seed noise +-0.004, both learned context)."""
    rows = [{"series": m, "model": m, "scale": s, "seed": seed, "params": 1e6 * (1 + i),
             "non_embedding_params": 5e5 * (1 + i), "train_flops": 6e11 * (1 + i),
             "loss": 6.0 + (0.3 if m == "bert" else 0.0) - 0.05 * i + eps, "context_gain": 1.2, "context_gain_se": 0.04}
            for m in ("pt", "bert") for i, s in enumerate((32, 64)) for seed, eps in ((0, -0.004), (1, 0.004))]
    runs = pd.DataFrame(rows)
    table = runs.groupby(["series", "scale"], as_index=False).agg(
        loss=("loss", "mean"), context_gain=("context_gain", "mean"), context_gain_se=("context_gain_se", "mean"))
    return framings.comparisons(runs, table, cell_spreads(runs), ["pt"], ["bert"], [32, 64],
                                late=late)


def test_a_late_model_decides_nothing_at_its_scale():
    reason = framings.PLATEAU.format(why=LATE_64)
    assert reason == f"undecided: {LATE_64}, so it was still leaving its plateau"
    comp = _comparisons({("bert", "64"): LATE_64})
    diff = comp["differences"]["pt-bert"]
    assert diff["64"]["hi"] < 0 and diff["64"]["decided"] == "undecided"  # the losses alone: PT lower
    assert diff["64"]["reason"] == reason and diff["64"]["plateau"] == ["bert"]
    assert diff["32"]["decided"] == "a_lower" and "reason" not in diff["32"]
    for name, res in comp["framings"].items():
        assert res["pt-bert"]["per_scale"]["64"]["reason"] == reason, name
        assert res["pt-bert"]["plateau_at"] == ["64"] and res["pt-bert"]["every_scale"] is None, name
    assert comp["pt_beats_bert_at_every_scale"] is None
    assert comp["statements"]["pt_beats_bert_at_every_scale"] == f"{reason} (N = 64)"
    assert comp["winners"]["64"] == {**comp["winners"]["64"], "winner": None, "reason": reason}
    assert comp["winners"]["32"]["winner"] == "pt"
    ungated = _comparisons(None)
    assert ungated["pt_beats_bert_at_every_scale"] is True and ungated["winners"]["64"]["winner"] == "pt"


def test_the_context_gate_keeps_its_reason_where_both_apply():
    per = {"64": {"decided": "a_lower", "diff": -0.3}}
    gated = framings.gate(per, ("pt", "bert"), learned={("pt", "64")}, edged={}, late={("bert", "64"): LATE_64})
    assert gated["64"]["reason"] == framings.NO_CONTEXT.format(models="bert") and "plateau" not in gated["64"]
    late_only = framings.gate(per, ("pt", "bert"), {("pt", "64"), ("bert", "64")}, {}, {("bert", "64"): LATE_64})
    assert late_only["64"]["plateau"] == ["bert"] and per["64"]["decided"] == "a_lower"  # the input is not changed
    assert lc.plateau_text(None, 4).startswith("Plateau gate: off")
    assert "all 4 (model, scale) cells with learning curves reached" in lc.plateau_text({}, 4)
    assert lc.plateau_text({}, 0) == "Plateau gate: no reported run has a learning curve yet, so it has judged nothing."
    assert lc.plateau_text({"bert at scale 64": LATE_64}, 4).endswith(f"comparisons of bert at scale 64 ({LATE_64}).")


def test_the_gate_settings_are_checked_and_the_demo_turns_it_off():
    assert compose([]).sweep.plateau_gate is True and compose(["preset=demo"]).sweep.plateau_gate is False
    assert compose(["preset=trained"]).sweep.plateau_factor == 1.5
    with pytest.raises(ConfigError, match="sweep.plateau_factor"):
        compose(["sweep.plateau_factor=0.5"])
    with pytest.raises(ConfigError, match="sweep.plateau_gain"):
        compose(["sweep.plateau_gain=0"])
