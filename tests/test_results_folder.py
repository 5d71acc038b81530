"""A study's results folder (``ptsweep.trials.results``): records that outlive runs/, the report re-rendered from them,
and the records this code refuses.

The fixture ``tests/fixtures/results-smoke`` is a finished smoke-size scaling-curves study (PT and BERT at widths 64
and 128, LR grids, 2 seeds) with the report.md its command rendered; its trial records are the real sweep's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ptsweep.trials import results
from ptsweep.cli import main
from ptsweep.trials import ledger
from ptsweep.reports.outputs import open_study

FIXTURE = Path(__file__).parent / "fixtures" / "results-smoke"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A writable copy of the fixture's results folder."""
    dst = tmp_path / "results-smoke"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_report_renders_from_the_records_alone_byte_identical(folder, capsys):
    (folder / "report.md").unlink()
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "from 17 trial records" in out and "nothing is trained" in out
    assert (folder / "report.md").read_bytes() == (FIXTURE / "report.md").read_bytes()
    text = (folder / "report.md").read_text()
    assert "## [S]'s claims" in text and "PT beats BERT at every scale" in text and "/tmp" not in text
    params = {p.name.split("-s")[0]: json.loads(p.read_text())["record"]["params"]
              for p in (folder / "trials").glob("final-*-s0-*.json")}
    for w in (64, 128):  # each baseline's size against PT's, as its records count them
        ratio = params[f"final-bert-w{w}"] / params[f"final-pt-channels-w{w}"]
        assert f"- bert at scale {w}, {params[f'final-bert-w{w}'] / 1e6:.2f}M parameters ({ratio:.2f}x PT's total)" \
            in text and f"- pt at scale {w}, {params[f'final-pt-channels-w{w}'] / 1e6:.2f}M parameters: loss" in text
    figures = sorted(p.name for p in (folder / "figures").glob("*.png"))
    assert "learning_curves_w64.png" in figures and "fig2a_pt_vs_bert.png" in figures
    first = (folder / "report.md").read_bytes()
    assert main(["report", str(folder)]) == 0 and (folder / "report.md").read_bytes() == first  # twice: the same


