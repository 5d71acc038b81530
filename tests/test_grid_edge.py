"""The LR grid's edge rule (``baseline_tuning.grid_search`` under sweep.baseline.grid): a best LR on an edge of the
LRs run gets one more LR a grid step past it, while it stays on the edge and up to sweep.baseline.lr_widen times.

The Ray test makes the edge deterministic: at smoke size (16 steps, the search seed) BERT's validation loss falls
with the LR from 1e-5 up to ~1e-2 and is higher again at 1e-1 (measured: 6.63 at 1e-3, 5.93 at 1e-2, 6.04 at 1e-1),
so the grid [1e-5, 1e-4, 1e-3] has its best on the top edge, 1e-2 is still on it, and 1e-1 brackets it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ptsweep.config import compose
from ptsweep.models.sizing import match_shape
from ptsweep.sweeps import baseline_tuning, scaling_curves
from ptsweep.trials import ledger
from ptsweep.trials.fields import finished

GRID = [1e-5, 1e-4, 1e-3]


def _trials(lrs, losses, statuses=None) -> pd.DataFrame:
    return pd.DataFrame({"optim.lr": lrs, "val_loss": losses, "status": statuses or ["ok"] * len(lrs)})


def test_a_step_past_an_edge_is_the_edge_step_of_the_grid():
    assert baseline_tuning.step_beyond([1e-3, 2e-3, 4e-3], "high") == 8e-3
    assert baseline_tuning.step_beyond([4e-3, 1e-3, 2e-3], "low") == 5e-4  # order does not matter
    assert baseline_tuning.step_beyond(GRID, "high") == 1e-2  # 1e-3 x 10.000000000000002, to 4 digits
    assert baseline_tuning.step_beyond([1e-3, 3e-3, 1e-2], "high") == 0.03333  # the step at that edge: x 10/3
    with pytest.raises(ValueError, match="edge"):
        baseline_tuning.step_beyond([1e-3, 2e-3], "")
    with pytest.raises(ValueError, match="rounds to an LR already run"):  # never a duplicate trial
        baseline_tuning.step_beyond([1e-3, 1.00001e-3], "high")


def test_the_grid_edge_counts_a_diverged_lr_as_bracketing_and_a_failed_one_as_nothing():
    inf = float("inf")
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3, 4e-3], [5.0, 4.9, 4.8])) == "high"
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3, 4e-3], [4.7, 4.9, 4.8])) == "low"
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3, 4e-3], [5.0, 4.7, 4.8])) == ""
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3, 4e-3], [5.0, 4.9, inf], ["ok", "ok", "diverged"])) == ""
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3, 4e-3], [5.0, 4.9, inf], ["ok", "ok", "failed"])) == "high"
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3], [5.0, inf], ["ok", "failed"])) == "single"
    assert baseline_tuning.lr_edge(_trials([1e-3, 2e-3], [inf, inf], ["diverged", "failed"])) == ""


def test_a_round_with_a_trial_missing_from_the_results_folder_decides_no_edge_and_plans_nothing_past_it():
    """Report only: the two finished LRs of [1e-3, 2e-3, 4e-3] put the best on the top of *them*, but 4e-3 is not in
    the folder yet, so the edge is pending and the rule plans no 8e-3 (that would count a tuning trial nobody plans)."""
    inf = float("inf")
    partial = _trials([1e-3, 2e-3, 4e-3], [5.0, 4.9, inf], ["ok", "ok", "missing"])
    assert baseline_tuning.lr_edge(partial) == baseline_tuning.PENDING
    assert baseline_tuning.next_edge_lr(baseline_tuning.lr_edge(partial), [1e-3, 2e-3, 4e-3], 0, 3) is None
    assert baseline_tuning.next_edge_lr("high", [1e-3, 2e-3, 4e-3], 0, 3) == 8e-3  # the same grid, decided


def test_a_trial_stopped_early_is_never_finished_however_low_its_partial_loss():
    """``fields.finished`` (the best trial of every search and of tune-small comes from it): status ok only."""
    trials = _trials([1e-3, 2e-3, 4e-3, 8e-3], [5.0, 4.0, 5.5, float("inf")], ["ok", "early_stopped", "ok", "failed"])
    assert finished(trials)["optim.lr"].tolist() == [1e-3, 4e-3]
    assert baseline_tuning.lr_edge(trials) == "low"  # the early-stopped 2e-3 does not bracket it


def _edge_cfg(out_dir, widen: int):
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}", "sweep.models=[bert]",
                    f"sweep.baseline.grid=[{','.join(map(str, GRID))}]", f"sweep.baseline.lr_widen={widen}"])


def _starts(sdir) -> list[str]:
    return [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]


@pytest.mark.usefixtures("ray_local")
def test_grid_edge_rule_runs_past_the_top_edge_until_bracketed_and_a_rerun_trains_nothing(tmp_path):
    from ptsweep.trials.runner import warm_data

    cfg = _edge_cfg(tmp_path, 0)
    vocab = warm_data(cfg)
    over = scaling_curves.model_overrides(match_shape("bert", cfg.model, vocab, cfg.data.seq_len,
                                                      cfg.data.mask_prob, cfg.sweep.match))
    sdir = tmp_path / "study"

    def tune(widen):
        return baseline_tuning.tune(_edge_cfg(tmp_path, widen), "bert", 64, over, sdir, "edge", [])

    # lr_widen 0: the grid alone, its best flagged on the top edge (the premise of the rest)
    df0, info0 = tune(0)
    assert list(df0["optim.lr"]) == GRID and info0["edge"] == "high" and info0["rounds"] == 0
    assert "not bracketed (high edge of the searched values) after 0 widening(s)" in \
        scaling_curves._edge_notes("bert", 64, info0)[0]
    grid_keys = list(df0["trial_key"])
    assert sorted(_starts(sdir)) == sorted(grid_keys)

    # lr_widen 3: 1e-2 (still the best, on the edge), then 1e-1 (worse: bracketed) - and no third round
    df, info = tune(3)
    assert list(df["optim.lr"]) == [*GRID, 1e-2, 1e-1] and list(df["search_round"]) == [0, 0, 0, 1, 2]
    assert list(df["trial_key"])[:3] == grid_keys  # the grid's ledger keys do not depend on lr_widen
    loss = dict(zip(df["optim.lr"], df["val_loss"]))
    assert loss[1e-2] < min(loss[v] for v in GRID) and loss[1e-1] > loss[1e-2]  # the measured shape, as run
    assert info["best_lr"] == 1e-2 and info["edge"] == "" and info["rounds"] == 2 and info["n_trials"] == 5
    assert info["lrs"] == [*GRID, 1e-2, 1e-1]
    assert set(df["optim.lr_range"]) == {"grid [1e-05, 0.0001, 0.001] + edge [0.01, 0.1]"}
    counts = baseline_tuning.trial_counts(cfg, {}, {"bert-w64": info}, ["bert"])["bert"]
    assert counts["total"] == 5 and "N=64: 5 (grid [1e-05, 0.0001, 0.001] + edge [0.01, 0.1])" in \
        counts["description"]
    new = [k for k in df["trial_key"] if k not in grid_keys]
    starts = _starts(sdir)
    assert sorted(starts[:3]) == sorted(grid_keys) and starts[3:] == new  # only the 2 new LRs trained
    for key, lr in zip(new, (1e-2, 1e-1)):  # ledger trials as the grid's: its label, seed and budget
        assert ledger.read_ledger(sdir, key)["status"] == "ok" and key.startswith("hp-bert-w64-")
        trial = json.loads((sdir / "trials" / key / "trial.json").read_text())["overrides"]
        assert trial["optim.lr"] == lr and trial["seed"] == baseline_tuning.search_training_seed(cfg)
        assert trial["train.tokens"] == baseline_tuning.search_tokens(cfg)

    # a re-run reads every trial from the ledger, trains nothing and chooses the same
    again, info_again = tune(3)
    assert len(_starts(sdir)) == 5 and list(again["trial_key"]) == list(df["trial_key"])
    assert info_again == info


@pytest.mark.usefixtures("ray_local")
def test_edge_rounds_of_several_searches_train_in_one_list_and_each_search_then_reads_them(tmp_path, monkeypatch):
    """``grid_edges_together``: round r trains every open search's added LR in one run_trials call (Ray fills its
    slots), with the keys ``tune`` would give them, so each search's own edge rule then trains nothing. The two
    searches share BERT's smoke shape (so both have the top-edge best measured above) under two scale labels."""
    from ptsweep.trials.runner import warm_data

    cfg = _edge_cfg(tmp_path, 1)
    vocab = warm_data(cfg)
    over = scaling_curves.model_overrides(match_shape("bert", cfg.model, vocab, cfg.data.seq_len,
                                                      cfg.data.mask_prob, cfg.sweep.match))
    sdir, calls, real = tmp_path / "study", [], baseline_tuning.run_trials

    def recording_run_trials(cfg, trials, study_dir, name, **kw):  # the real runner; records what each call lists
        calls.append((name, [t["optim.lr"] for t in trials], list(kw["labels"])))
        return real(cfg, trials, study_dir, name, **kw)

    monkeypatch.setattr(baseline_tuning, "run_trials", recording_run_trials)
    grid = GRID[1:]  # best on the top edge (1e-3), and 1e-2 a grid step past it
    baseline_tuning.grid_edges_together(cfg, [("bert", 64, over, grid), ("bert", 128, over, grid)], sdir, "e", [])
    assert [name for name, _, _ in calls] == ["search-edges-round0", "search-edges-round1"]
    assert calls[1][1] == [*grid, 1e-2, *grid, 1e-2]  # both searches' edge LR in the same list
    assert calls[1][2] == ["hp-bert-w64"] * 3 + ["hp-bert-w128"] * 3
    starts = _starts(sdir)
    assert len(starts) == 6 and {s.split("-")[2] for s in starts[4:]} == {"w64", "w128"}

    for scale in (64, 128):  # each search's own rule: the same choice, every trial from the ledger
        df, info = baseline_tuning.grid_search(cfg, "bert", scale, over, sdir, "e", [], lrs=grid)
        assert list(df["optim.lr"]) == [*grid, 1e-2] and info["rounds"] == 1 and info["best_lr"] == 1e-2
    assert len(_starts(sdir)) == 6
