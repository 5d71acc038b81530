"""A sweep never trains on code nobody submitted: Ray workers compare ptsweep's source fingerprint with the driver's.

Unit part: the fingerprint is a function of the .py sources only. Ray part (real local Ray, smoke data): a trial whose
worker sees other source than the driver refuses to train, leaves no ledger record and no training start, and the
sweep stops with one SweepError line; the same command afterwards trains it, and its records name the source.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ptsweep.trials import code_version
from ptsweep.errors import SourceChanged
from ptsweep.trials.code_version import SOURCE_CHANGED, check_worker_source, source_fingerprint


def _copy_package(tmp_path: Path) -> Path:
    dst = tmp_path / "ptsweep"
    shutil.copytree(code_version.PACKAGE_DIR, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_fingerprint_follows_the_python_source_and_nothing_else(tmp_path):
    pkg = _copy_package(tmp_path)
    fp = source_fingerprint(pkg)
    assert fp == source_fingerprint(code_version.PACKAGE_DIR) and len(fp) == 12
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (pkg / "notes.txt").write_text("not code")
    assert source_fingerprint(pkg) == fp
    pt = pkg / "models" / "pt_constants.py"
    src = pt.read_text()
    pt.write_text(src.replace("s_h=1.0 / r,", "s_h=1.0 / r ** 0.5,", 1))  # the mutation that hit the study
    assert pt.read_text() != src
    mutated = source_fingerprint(pkg)
    assert mutated != fp
    pt.write_text(src)
    assert source_fingerprint(pkg) == fp
    (pkg / "models" / "pt.py").rename(pkg / "models" / "pt2.py")  # same bytes, other module name
    assert source_fingerprint(pkg) != fp


def test_worker_check_refuses_other_source_in_one_line(tmp_path):
    pkg = _copy_package(tmp_path)
    fp = source_fingerprint(pkg)
    assert check_worker_source(fp, pkg) == fp
    assert check_worker_source("", pkg) == fp  # no expectation (e.g. a trainable called by hand): record only
    with pytest.raises(SourceChanged) as e:
        check_worker_source("0123456789ab", pkg)
    msg = str(e.value)
    assert SOURCE_CHANGED in msg and "0123456789ab" in msg and fp in msg and "\n" not in msg


# ---- real Ray ---------------------------------------------------------------------------------------------------
ray = pytest.importorskip("ray")
pytest.importorskip("optuna")

from ptsweep.config import compose  # noqa: E402
from ptsweep.errors import SweepError  # noqa: E402
from ptsweep.trials import ledger, runner, search, trainable  # noqa: E402


@pytest.fixture
def stale_driver(monkeypatch):
    """The driver believes it submitted other source than the workers will find on disk (as after an edit)."""
    monkeypatch.setattr(trainable, "driver_source", lambda: "0123456789ab")
    return monkeypatch


def _smoke(out_dir: Path):
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}"])


def test_fixed_list_trial_refuses_edited_source_then_runs_on_rerun(tmp_path, ray_local, stale_driver):
    cfg, sdir = _smoke(tmp_path), tmp_path / "study"
    with pytest.raises(SweepError) as e:
        runner.run_trials(cfg, [{"optim.lr": 1e-2}], sdir, "t", labels=["a"])
    assert SOURCE_CHANGED in str(e.value) and "\n" not in str(e.value) and "1 trial(s)" in str(e.value)
    assert not list(sdir.glob("trials/*/final.json")), "a refused trial must leave no ledger record"
    assert not (sdir / ledger.STARTS_LOG).exists(), "a refused trial must not start training"

    stale_driver.undo()  # the edit is committed: the driver and the workers agree again
    df = runner.run_trials(cfg, [{"optim.lr": 1e-2}], sdir, "t", labels=["a"])
    fp = source_fingerprint()
    assert df["status"].tolist() == ["ok"] and df["source_sha"].tolist() == [fp]
    (tdir,) = sdir.glob("trials/*/")
    assert json.loads((tdir / "final.json").read_text())["source_sha"] == fp
    trial = json.loads((tdir / "trial.json").read_text())
    assert trial["source_sha"] == fp and len(trial["git_commit"]) in (40, len("unknown"))


def test_search_trial_refusing_edited_source_is_queued_again(tmp_path, ray_local, stale_driver):
    from optuna.trial import TrialState

    from ptsweep.trials import optuna_store

    cfg, sdir = _smoke(tmp_path), tmp_path / "search"
    space = {"optim.lr": (1e-3, 1e-1)}
    with pytest.raises(SweepError):
        search.run_search(cfg, space, sdir, "s", num_samples=1, seed=0)
    assert not list(sdir.glob("trials/*/final.json"))
    stale_driver.undo()
    df = search.run_search(cfg, space, sdir, "s", num_samples=1, seed=0)
    assert df["status"].tolist() == ["ok"], df[["status", "error"]]
    import optuna

    st = optuna.load_study(study_name="s", storage=optuna_store.storage(sdir))
    states = [t.state for t in st.trials]
    assert states.count(TrialState.COMPLETE) == 1, states  # the refused trial was queued again, not counted done
    refused = [t for t in st.trials if t.user_attrs.get(optuna_store.INTERRUPTED_ATTR)]
    assert len(refused) == 1 and refused[0].params == st.best_trial.params
    assert refused[0].user_attrs[optuna_store.STATUS_ATTR] == "refused"
