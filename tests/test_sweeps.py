"""The three sweeps at smoke size on a local Ray (2 CPUs, shared by the module), W&B disabled, outputs in tmp_path.

Properties: verify-transfer runs n_run = max(n_required, sweep.n) perturbed points that stay within +-20% of
transfer.yaml and are reproducible from the seed; every sweep writes its files with sane contents; failed/diverged
trials are recorded with their error while the sweep completes; a fixed list whose ledger holds some finished trials
(what a killed sweep leaves) runs only the others and keeps the finished records as they were; a tune-small study
grows by exactly the added samples. That a stopped sweep, re-run, starts no finished trial again is proven end to end
once, on the demo chain (test_demo_signals.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytest.importorskip("ray")
pytest.importorskip("optuna")

from ptsweep.analysis import design  # noqa: E402
from ptsweep.config import TRANSFER_KEYS, compose  # noqa: E402
from ptsweep.errors import SweepError  # noqa: E402
from ptsweep.sweeps import baseline_tuning, scaling_curves, tune_small, verify_transfer
from ptsweep.trials import ledger, runner  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VERDICTS = {"pass", "fail", "flat", "inconclusive"}
TRANSFERRED = {"optim.lr": 0.02, "model.w_unary": 1.5, "model.w_child": 0.8, "model.w_head": 1.0, "model.w_topic_z": 1.2,
         "model.w_attn": 0.9, "model.w_topic_g": 2.0}


pytestmark = pytest.mark.usefixtures("ray_local")  # one local Ray for the module (conftest.py)


def smoke(out_dir: Path, *overrides: str):
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}", *overrides])


def write_transfer(path: Path, values: dict = TRANSFERRED) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"values": values, "provenance": {"study": "test"}}))
    return path


def start_counts(study_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    log = study_dir / ledger.STARTS_LOG
    for line in (log.read_text().splitlines() if log.exists() else []):
        key = line.split()[-1]
        counts[key] = counts.get(key, 0) + 1
    return counts


def assert_png(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 1000, path
    assert path.read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------------------------------------------
def test_failed_and_diverged_trials_are_recorded_and_a_partial_ledger_runs_only_the_rest(tmp_path):
    """Failed / diverged trials are recorded with their error and the list completes. A ledger holding only some
    trials of the list (what a sweep killed mid-way leaves) runs the others only, keeping the finished records as
    they were; a list entirely in the ledger starts nothing."""
    cfg = smoke(tmp_path)
    trials, labels = [{"optim.lr": 1e-2}, {"optim.lr": 1e30}, {"model.width": -1}], ["ok", "huge-lr", "bad-width"]
    sdir = tmp_path / "fixed"
    first = runner.run_trials(cfg, trials[:2], sdir, "t", labels=labels[:2])
    records = {k: (sdir / "trials" / k / "final.json").read_text() for k in first["trial_key"]}
    df = runner.run_trials(cfg, trials, sdir, "t", labels=labels)
    by = df.set_index("label")
    assert by.loc["ok", "status"] == "ok" and math.isfinite(by.loc["ok", "val_loss"])
    assert by.loc["huge-lr", "status"] == "diverged" and by.loc["huge-lr", "val_loss"] == math.inf
    assert by.loc["bad-width", "status"] == "failed" and by.loc["bad-width", "val_loss"] == math.inf
    assert "model.width" in by.loc["bad-width", "error"]
    assert by.loc["huge-lr", "error"]
    assert start_counts(sdir) == {k: 1 for k in df["trial_key"]}  # the two finished before were not started again
    assert {k: (sdir / "trials" / k / "final.json").read_text() for k in first["trial_key"]} == records
    # every trial is in the local results table of out_dir (train.run's tracker), failed ones excepted only when
    # the config itself could not be built
    res = pd.read_json(tmp_path / "results.jsonl", lines=True)
    assert len(res) == 2
    # a call with every trial in the ledger starts nothing
    mtimes = {k: (sdir / "trials" / k / "final.json").stat().st_mtime_ns for k in df["trial_key"]}
    df2 = runner.run_trials(cfg, trials, sdir, "t", labels=labels)
    assert start_counts(sdir) == {k: 1 for k in df["trial_key"]}
    assert {k: (sdir / "trials" / k / "final.json").stat().st_mtime_ns for k in df2["trial_key"]} == mtimes
    assert df2["status"].tolist() == df["status"].tolist()


def test_tune_small_writes_transfer_yaml_trials_and_plots_and_resumes(tmp_path, capsys):
    cfg = smoke(tmp_path, "sweep.num_samples=3")
    sdir = tune_small.run(cfg)
    err = capsys.readouterr().err  # a new study queues its start point; nothing was interrupted
    assert "3 to run (num_samples=3), the config's own point first" in err and "interrupted" not in err, err[-2000:]
    doc = yaml.safe_load((sdir / "transfer.yaml").read_text())
    assert set(doc["values"]) == set(TRANSFER_KEYS)
    lo, hi = cfg.sweep.lr_range
    assert lo <= doc["values"]["optim.lr"] <= hi
    for k in TRANSFER_KEYS[1:]:
        lo, hi = cfg.sweep.weight_ranges.get(k.split(".", 1)[1], cfg.sweep.weight_range)  # w_attn: [0.5, 4]
        assert lo <= doc["values"][k] <= hi
    prov = doc["provenance"]
    for key in ("study", "trial_id", "val_loss", "width", "data", "tokens", "git_commit"):
        assert key in prov, key
    assert prov["width"] == 64 and prov["data"] == "shakespeare" and math.isfinite(prov["val_loss"])
    trials = pd.read_parquet(sdir / "trials.parquet")
    assert len(trials) == 3 and len(pd.read_csv(sdir / "trials.csv")) == 3
    for col in (*TRANSFER_KEYS, "val_loss", "status", "error", "steps", "tokens"):
        assert col in trials.columns, col
    assert prov["val_loss"] == pytest.approx(trials.loc[trials["status"] == "ok", "val_loss"].min())
    for name in ("optuna_history", "optuna_slices"):
        assert_png(sdir / f"{name}.png")
    summary = json.loads((sdir / "summary.json").read_text())
    n_ok = int((trials["status"] == "ok").sum())
    if n_ok >= 2:
        assert_png(sdir / "optuna_importances.png")
    else:
        assert any("optuna_importances" in n for n in summary["notes"])
    assert "search" in summary and summary["search"]["n_startup_trials"] >= 1
    # the tuned point's loss is read against both context-free baselines and its [MASK]-target context gain
    best = summary["best"]
    assert math.isfinite(best["context_gain"]) and best["context_gain_se"] > 0
    assert best["no_context_loss"] < best["unigram_loss"]
    # the Optuna study persists in the study folder and loads with optuna.load_study; its first trial is the
    # config's own point (the search cannot end above the defaults)
    study = load_study(sdir)
    assert len(study.trials) == 3 and {t.state.name for t in study.trials} <= {"COMPLETE", "PRUNED", "FAIL"}
    assert study.trials[0].params == pytest.approx(tune_small.start_point(cfg))
    assert sorted(t.value for t in study.trials if t.state.name == "COMPLETE") == \
        sorted(trials.loc[trials["status"] == "ok", "val_loss"])
    # one more sample: exactly one more trial in the same study, the three finished ones are not re-run
    before = start_counts(sdir)
    assert sum(before.values()) == 3
    tune_small.run(smoke(tmp_path, "sweep.num_samples=4"))
    assert len(load_study(sdir).trials) == 4
    after = start_counts(sdir)
    assert sum(after.values()) == 4 and all(after[k] == 1 for k in before)
    assert len(pd.read_parquet(sdir / "trials.parquet")) == 4
    # another search space: one-line refusal naming the change, the study is untouched
    with pytest.raises(SweepError, match=r"another space .*optim\.lr") as err:
        tune_small.run(smoke(tmp_path, "sweep.num_samples=4", "sweep.lr_range=[0.002,0.05]"))
    assert "\n" not in str(err.value) and "sweep.study" in str(err.value)
    assert len(load_study(sdir).trials) == 4


def load_study(sdir: Path):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return optuna.load_study(study_name="search",
                             storage=JournalStorage(JournalFileBackend(str(sdir / "optuna.journal"))))


def test_verify_transfer_runs_max_of_required_and_n(tmp_path):
    tfile = write_transfer(tmp_path / "t" / "transfer.yaml")
    # n_run = max(n_required, sweep.n): both branches, without running anything
    cfg = smoke(tmp_path, f"sweep.transfer_file={tfile}", "sweep.alpha=0.2", "sweep.p=0.2", "sweep.n=3")
    trials, labels, n_req, n_run = verify_transfer.plan(cfg, TRANSFERRED)
    assert (n_req, n_run) == (8, 8) and sum(lab.startswith("p") for lab in labels) == 8
    cfg = smoke(tmp_path, f"sweep.transfer_file={tfile}", "sweep.alpha=0.2", "sweep.p=0.2", "sweep.n=10")
    assert verify_transfer.plan(cfg, TRANSFERRED)[3] == 10

    # smoke: alpha = p = 0.5 -> n_required = 1; sweep.n = 3 -> 3 perturbed points + 2 base seeds
    cfg = smoke(tmp_path, f"sweep.transfer_file={tfile}", "sweep.width=64", "sweep.n=3", "sweep.seeds=2",
                "sweep.perturbed_seeds=1", "sweep.search_seed=7")
    sdir = verify_transfer.run(cfg)
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["verdict"] in VERDICTS
    assert summary["n_required"] == 1 and summary["n_run"] == 3 and len(summary["base_losses"]) == 2
    res = pd.read_parquet(sdir / "results.parquet")
    assert len(res) == 3 + 1 and int(res["is_base"].sum()) == 1
    for col in ("trial", *TRANSFER_KEYS, "distance", "val_loss", "rel_increase", "rank", "status"):
        assert col in res.columns, col
    pert = res[~res["is_base"]].sort_values("trial").reset_index(drop=True)
    expected = design.perturb(TRANSFERRED, 3, 0.2, seed=7)  # reproducible from the seed
    for j, point in enumerate(expected):
        for k in TRANSFER_KEYS:
            assert pert.loc[j, k] == pytest.approx(point[k], rel=1e-12)
            assert 0.8 * TRANSFERRED[k] - 1e-12 <= pert.loc[j, k] <= 1.2 * TRANSFERRED[k] + 1e-12
    assert sorted(res["rank"]) == [1, 2, 3, 4]
    trials = pd.read_parquet(sdir / "trials.parquet")
    # paired design, one seed per point cycling through the 2 base seeds: points at seeds 0, 1, 0
    assert (trials["model.width"] == 64).all() and sorted(trials["seed"].tolist()) == [0, 0, 0, 1, 1]
    assert trials["test_loss"].map(math.isfinite).all() and summary["settings"]["loss_split"] == "test"
    assert summary["df"] == 0 and summary["verdict"] == "inconclusive"  # paired, one seed per point: no residual
    # the base point's context gain (seed mean of the runs' test context gains) and the no-context baseline
    base = trials[trials["label"].str.startswith("base")] if "label" in trials else trials.iloc[:0]
    if len(base):
        assert summary["base_context_gain"] == pytest.approx(base["test_context_gain"].mean(), abs=1e-9)
    assert math.isfinite(summary["base_context_gain_se"]) and math.isfinite(summary["no_context_loss"])
    assert summary["finished_runs"] == 5 and 0 <= summary["context_learned_runs"] <= 5
    assert "context gain" in (sdir / "report.md").read_text()
    assert_png(sdir / "fig1a_distance.png")
    assert_png(sdir / "fig1b_rank.png")


def test_verify_transfer_without_transfer_file_is_a_one_line_error(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "ptsweep", "verify-transfer", "preset=smoke", f"out_dir={tmp_path}"],
                         cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "transfer.yaml" in err[0] and "tune-small" in err[0]


def test_scaling_curves_table_fits_and_plots(tmp_path):
    tfile = write_transfer(tmp_path / "t" / "transfer.yaml")
    # PT and BERT (UT's scaling-curves path is the same baseline code; the demo test runs it: test_demo_signals)
    cfg = smoke(tmp_path, f"sweep.transfer_file={tfile}", "sweep.scales=[64,128]", "sweep.baseline.samples=1",
                "sweep.seeds=2", "sweep.bootstrap=50", "sweep.models=[pt,bert]")
    sdir = scaling_curves.run(cfg)
    runs = pd.read_parquet(sdir / "runs.parquet")
    assert len(runs) == 2 * 2 * 2 and sorted(set(runs["seed"])) == [0, 1]  # 2 series x 2 scales x 2 seeds
    ok_runs = runs[runs["status"] == "ok"]
    assert ok_runs["test_loss"].map(math.isfinite).all() and (ok_runs["loss"] == ok_runs["test_loss"]).all()
    assert (ok_runs["val_loss_se"] > 0).all() and (ok_runs["loss_token_se"] > 0).all()
    lr = pd.read_parquet(sdir / "lr_search.parquet")
    # no reported run is an LR-search trial (a reused winner's losses are biased low): searches train at seed 2
    assert not set(runs["trial_key"].dropna()) & set(lr["trial_key"])
    assert set(runs[runs["model"] != "pt"]["from"].dropna()) == {"final run"}
    assert baseline_tuning.search_training_seed(cfg) == 2
    assert all(json.loads((sdir / "trials" / k / "trial.json").read_text())["overrides"]["seed"] == 2
               for k in lr["trial_key"])
    # one trial per search is never bracketed: the edge rule re-searches once (sweep.baseline.lr_widen = 1)
    rounds = lr.groupby(["model", "scale"])["search_round"].agg(["min", "max", "size"])
    assert (rounds["min"] == 0).all() and (rounds["max"] == 1).all() and (rounds["size"] == 2).all()
    assert {"optim.lr", "optim.warmup_frac"} <= set(lr.columns)  # the baselines' own HPs, both searched
    for _, r in runs[runs["model"] != "pt"].iterrows():  # reported runs use the chosen values (fresh seeds)
        over = json.loads((sdir / "trials" / r["trial_key"] / "trial.json").read_text())["overrides"]
        info = json.loads((sdir / "summary.json").read_text())["lr_search"][f"{r['model']}-w{r['scale']}"]
        assert over["optim.warmup_frac"] == info["best"]["optim.warmup_frac"] and over["optim.lr"] == r["best_lr"]
    res = pd.read_parquet(sdir / "results.parquet")
    # every cell with its context gain and both context-free baselines, also in the report
    assert np.isfinite(res["context_gain"]).all() and np.isfinite(res["no_context_loss"]).all()
    assert (res["no_context_loss"] < res["unigram_loss"]).all()
    assert "no-context" in (sdir / "report.md").read_text()
    assert {(m, s) for m, s in zip(res["model"], res["scale"])} == {(m, s) for m in ("pt", "bert")
                                                                     for s in (64, 128)}
    for col in ("model", "scaling", "width", "params", "non_embedding_params", "flops_per_token", "tokens",
                "val_loss", "best_lr"):
        assert col in res.columns, col
    pt = res[res["model"] == "pt"]
    assert (pt["status"] == "ok").all() and (pt["best_lr"] == TRANSFERRED["optim.lr"]).all()
    ok = res[res["status"] == "ok"]
    assert (ok["params"] > 0).all() and ok["val_loss"].map(math.isfinite).all()
    summary = json.loads((sdir / "summary.json").read_text())
    assert "pt" in summary["fits"] and summary["fits"]["pt"]["n_points"] == 2
    assert summary["fits"]["pt"]["form"] == "power_law" and "< 4" in summary["fits"]["pt"]["note"]
    assert summary["fits"]["pt"]["n_runs"] == 4 and len(summary["fits"]["pt"]["band"]["lo"]) > 0
    assert "pt" in summary["fits_flops"] and summary["loss_split"] == "test"
    assert {k: d["df"] for k, d in summary["seed_spreads"].items()} == {f"{m}-{s}": 1 for m in ("pt", "bert")
                                                                        for s in (64, 128)}  # each cell its own
    d = summary["differences"]["pt-bert"]["128"]
    assert d["lo"] < d["diff"] < d["hi"] and d["decided"] in {"a_lower", "b_lower", "undecided"}
    assert summary["pt_beats_bert_at_every_scale"] in (True, False, None)
    # equal tuning effort: every baseline search has tune-small's budget (smoke: num_samples 2 -> baseline.samples 1
    # overrides it here), the summary states every model's trial count
    tt = summary["tuning_trials"]
    assert tt["pt"]["total"] == cfg.sweep.num_samples and tt["bert"]["per_scale"] == {"64": 2, "128": 2}
    assert tt["bert"]["total"] == 4 and "ut" not in tt and (res[res["model"] != "pt"]["tuning_trials"] == 2).all()
    # the three framings, each with a per-scale interval and an every-scale statement
    assert set(summary["framings"]) == {"total", "non_embedding", "flops"} and summary["match"] == "total"
    for name, res_f in summary["framings"].items():
        assert set(res_f) == {"pt-bert"}
        for pair, r in res_f.items():
            assert set(r["per_scale"]) == {"64", "128"} and r["every_scale"] in (True, False, None)
            for s_, p in r["per_scale"].items():
                assert p["decided"] in {"a_lower", "b_lower", "undecided", "extrapolated"}
                if "error" in p:  # no curve where a side learned no context (smoke budgets): the gate's reason
                    assert p["decided"] == "undecided" and p["no_context"] and "learned no context" in p["reason"]
                else:
                    assert p["lo"] <= p["diff"] <= p["hi"], (name, pair, s_, p)
    assert set(summary["pt_beats_bert_by_framing"]) == {"total", "non_embedding", "flops"}
    report = (sdir / "report.md").read_text()
    assert "equal training compute" in report and "At every scale" in report and "trials" in report
    assert_png(sdir / "framings.png")
    assert (res[res["model"] != "pt"]["match_ratio"].astype(float).sub(1).abs() < 0.5).all()
    assert set(summary["lr_search"]) == {"bert-w64", "bert-w128"}
    assert {"loss", "loss_lo", "loss_hi", "n_seeds", "test_loss_se", "unigram_loss", "lr_edge"} <= set(res.columns)
    assert set(summary["winners"]) == {"64", "128"}
    for name in ("fig2a_pt_vs_bert", "loss_vs_compute"):
        if name in {Path(p).stem for p in summary["plots"]}:
            assert_png(sdir / f"{name}.png")
    assert_png(sdir / "fig2a_pt_vs_bert.png")
    assert_png(sdir / "loss_vs_compute.png")


def test_paper_and_demo_presets_give_valid_sweep_plans():
    """preset=paper/demo compose and every planned trial config validates (nothing is run)."""
    from ptsweep.config import with_overrides
    from ptsweep.models.sizing import match_shape
    from ptsweep.sweeps import baseline_tuning

    for preset, n_expected in (("paper", 59), ("demo", 8)):
        cfg = compose([f"preset={preset}"])
        assert tuple(tune_small.search_space(cfg)) == TRANSFER_KEYS
        trials, labels, n_req, n_run = verify_transfer.plan(cfg, TRANSFERRED)
        assert n_req == n_expected and n_run == max(n_expected, cfg.sweep.n)
        k = cfg.sweep.perturbed_seeds or cfg.sweep.seeds
        assert len(trials) == n_run * k + cfg.sweep.seeds
        for ov in trials:
            assert with_overrides(cfg, ov).model.width == cfg.sweep.width
        paradigm = {} if cfg.sweep.scaling == "both" else {"model.scaling": cfg.sweep.scaling}
        for s in cfg.sweep.scales:  # scaling-curves trains PT under sweep.scaling (demo: rank, width 32)
            pt = with_overrides(cfg, {"model.width": s, **paradigm}).model
            for kind in ("bert", "ut"):
                mc = match_shape(kind, pt, cfg.data.vocab_size, cfg.data.seq_len, cfg.data.mask_prob, cfg.sweep.match)
                best = {k: lo for k, (lo, hi) in baseline_tuning.search_space(cfg).items()}
                with_overrides(cfg, {**scaling_curves.model_overrides(mc), **best})
        assert baseline_tuning.budget(cfg) == cfg.sweep.num_samples  # equal to tune-small's budget
    paper = compose(["preset=paper"])
    assert paper.ray.gpus_per_trial == 1 and paper.model.width == 256 and paper.data.name == "minipile"