def test_report_marks_trials_missing_from_the_folder_and_trains_nothing(folder, capsys):
    gone = sorted((folder / "trials").glob("final-bert-w128-*.json"))
    assert len(gone) == 2
    for p in gone:
        p.unlink()
    assert main(["report", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "[results-smoke/final] 8 trials: 6 already finished" in err and "2 missing from the results folder" in err
    text = (folder / "report.md").read_text()
    assert "bert at scale 128: missing: not in the results folder" in text
    assert "_Rendered from 15 trial records of its results folder; not yet in it: 2 final runs and 0 tuning" in text
    assert "  - N=128: no difference (undecided: no finished runs of bert in the results folder yet)" in text
    assert "learned no context at this budget (N = 64)" in text  # the finished scale keeps its own reason
    assert sorted(p.name for p in (folder / "trials").glob("*.json")) == sorted(
        p.name for p in (FIXTURE / "trials").glob("*.json") if p not in [FIXTURE / "trials" / g.name for g in gone])


@pytest.mark.usefixtures("ray_local")
def test_the_sweep_on_a_fresh_directory_trains_only_the_missing_trials(folder, tmp_path, capsys):
    from ptsweep.sweeps import scaling_curves

    gone = sorted((folder / "trials").glob("final-pt-channels-w128-*.json"))
    for p in gone:
        p.unlink()
    cfg = results.study_config(folder, **{"out_dir": str(tmp_path / "runs"), "sweep.results": str(folder)})
    sdir = scaling_curves.run(cfg)
    started = [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]
    assert sorted(started) == sorted(p.stem for p in gone)  # the two missing finals, nothing else
    assert "[results-smoke/independent] 9 trials: 9 already finished (ledger; 9 in the repository" in \
        capsys.readouterr().err
    for p in gone:  # exported again, checked, with their learning curve
        rec = results.load_record(p)
        assert rec["record"]["status"] == "ok" and rec["curve"] and rec["config"]["model.width"] == 128
    for p in gone:  # trained here, not restored
        assert "restored_from" not in json.loads((sdir / "trials" / p.stem / "trial.json").read_text())
    other = next(p for p in sorted((sdir / "trials").iterdir()) if p.name.startswith("hp-bert"))
    assert json.loads((other / "trial.json").read_text())["restored_from"].endswith(f"{other.name}.json")


def _record(folder: Path, stem: str) -> tuple[Path, dict]:
    path = next((folder / "trials").glob(f"{stem}*.json"))
    return path, json.loads(path.read_text())


def test_a_record_whose_key_does_not_match_its_overrides_is_refused(folder):
    path, rec = _record(folder, "final-bert-w64-s0")
    rec["overrides"]["optim.lr"] = 0.5
    path.write_text(json.dumps(rec))
    with pytest.raises(results.ResultsError, match=r"does not match its overrides \(optim.lr differ"):
        results.restore(folder, folder.parent / "runs")


def test_a_record_of_another_identity_scheme_is_refused(folder):
    path, rec = _record(folder, "hp-pt-w64")
    rec["config"]["model.some_new_key"] = 1  # what a scheme that hashes one more key would have stored
    path.write_text(json.dumps(rec))
    with pytest.raises(results.ResultsError, match="made under an identity scheme this code does not produce"):
        results.restore(folder, folder.parent / "runs")


def test_a_record_filed_under_another_key_is_refused(folder):
    path, _ = _record(folder, "hp-pt-w64")
    path.rename(path.with_name("hp-pt-w64-0000000000.json"))
    with pytest.raises(results.ResultsError, match="holds the record of trial hp-pt-w64-"):
        results.restore(folder, folder.parent / "runs")


def test_a_results_folder_of_another_study_is_refused_before_anything_runs(folder, tmp_path, capsys):
    cfg = results.study_config(folder, **{"out_dir": str(tmp_path / "runs"), "sweep.results": str(folder),
                                          "sweep.study": "another-study"})
    with pytest.raises(results.ResultsError, match="results of study 'results-smoke'.*not of 'another-study'"):
        open_study(cfg, "scaling-curves")
    assert not (tmp_path / "runs").exists()
    assert main(["scaling-curves", "preset=smoke", "sweep.transfer_from=config", f"out_dir={tmp_path / 'runs'}",
                 f"sweep.results={folder}"]) == 2
    assert capsys.readouterr().err.startswith("error: ") and not (tmp_path / "runs" / "scaling-curves").exists()


def test_a_command_with_another_plan_is_refused_and_more_seeds_are_not(folder, tmp_path):
    """A folder's report renders the plan that wrote it: other scales need their own folder; more seeds do not."""
    base = {"out_dir": str(tmp_path / "runs"), "sweep.results": str(folder)}
    wider = results.study_config(folder, **base, **{"sweep.scales": [64, 128, 256]})
    with pytest.raises(results.ResultsError, match=r"written with sweep.scales=\[64, 128\], this command has "
                                                   r"\[64, 128, 256\]: another plan needs its own folder"):
        open_study(wider, "scaling-curves")
    more = results.study_config(folder, **base, **{"sweep.seeds": 3, "sweep.model_seeds": {"bert": 5}})
    assert open_study(more, "scaling-curves")[0] == "results-smoke"


def test_report_of_a_folder_without_study_json_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no study.json" in err and len(err.splitlines()) == 1


def test_the_demo_quotes_a_committed_study_claims_marked_as_from_the_repository(folder, tmp_path):
    from ptsweep.reports.study_report import repository_section

    lines = repository_section(folder, "5. The answer")
    text = "\n".join(lines)
    assert lines[0] == "## 5. The answer" and "(17 finished trial records committed), not run by this command" in text
    assert "### [S]'s claims" in text and "**PT beats BERT at every scale** - as run:" in text
    assert "Losses on the" not in text  # the claims section only
    (tmp_path / "empty").mkdir()
    assert "No report yet" in "\n".join(repository_section(tmp_path / "empty", "5"))


def test_study_json_records_the_command_as_a_clone_would_type_it(folder, tmp_path, monkeypatch):
    """study.json's command names the results folder inside its repository and leaves this machine's places out,
    and the report composes that command again."""
    from ptsweep.tracking import OVERRIDES_ENV

    clone = tmp_path / "clone"
    (clone / "experiments" / "scaling" / "results").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("")
    moved = clone / "experiments" / "scaling" / "results" / "results-smoke"
    shutil.copytree(folder, moved)
    study = results.read_study(moved)
    cfg = results.study_config(moved, out_dir=str(tmp_path / "runs"))
    kept = [a for a in study["command"] if not a.startswith(("out_dir=", "sweep.results="))]
    assert len(kept) == len(study["command"]) - 2
    typed = [*kept, f"out_dir={tmp_path / 'runs'}", "data.cache_dir=/x/y", f"sweep.results={moved}"]
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps(typed))
    results.write_study(moved, cfg, study["study"], study["sweep"], study["vocab_size"])
    command = results.read_study(moved)["command"]
    assert command == [*kept, "sweep.results=experiments/scaling/results/results-smoke"]
    again = results.study_config(moved, out_dir=str(tmp_path / "runs"))
    assert again.sweep.results == "experiments/scaling/results/results-smoke" and again.seed == cfg.seed
