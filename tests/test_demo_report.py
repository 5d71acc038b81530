"""The demo chain and its report: one run serving two sweeps, and a first screen a newcomer can read.

Properties:
- ``share_runs`` gives a planned trial the ledger record and the learning curve of a finished run with the same config
  digest (status ok only), never overwrites a record, and says where the record came from;
- a smoke-sized demo (real Ray, Optuna, training; run by test_demo_signals, which stops it twice and resumes it:
  ``check_report``) reuses tune-small's best trial as PT's scaling point at the tuning width and the verification
  base as PT's point at the verification width, without training them again; its report opens with the summary
  (what ran, both baselines, the three results, the context check), puts every final model next to both baselines
  with its context gain, draws the demo figures and says how to open the Optuna study and sync W&B.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ptsweep.io import write_json
from ptsweep.trials.ledger import read_ledger
from ptsweep.sweeps.demo import share_runs



def _rec(key: str, status: str = "ok", loss: float = 5.9) -> dict:
    return {"trial_key": key, "status": status, "val_loss": loss, "test_loss": loss + 0.1, "context_gain": 0.3,
            "context_gain_se": 0.02}


def test_share_runs_reuses_only_finished_identical_configs(tmp_path):
    root = tmp_path / "demo"
    write_json(root / "tune-small" / "trials" / "aaaa111111" / "final.json", _rec("aaaa111111"))
    curve = '{"step": 100, "context_gain": 0.2}\n{"step": 200, "context_gain": 0.4}\n'
    (root / "tune-small" / "trials" / "aaaa111111" / "history.jsonl").write_text(curve)
    write_json(root / "tune-small" / "trials" / "cccc333333" / "final.json", _rec("cccc333333", "early_stopped"))
    write_json(root / "verify-transfer" / "trials" / "base-s0-bbbb222222" / "final.json", _rec("base-s0-bbbb222222"))
    write_json(root / "scaling-curves" / "trials" / "final-pt-rank-w64-s1-dddd444444" / "final.json",
               _rec("final-pt-rank-w64-s1-dddd444444", loss=7.0))
    write_json(root / "verify-transfer" / "trials" / "base-s1-dddd444444" / "final.json", _rec("base-s1-dddd444444"))
    planned = {"final-pt-rank-w32-s0-aaaa111111": "final-pt-rank-w32-s0",   # = tune-small's trial
               "final-pt-rank-w64-s0-bbbb222222": "final-pt-rank-w64-s0",   # = the verification base, seed 0
               "final-pt-rank-w64-s1-dddd444444": "final-pt-rank-w64-s1",   # already finished here: kept
               "final-pt-rank-w32-s1-cccc333333": "final-pt-rank-w32-s1",   # source stopped early: not shared
               "final-pt-rank-w128-s0-eeee555555": "final-pt-rank-w128-s0"}  # no source
    shared = share_runs(root, "scaling-curves", planned)
    assert sorted((s["label"], s["from"]) for s in shared) == [
        ("final-pt-rank-w32-s0", "tune-small/aaaa111111"),
        ("final-pt-rank-w64-s0", "verify-transfer/base-s0-bbbb222222")]
    dst = root / "scaling-curves"
    rec = read_ledger(dst, "final-pt-rank-w32-s0-aaaa111111")
    assert rec["trial_key"] == "final-pt-rank-w32-s0-aaaa111111" and rec["shared_from"] == "tune-small/aaaa111111"
    assert rec["test_loss"] == pytest.approx(6.0)
    assert (dst / "trials" / "final-pt-rank-w32-s0-aaaa111111" / "history.jsonl").read_text() == curve  # its curve
    assert not (dst / "trials" / "final-pt-rank-w64-s0-bbbb222222" / "history.jsonl").exists()  # none to copy
    assert read_ledger(dst, "final-pt-rank-w64-s1-dddd444444")["val_loss"] == 7.0
    assert read_ledger(dst, "final-pt-rank-w32-s1-cccc333333") is None
    assert read_ledger(dst, "final-pt-rank-w128-s0-eeee555555") is None
    assert share_runs(root, "scaling-curves", planned) == []  # idempotent


def check_report(root: Path) -> None:
    """The finished smoke demo in ``root`` (PT and UT; test_demo_signals runs it, stopped twice and resumed): one
    run served two sweeps without training again, and the report's first screen, figures and summary are complete."""
    # one run, two sweeps: PT N=64 seed 0 = tune-small's best trial, PT N=128 seed 0 = the verification base
    shared = json.loads((root / "shared_runs.json").read_text())
    assert sorted(s["label"] for s in shared) == ["final-pt-channels-w128-s0", "final-pt-channels-w64-s0"]
    starts = (root / "scaling-curves" / "trial_starts.log").read_text()
    assert not any(s["trial_key"] in starts for s in shared)  # not trained again
    best = json.loads((root / "tune-small" / "summary.json").read_text())["best"]["trial_key"]
    assert any(s["from"] == f"tune-small/{best}" for s in shared)
    for s in shared:
        src = read_ledger(root / s["from"].split("/")[0], s["from"].split("/")[1])
        assert read_ledger(root / "scaling-curves", s["trial_key"])["test_loss"] == src["test_loss"]

    report = (root / "report.md").read_text()
    first = "\n".join(report.splitlines()[:30])  # the first screen
    for text in ("**What ran**", "**Baselines**", "test unigram", "no-context", "1. **Tuned point**",
                 "context gain", "2. **Transfer to width 128**", "3. **PT vs baselines**", "**Context check**",
                 "PT's smallest context gain", "2 runs served two sweeps"):
        assert text in first, text
    assert first.index("**What ran**") < first.index("1. **Tuned point**") < first.index("## 1. tune-small") \
        if "## 1. tune-small" in first else True
    assert "optuna-dashboard tune-small/optuna.journal" in report and "wandb sync" in report
    lines = report.splitlines()
    summary = lines[lines.index("## Summary"):next(i for i, ln in enumerate(lines) if ln.startswith("## 1."))]
    assert len(summary) <= 40, len(summary)  # one screen
    section2 = lines[lines.index(next(ln for ln in lines if ln.startswith("## 2."))):
                     lines.index(next(ln for ln in lines if ln.startswith("## 3.")))]
    assert _repeated_sentences(summary + section2) == []  # the transfer's statements once each
    numbered = [ln.split(" ")[1] for ln in lines if re.match(r"## \d+\. ", ln)]
    assert numbered == ["1.", "2.", "3.", "4.", "5.", "6."], numbered  # each section its own number, in order
    own, _, trained = report.partition("\n## 5. The answer at a trained budget")  # 5 quotes the committed study
    assert own.count("PT beats BERT at every scale") == 1 and own.count("Baseline LR search at its edge") <= 1
    assert "not run by this command; `make report STUDY=experiments/scaling/results/scaling-trained`" in trained
    for fig in ("demo_tuning.png", "demo_losses.png", "demo_context.png"):
        assert (root / fig).stat().st_size > 1000 and f"]({fig})" in report
    assert (root / "scaling-curves" / "fig2b_pt_vs_ut.png").stat().st_size > 1000  # PT vs the UT baseline
    summary = json.loads((root / "demo_summary.json").read_text())
    models = summary["final_models"]
    assert {m["role"] for m in models} == {"tuned point", "verification", "scaling"}
    assert {m["model"] for m in models} == {"pt", "ut"}
    for m in models:  # every final model: a loss, both baselines, a context gain with its SE
        assert all(math.isfinite(m[k]) for k in ("loss", "unigram", "no_context", "gain", "gain_se")), m
        assert m["learned"] == (m["gain"] > 2 * m["gain_se"])
    assert summary["all_learned_context"] == all(m["learned"] for m in models)


