"""No verdict from a model that learned nothing: a PT - baseline comparison where either side's context
gain is not > 2 SE says "undecided: <model> learned no context at this budget" on every surface - scaling-curves'
``differences``, framings, every-scale verdicts, statements and winners (summary.json), its report / printed lines,
and the demo report's first-screen line, table and section. The same table with a baseline that learned gives the
verdict its losses support (so the gate, not the data, makes the difference)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ptsweep.analysis import framings
from ptsweep.analysis.model_spread import cell_spreads
from ptsweep.reports import demo_report

SCALES = [32, 64, 128]
UNDECIDED = "undecided: bert learned no context at this budget"
VERDICTS = ("] PT lower", "-> PT lower")  # a decision after its interval (tables, lists)


def _tables(bert_gain: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, results) of PT and BERT at 3 scales x 2 seeds: PT's loss ~0.3 below BERT's at every scale (well
    beyond the seed noise), PT's context gain 0.25 +- 0.02, BERT's ``bert_gain`` +- 0.02."""
    rows = []
    for series, offset, gain in (("pt", 0.0, 0.25), ("bert", 0.3, bert_gain)):
        for i, s in enumerate(SCALES):
            params = 1e6 * 2 ** i
            for seed, eps in ((0, -0.004), (1, 0.004)):
                rows.append({"series": series, "model": series, "scale": s, "seed": seed, "params": params,
                             "non_embedding_params": params / 2, "train_flops": 6 * params * 1e5,
                             "loss": 6.0 + offset - 0.05 * i + eps, "context_gain": gain, "context_gain_se": 0.02})
    runs = pd.DataFrame(rows)
    table = runs.groupby(["series", "scale"], as_index=False).agg(
        loss=("loss", "mean"), context_gain=("context_gain", "mean"), context_gain_se=("context_gain_se", "mean"))
    return runs, table


def _comparisons(bert_gain: float) -> dict:
    runs, table = _tables(bert_gain)
    return framings.comparisons(runs, table, cell_spreads(runs), ["pt"], ["bert"], SCALES)


def _surfaces(comp: dict) -> dict[str, str]:
    """Every place a newcomer reads the PT - BERT comparison, as text."""
    summary = {"match": "total", **comp}
    runs, table = _tables(0.0)
    models = pd.DataFrame([{"role": "scaling", "name": f"{x} N={s}", "model": x, "width": s, "loss": 6.0,
                            "no_context": 5.9, "gain": g, "gain_se": 0.02, "learned": g > 0.04}
                           for x, g in (("pt", 0.25), ("bert", 0.0)) for s in SCALES])
    sres = table.assign(unigram_loss=6.3, loss_lo=math.nan, loss_hi=math.nan)
    return {"framings report / printed": "\n".join(framings.report_lines(summary)),
            "winners printed": framings.winners_text(comp["winners"]),
            "demo first screen": demo_report.every_scale_line(summary),
            "demo table": "\n".join(demo_report.scaling_table(models, summary)),
            "demo section": "\n".join(demo_report.scaling_section(summary, sres, models))}


def test_a_baseline_that_learned_nothing_gets_no_verdict_anywhere():
    comp = _comparisons(bert_gain=0.01)  # 0.01 < 2 x 0.02: BERT learned no context
    for s, d in comp["differences"]["pt-bert"].items():
        assert d["diff"] == pytest.approx(-0.3) and d["hi"] < 0  # the losses alone would say "PT lower"
        assert d["decided"] == "undecided" and d["reason"] == UNDECIDED and d["no_context"] == ["bert"]
    for name, res in comp["framings"].items():
        assert res["pt-bert"]["every_scale"] is None, name
        assert all(d["reason"] == UNDECIDED for d in res["pt-bert"]["per_scale"].values())
        assert comp["pt_beats_bert_by_framing"][name] is None
    assert comp["pt_beats_bert_at_every_scale"] is None
    assert comp["statements"]["pt_beats_bert_at_every_scale"] == f"{UNDECIDED} (N = 32, 64, 128)"
    assert all(w["winner"] is None and w["reason"] == UNDECIDED for w in comp["winners"].values())
    for where, text in _surfaces(comp).items():
        assert UNDECIDED in text, where
        assert not any(v in text for v in VERDICTS) and ": yes" not in text and "True" not in text, where


def test_a_baseline_that_learned_gets_the_verdict_of_its_losses():
    comp = _comparisons(bert_gain=0.2)
    assert {d["decided"] for d in comp["differences"]["pt-bert"].values()} == {"a_lower"}
    assert comp["pt_beats_bert_at_every_scale"] is True and comp["statements"]["pt_beats_bert_at_every_scale"] == "yes"
    assert all(w["winner"] == "pt" for w in comp["winners"].values())
    assert comp["pt_beats_bert_by_framing"]["total"] is True
    for where, text in _surfaces(comp).items():
        if where != "winners printed":
            assert "undecided: bert" not in text and any(v in text for v in (*VERDICTS, "**yes**")), where


def test_one_unlearned_scale_keeps_every_scale_undecided_and_names_it():
    runs, table = _tables(0.2)
    table.loc[(table["series"] == "bert") & (table["scale"] == 64), "context_gain"] = 0.0
    learned = framings.learned_cells(table)
    per = {str(s): {"decided": "a_lower"} for s in SCALES}
    gated = framings.context_gate(per, ("pt", "bert"), learned)
    assert [gated[s]["decided"] for s in ("32", "64", "128")] == ["a_lower", "undecided", "a_lower"]
    assert framings.every_scale(gated)["every_scale"] is None
    assert framings.verdict_text(None, gated) == f"{UNDECIDED} (N = 64)"
