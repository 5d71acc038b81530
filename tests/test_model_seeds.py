"""sweep.model_seeds: one model's final runs at more seeds than the rest, without retraining or renaming the runs
the study already has, and without reusing the baselines' search seed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ptsweep.trials import results
from ptsweep.analysis import claims
from ptsweep.config import compose
from ptsweep.errors import ConfigError
from ptsweep.sweeps import baseline_tuning, scaling_curves
from ptsweep.trials import ledger

FIXTURE = Path(__file__).parent / "fixtures" / "results-smoke"


def _cfg(*overrides: str):
    return compose(["preset=smoke", "sweep.models=[pt,bert]", "sweep.seeds=2", *overrides])


def test_a_model_with_more_seeds_keeps_the_common_ones_and_skips_the_search_seed():
    cfg = _cfg("sweep.model_seeds={bert:4}")
    s = int(cfg.seed)
    assert scaling_curves.final_seeds(cfg, "pt") == [s, s + 1]
    assert scaling_curves.final_seeds(cfg, "bert") == [s, s + 1, s + 3, s + 4]
    assert baseline_tuning.search_training_seed(cfg) == s + 2  # the seed the extra runs step over
    assert scaling_curves.final_seeds(_cfg("sweep.model_seeds={bert:1}"), "bert") == [s]


def test_the_extra_seeds_add_planned_runs_named_by_their_seed():
    def finals(cfg) -> list[tuple[str, int]]:  # (label, seed) of the planned final runs
        return [(t.label, t.seed) for t in scaling_curves.planned_trials(cfg) if t.stage == "final"]

    plain, more = finals(_cfg()), finals(_cfg("sweep.model_seeds={bert:4}"))
    s = int(_cfg().seed)
    assert set(more) - set(plain) == {(f"final-bert-w{w}-s{i}", s + i) for w in _cfg().sweep.scales for i in (3, 4)}
    assert set(plain) <= set(more)  # the common runs keep their names (and so their trial keys)


@pytest.mark.parametrize("value, key", [("{gpt:3}", "sweep.model_seeds.gpt"), ("{ut:3}", "sweep.model_seeds.ut"),
                                        ("{bert:0}", "sweep.model_seeds.bert")])
def test_a_seed_count_of_a_model_not_in_the_study_or_below_one_is_refused(value, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _cfg(f"sweep.model_seeds={value}")


def test_the_exit_table_names_each_models_own_seeds_and_counts_missing_curves_against_them():
    summary = {"seeds": [0, 1], "model_seeds": {"pt": [0, 1], "bert": [0, 1, 3]},
               "budget_check": {"threshold": 1.0, "crossings": {"bert at scale 64": [600.0, 900.0, 1200.0],
                                                                "pt-rank at scale 64": [300.0, 300.0],
                                                                "bert at scale 32": [600.0, 900.0]}}}
    lines = claims.exit_lines(summary)
    assert lines[0].endswith("per seed 0, 1; bert per seed 0, 1, 3:")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ") and "---" not in line}
    assert rows["bert at scale 64"] == "| bert at scale 64 | 600, 900, 1,200 | 600 |"
    assert "(2 of 3 seeds have a curve)" in rows["bert at scale 32"]
    assert "seeds have a curve" not in rows["pt-rank at scale 64"]
    summary["missing_runs"] = {"bert at scale 32": 1}  # its third seed not trained yet: no failed run to report
    rows = {line.split(" | ")[0].lstrip("| "): line for line in claims.exit_lines(summary) if line.startswith("| ")}
    assert rows["bert at scale 32"] == "| bert at scale 32 | 600, 900 (1 of 3 seeds not run yet) | 300 |"


@pytest.mark.usefixtures("ray_local")
def test_the_sweep_trains_only_the_missing_and_extra_seeds_seed_by_seed(tmp_path, capsys):
    """Two missing finals (seeds 0 and 1) and BERT's extra seed at both widths: those four train, the missing seeds
    first (a study cut short keeps its cells' seed counts even), the extra ones at the seed past the search's."""
    folder = tmp_path / "results-smoke"
    shutil.copytree(FIXTURE, folder)
    for stem in ("final-bert-w128-s0", "final-pt-channels-w64-s1"):
        next((folder / "trials").glob(f"{stem}-*.json")).unlink()
    cfg = results.study_config(folder, **{"out_dir": str(tmp_path / "runs"), "sweep.results": str(folder),
                                          "sweep.model_seeds": {"bert": 3}})
    sdir = scaling_curves.run(cfg)
    started = [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]
    labels = [s.rsplit("-", 1)[0] for s in started]
    assert sorted(labels[:2]) == ["final-bert-w128-s0", "final-pt-channels-w64-s1"]  # two run at once
    assert sorted(labels[2:]) == ["final-bert-w128-s3", "final-bert-w64-s3"]
    for stem in started[2:]:  # trained at the seed past the search's, exported to the folder
        rec = results.load_record(folder / "trials" / f"{stem}.json")
        assert rec["record"]["status"] == "ok" and rec["config"]["seed"] == int(cfg.seed) + 3
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["model_seeds"]["bert"] == [int(cfg.seed) + i for i in (0, 1, 3)]
    report = (sdir / "report.md").read_text()
    assert "per seed 0, 1; bert per seed 0, 1, 3:" in report and "2 / 3 seeds" in report  # PT 2, BERT 3
    cells = pd.read_csv(sdir / "results.csv")
    assert dict(zip(cells["series"], cells["n_seeds"])) == {"pt": 2, "bert": 3}
    assert "[results-smoke/final] 10 trials: 6 already finished" in capsys.readouterr().err