def test_the_report_calls_a_planes_regret_an_extrapolation():
    """Demo design (n = 8): the surface is a plane, its box minimum a corner no run measured (a recorded demo gave
    37.9 % [0, 72 %] from points all within 0.8 % of S) - the report must not read it as loss S leaves on the table."""
    from ptsweep.reports.demo_report import regret_text

    vs = {"regret": {"regret_rel": 0.379, "regret_rel_ci": [0.0, 0.72], "model": "linear"}}
    assert "extrapolated to the box's best corner" in regret_text(vs) and "37.90% [0.00%, 72.00%]" in regret_text(vs)
    vs["regret"]["model"] = "diagonal"
    assert regret_text(vs) == "regret 37.90% [0.00%, 72.00%] of the loss (diagonal surface)"


def test_the_transfer_results_first_line_says_when_n_points_bound_no_regret():
    """n = 8 perturbed points cannot identify the diagonal surface (15 coefficients over 7 keys): the first
    line says so and states the strict and contrast results once each, not the plane's extrapolated percentage."""
    from ptsweep.reports.demo_report import transfer_summary
    from ptsweep.sweeps.verify_transfer import headline

    vs = {"verdict": "inconclusive", "statement": "regret INCONCLUSIVE: a plane ... 7.30 %", "n_perturbed_run": 8,
          "regret": {"regret_rel": 0.073, "regret_rel_ci": [0.0, 0.2325], "model": "linear"},
          "strict": {"verdict": "PASS", "statement": "strict test PASSES: the base beats all 8 points."},
          "contrast_verdict": "inconclusive", "reasons": ["t = -1.2"],
          "contrast_statement": "INCONCLUSIVE: t = -1.2. (numbers.) strict test PASSES: the base beats all 8 points.",
          "n_valid": 8, "n_better": 0, "n_better_beyond_noise": 0}
    line = headline(vs)
    assert line.startswith("NO REGRET BOUND: n = 8 perturbed points cannot bound a regret")
    assert "15 coefficients: n >= 15" in line and "**PASS** - the base beats all 8 points" in line
    assert line.endswith("contrast rule **INCONCLUSIVE** - t = -1.2.") and line.count("beats all 8") == 1
    assert "7.30" not in transfer_summary(vs) and transfer_summary(vs).startswith("No regret bound: n = 8")
    assert ".;" not in line and ".." not in transfer_summary(vs)  # the statements' own full stops are not doubled
    vs["regret"]["model"] = "diagonal"  # n >= 15: the regret with its bound leads
    assert headline(vs) == vs["statement"]
    assert transfer_summary(vs).startswith("Regret verdict **INCONCLUSIVE**: regret 7.30% [0.00%, 23.25%]")
    assert "Strict test of [S]: **PASS** (0 of 8 points lower than the base)" in transfer_summary(vs)


