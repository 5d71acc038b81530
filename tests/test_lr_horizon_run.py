"""`make lr-horizon` end to end at smoke size on a real Ray (PT and BERT, 3 budgets, 3 LRs, the edge rule), and its
horizon.json read back by the horizon rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ptsweep import cli
from ptsweep.config import TRANSFER_KEYS
from ptsweep.errors import SweepError
from ptsweep.sweeps.transfer import read_transfer, transfer_settings
from ptsweep.trials import ledger

pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
PREDICT = "sweep.lr_horizon.predict=[0.03]"  # an LR between the grid's, at the longest budget


@pytest.mark.slow
def test_smoke_study_runs_on_ray_and_its_fit_drives_the_rule(tmp_path, capsys):
    folder = tmp_path / "results"  # the study's records, as a repository keeps them
    res = subprocess.run([sys.executable, "-m", "ptsweep", "lr-horizon", "preset=smoke", "tracker=disabled", PREDICT,
                          f"out_dir={tmp_path}", f"sweep.results={folder}"], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert out.startswith("lr-horizon: preset smoke") and "PT width 64 beside its matched BERT" in out
    assert "1 / 4 / 16 steps per run" in out and "## Fits" in out and "- pt: " in out
    sdir = tmp_path / "lr-horizon"
    trials = pd.read_csv(sdir / "trials.csv")
    # 2 models x 3 budgets x 3 LRs, one more LR wherever an optimum sat on an edge (lr_widen 1), and the prediction
    assert 19 <= len(trials) <= 25 and set(trials["model"]) == {"pt", "bert"}
    assert trials.loc[trials["predicted"], ["label", "optim.lr"]].values.tolist() == [["pt-T16-predicted", 0.03]]
    assert "## The horizon rule's prediction at 16 steps (pt)" in out and "\n| 0.03 | 1 | " in out
    assert set(trials["steps"]) == {1, 4, 16} and (trials["status"] == "ok").all()
    assert set(trials["tokens"]) == {256, 1024, 4096}  # each budget trained its own length
    base = trials[["unigram_loss", "no_context_loss"]].mean()  # the baselines: every run's mean
    assert f"Unigram loss {base['unigram_loss']:.4f}, no-context loss {base['no_context_loss']:.4f};" in out
    doc = json.loads((sdir / "horizon.json").read_text())
    assert doc["sweep"] == "lr-horizon" and set(doc["fits"]) == {"pt", "bert"}
    pt = doc["fits"]["pt"]
    assert pt["model"]["name"] == "pt" and set(pt["steps"]) <= {1, 4, 16} and len(pt["eta_opt"]) == len(pt["steps"])
    if len(pt["steps"]) < 3:  # at smoke size eta* may learn no context: that budget is left out of the fit, and said
        assert "left out: no context learned at eta*" in pt["note"]
    assert pt["beta"] is None or not pt["beta_range"] or pt["beta_range"][0] <= pt["beta"] <= pt["beta_range"][1]
    for t, eta, losses in zip(pt["steps"], pt["eta_opt"], pt["seed_loss_at_opt"]):  # each seed's loss at eta*
        at = trials[(trials["model"] == "pt") & (trials["steps"] == t) & ~trials["predicted"]
                    & (trials["optim.lr"] == eta)]
        assert len(at) >= 2 and losses == pytest.approx({str(s): v for s, v in zip(at["seed"], at["val_loss"])})
    assert (sdir / "report.md").read_text().startswith("# lr-horizon")
    _records_render_the_report_and_train_nothing_again(folder, sdir, tmp_path, len(trials))

    # the study's horizon.json as the rule's beta: transfer.yaml tuned at 16 steps, this run 4
    cfg = cli.compose(["preset=smoke"])
    tfile = tmp_path / "transfer.yaml"
    tfile.write_text(yaml.safe_dump({"values": {k: (0.02 if k == "optim.lr" else 1.0) for k in TRANSFER_KEYS},
                                     "provenance": {"settings": transfer_settings(cfg)}}))
    rule = cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", "train.tokens=1024",
                        "sweep.horizon.rule=power", f"sweep.horizon.results={sdir / 'horizon.json'}",
                        "sweep.horizon.estimate=grid"])
    if pt["beta"] is None or pt["beta"] < 0 or not pt["beta_range"]:  # what the rule refuses (CPU-dependent)
        with pytest.raises(SweepError, match="sweep.horizon.results: .*(< 0|no power law|has no finite beta)"):
            read_transfer(rule)
        return
    values, prov, _ = read_transfer(rule)
    assert values["optim.lr"] == pytest.approx(0.02 * (4 / 16) ** -pt["beta"])
    assert prov["horizon"]["beta"] == pytest.approx(pt["beta"]) and "horizon rule power" in capsys.readouterr().out


def _records_render_the_report_and_train_nothing_again(folder: Path, sdir: Path, tmp_path: Path, n: int) -> None:
    """The results folder alone re-renders the study's report (twice the same bytes; the trained run's text under the
    progress line), and the same command on an empty runs folder finds every trial there and trains none."""
    assert len(list((folder / "trials").glob("*.json"))) == n
    assert cli.main(["report", str(folder)]) == 0
    first = (folder / "report.md").read_text()
    assert cli.main(["report", str(folder)]) == 0 and (folder / "report.md").read_text() == first
    title, progress, rest = first.split("\n", 2)
    assert progress == "" and rest.startswith(f"_Rendered from {n} trial records of its results folder: every planned")
    assert rest.split("\n", 1)[1] == (sdir / "report.md").read_text().split("\n", 1)[1].replace(
        str(sdir), "<lr-horizon>")
    again = subprocess.run([sys.executable, "-m", "ptsweep", "lr-horizon", "preset=smoke", "tracker=disabled", PREDICT,
                            f"out_dir={tmp_path / 'fresh'}", f"sweep.results={folder}"], cwd=ROOT, env=ENV,
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[lr-horizon/grid] 19 trials: 19 already finished (ledger; 19 in the repository" in again.stderr
    assert not (tmp_path / "fresh" / "lr-horizon" / ledger.STARTS_LOG).exists()
