"""The demo chain and its report: one run serving two sweeps, and a first screen a newcomer can read.

Properties:
- ``share_runs`` gives a planned trial the ledger record of a finished run with the same config digest (status ok
  only), never overwrites a record, and says where the record came from;
- a smoke-sized demo (real Ray, Optuna, training; run by test_demo_signals, which stops it twice and resumes it:
  ``check_report``) reuses tune-small's best trial as PT's scaling point at the tuning width and the verification
  base as PT's point at the verification width, without training them again; its report opens with the summary
  (what ran, both baselines, the three results, the context check), puts every final model next to both baselines
  with its context gain, draws the demo figures and says how to open the Optuna study and sync W&B.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ptsweep.io import write_json
from ptsweep.sweeps.ledger import read_ledger
from ptsweep.sweeps.demo import share_runs



def _rec(key: str, status: str = "ok", loss: float = 5.9) -> dict:
    return {"trial_key": key, "status": status, "val_loss": loss, "test_loss": loss + 0.1, "context_gain": 0.3,
            "context_gain_se": 0.02}


def test_share_runs_reuses_only_finished_identical_configs(tmp_path):
    root = tmp_path / "demo"
    write_json(root / "tune-small" / "trials" / "aaaa111111" / "final.json", _rec("aaaa111111"))
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
    from ptsweep.sweeps.demo_report import regret_text

    vs = {"regret": {"regret_rel": 0.379, "regret_rel_ci": [0.0, 0.72], "model": "linear"}}
    assert "extrapolated to the box's best corner" in regret_text(vs) and "37.90% [0.00%, 72.00%]" in regret_text(vs)
    vs["regret"]["model"] = "diagonal"
    assert regret_text(vs) == "regret 37.90% [0.00%, 72.00%] of the loss (diagonal surface)"


def test_the_transfer_results_first_line_says_when_n_points_bound_no_regret():
    """n = 8 perturbed points cannot identify the diagonal surface (15 coefficients over 7 keys): the first
    line says so and states the strict and contrast results, not the plane's extrapolated percentage."""
    from ptsweep.sweeps.demo_report import transfer_line
    from ptsweep.sweeps.verify_transfer import headline

    vs = {"verdict": "inconclusive", "statement": "regret INCONCLUSIVE: a plane ... 7.30 %", "n_perturbed_run": 8,
          "regret": {"regret_rel": 0.073, "regret_rel_ci": [0.0, 0.2325], "model": "linear"},
          "strict": {"verdict": "PASS", "statement": "the base beats all 8 points."},
          "contrast_verdict": "inconclusive", "contrast_statement": "INCONCLUSIVE: t = -1.2.", "n_valid": 8,
          "neighbourhood_delta": 0.004, "neighbourhood_se": 0.002, "neighbourhood_t": 2.0}
    line = headline(vs)
    assert line.startswith("NO REGRET BOUND: n = 8 perturbed points cannot bound a regret")
    assert "15 coefficients: n >= 15" in line and "**PASS** - the base beats all 8 points" in line
    assert "contrast rule **INCONCLUSIVE** - INCONCLUSIVE: t = -1.2" in line
    assert "7.30" not in transfer_line(vs) and transfer_line(vs).startswith("NO REGRET BOUND")
    assert ".;" not in line and ".." not in transfer_line(vs)  # the statements' own full stops are not doubled
    vs["regret"]["model"] = "diagonal"  # n >= 15: the regret with its bound leads
    assert headline(vs) == vs["statement"]
    assert transfer_line(vs).startswith("**INCONCLUSIVE** (regret verdict): regret 7.30% [0.00%, 23.25%]")
    assert "strict test of [S] PASS" in transfer_line(vs)


def test_the_tuning_heading_names_the_early_stopping_the_search_used(tmp_path):
    """The demo turns ASHA off (sweep.asha_reduction 1): its report must not say ASHA stopped trials."""
    import pandas as pd

    from ptsweep.sweeps.demo_report import tuning_section
    from ptsweep.sweeps.fields import early_stopping_label

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