def test_the_tuning_heading_names_the_early_stopping_the_search_used(tmp_path):
    """The demo turns ASHA off (sweep.asha_reduction 1): its report must not say ASHA stopped trials."""
    import pandas as pd

    from ptsweep.reports.demo_report import tuning_section
    from ptsweep.trials.fields import early_stopping_label

    assert early_stopping_label(0.25, 1) == "no early stopping"
    assert early_stopping_label(0.25, 3) == "ASHA (grace 0.25 of the budget, reduction 3)"
    values = {"optim.lr": 0.01, **{f"model.{w}": 1.0 for w in
                                   ("w_unary", "w_child", "w_head", "w_topic_z", "w_attn", "w_topic_g")}}
    trials = pd.DataFrame([{"trial_id": "t0", **values, "val_loss": 5.9, "val_loss_se": 0.04, "unigram_loss": 6.3,
                            "no_context_loss": 5.7, "context_gain": 0.3, "context_gain_se": 0.02, "status": "ok",
                            "steps": 192}])
    ts = {"best": {"values": values}, "notes": [], "plots": [], "early_stopping": early_stopping_label(0.25, 1)}
    heading = tuning_section(trials, ts, tmp_path, "fig.png", lambda p: p)[0]
    assert "no early stopping" in heading and "ASHA" not in heading


def _demo_design_summary() -> dict:
    """verify-transfer's summary.json for the demo design (n = 8 points, 2 paired seeds, alpha = p = 0.2), built by
    the real verdict, regret surface and summary code from synthetic losses: 6 of 8 points lower, none beyond noise."""
    import numpy as np
    import pandas as pd

    from ptsweep.analysis import regret, verification
    from ptsweep.config import TRANSFER_KEYS
    from ptsweep.sweeps import verify_transfer

    rng = np.random.default_rng(0)
    base = {k: 0.02 if k == "optim.lr" else 1.0 for k in TRANSFER_KEYS}
    points = [{k: v * rng.uniform(0.8, 1.2) for k, v in base.items()} for _ in range(8)]
    shift = [-0.004, -0.003, -0.002, -0.002, -0.001, -0.001, 0.003, 0.004]
    base_losses = [5.70, 5.72]
    losses = [[b + s + rng.normal(0, 0.0005) for b in base_losses] for s in shift]
    seeds = [[0, 1]] * 8
    contrast = verification.verdict(base_losses, losses, alpha=0.2, p=0.2, base_seeds=[0, 1], perturbed_seeds=seeds)
    reg = regret.regret_analysis(base, points, losses, base_losses, point_seeds=seeds, base_seeds=[0, 1])
    rows = [{"trial": f"base-s{s}", "seed": s, "loss": x} for s, x in enumerate(base_losses)]
    rows += [{"trial": f"p{j:03d}-s{s}", "seed": s, "loss": x} for j, xs in enumerate(losses) for s, x in enumerate(xs)]
    df = pd.DataFrame(rows).assign(val_loss=lambda d: d["loss"], val_loss_se=0.04, test_loss_se=0.04, status="ok",
                                   test_unigram_loss=6.36, test_no_context_loss=5.81, test_context_gain=0.38,
                                   test_context_gain_se=0.02)
    settings = {"loss_split": "test", "width": 64, "alpha": 0.2, "p": 0.2, "perturbed_seeds": 2, "perturb": 0.2,
                "regret_tolerance": 0.004}
    summary = verify_transfer._summary(contrast, {"regret": reg, "verdict": regret.regret_verdict(reg)}, df,
                                       pd.DataFrame(points), "test", (8, 8), settings)
    return {**summary, "settings": settings}


def _repeated_sentences(lines: list[str]) -> list[str]:
    """Sentences and clauses (split at full stops, semicolons and dashes; a "label: text" stays whole, so two notes on
    different baselines differ) of prose lines, not table rows, that occur more than once, ignoring case and
    emphasis."""
    import re

    seen, repeated = set(), []
    for line in lines:
        if line.lstrip().startswith("|"):
            continue
        for part in re.split(r"(?<=[.;])\)?\s+|\s+-\s+", line.replace("**", "")):
            key = " ".join(part.lower().strip(" .;:-").split())
            if len(key) >= 25:
                (repeated.append(key) if key in seen else seen.add(key))
    return repeated


def _demo_report_parts(vs: dict) -> tuple[list[str], list[str]]:
    """(summary lines, section 2 lines) of a demo report from the demo design's verify-transfer summary and small
    tune-small / scaling-curves inputs of the shapes the real sweeps write."""
    import pandas as pd

    from ptsweep.reports.demo_report import first_screen, verdict_section

    values = {"optim.lr": 0.02, **{f"model.{w}": 1.0 for w in
                                   ("w_unary", "w_child", "w_head", "w_topic_z", "w_attn", "w_topic_g")}}
    trials = pd.DataFrame([{"trial_id": "t0", **values, "val_loss": 5.90, "val_loss_se": 0.04, "unigram_loss": 6.30,
                            "no_context_loss": 5.73, "context_gain": 0.30, "context_gain_se": 0.02, "status": "ok"}])
    ts = {"best": {"trial_id": "t0", "values": values, "width": 32, "preset": "demo", "git_commit": "0fa719b",
                   "parametrization": "mup_sp", "scaling": "rank"}, "n_trials": 6, "status_counts": {"ok": 6},
          "early_stopping": "no early stopping"}
    models = pd.DataFrame([{"role": role, "name": name, "model": name.split()[0].lower(), "width": w, "loss": loss,
                            "unigram": 6.36, "no_context": 5.81, "gain": g, "gain_se": 0.02, "learned": g > 0.04}
                           for role, name, w, loss, g in (("tuned point", "trial t0", None, 5.95, 0.38),
                                                          ("scaling", "pt N=32", 32, 5.95, 0.38),
                                                          ("scaling", "bert N=32", 32, 6.40, -0.10))])
    ss = {"models": ["pt", "bert"], "scales": [32], "seeds": [0, 1],
          "differences": {"pt-bert": {"32": {"diff": -0.45, "lo": -0.5, "hi": -0.4, "decided": "undecided",
                                             "reason": "undecided: bert learned no context at this budget"}}},
          "statements": {"pt_beats_bert_at_every_scale": "undecided: bert learned no context at this budget"},
          "notes": []}
    wall = {"invocations": [{"tune-small": 150.0, "verify-transfer": 630.0, "scaling-curves": 852.0,
                             "total": 1644.0}]}
    info = {"steps": 300, "batch": 16, "seq_len": 64, "vocab": 8192, "test_blocks": 256, "test_tokens": 2000,
            "unigram": 6.36, "no_context": 5.81}
    return first_screen(trials, ts, vs, ss, models, wall, info), verdict_section(vs)


def test_the_demo_summary_fits_a_screen_and_says_each_thing_once():
    """The summary fits 40 lines, its transfer item is one sentence per claim (no regret bound, the strict test,
    the contrast rule), and nothing in the summary or section 2 is said twice (the contrast statement embeds the
    strict test; the headline once printed both, and section 2 all of it again)."""
    vs = _demo_design_summary()
    assert vs["regret"]["model"] == "linear" and vs["n_better"] == 6 and vs["strict"]["verdict"] == "fail"
    summary, section = _demo_report_parts(vs)
    assert len(summary) <= 40, len(summary)
    item = next(line for line in summary if line.startswith("2. **Transfer"))
    assert "No regret bound: n = 8 perturbed points cannot bound a regret" in item
    assert "Strict test of [S]: **FAIL** (6 of 8 points lower than the base)" in item
    assert f"Contrast rule: **{vs['contrast_verdict'].upper()}**" in item and len(item.split()) <= 110
    text = "\n".join(summary + section)
    assert text.count("strict test FAILS") == 1 and text.lower().count("how the contrast rule decides") == 1
    assert _repeated_sentences(summary + section) == []


def test_the_repeated_sentence_check_sees_a_repetition():
    """The check of the test above is not blind: the headline of verify-transfer before it stopped repeating the
    contrast statement (which embeds the strict test) trips it."""
    vs = _demo_design_summary()
    old_headline = (f"Instead: strict test of [S] §3.1 **{vs['strict']['verdict']}** - {vs['strict']['statement']}; "
                    f"contrast rule **{vs['contrast_verdict'].upper()}** - {vs['contrast_statement']}")
    assert _repeated_sentences([old_headline]) != []


def test_the_edge_line_says_the_shared_clause_once():
    """Several baselines at the edge of their search: each note names its own, and "the optimum may lie beyond",
    which every note of scaling-curves ends with, is said once."""
    from ptsweep.reports.demo_report import edge_lines

    notes = [f"{m} w{w}: best optim.lr 0.001 is not bracketed (low edge of the searched values) after 0 widening(s); "
             "the optimum may lie beyond" for m, w in (("bert", 32), ("ut", 32), ("ut", 64))]
    line = edge_lines({"notes": notes})[0]
    assert line.count("the optimum may lie beyond") == 1 and "(3;" in line and "ut w64: best optim.lr" in line
    assert _repeated_sentences([line]) == []
