"""experiments/context/probe_training.py at smoke size: one ``train.run`` with its probe, the JSON it writes (trace at
init and at every log step, the run's final metrics), the same numbers as the run without the probe (its levers are
variants of PT in the config: ``test_variant_feature_cap.py``, ``test_variant_independent_wd.py``);
experiments/context/paired_vs.py's table on two such candidates against a reference."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ptsweep import train
from ptsweep.config import compose, with_overrides
from ptsweep.tracking import Tracker

from experiment_scripts import load_script

SMOKE = ["preset=smoke", "model.width=32", "model.scaling=rank", "train.threads=1", "tracker=disabled"]


probe_training = load_script("experiments/context/probe_training.py")
paired_vs = load_script("experiments/context/paired_vs.py")


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("probe") / "run.json"
    assert probe_training.main(["--out", str(out), "--every", "4", *SMOKE]) == 0
    return json.loads(out.read_text())


def test_the_trace_has_init_and_every_log_step_with_each_mfvi_iteration(record):
    cfg = compose(SMOKE)
    assert set(record) == {"config", "trace", "final", "wall_s"}
    assert [r["step"] for r in record["trace"]] == [0, 4, 8, 12, 16]
    for row in record["trace"]:
        assert [m["t"] for m in row["mfvi"]] == list(range(1, cfg.model.n_iters + 1))
        assert {"maxNQ", "H_z", "H_h", "H_g", "attn_std", "rms_unary", "rms_topic"} <= set(row["mfvi"][0])
        assert all(f"rms_{p}" in row for p in probe_training.PARAMS)
        assert all((f"upd_{p}" in row) == (row["step"] > 0) for p in probe_training.PARAMS)
    assert all(0 < record["trace"][1][f"upd_{p}"] < 1 for p in ("unary", "U", "B"))
    assert record["config"]["train"]["log_every"] == 4 and "history" not in record["final"]
    assert {"val_loss", "unigram_loss", "no_context_loss", "context_gain", "context_gain_se"} <= set(record["final"])


def test_the_probe_changes_no_number_of_the_run(record, tmp_path):
    plain = train.run(with_overrides(compose(SMOKE), {"train.log_every": 4}), Tracker(), run_dir=tmp_path)
    assert record["final"]["val_loss"] == plain["val_loss"] and record["final"]["test_loss"] == plain["test_loss"]
    assert math.isfinite(plain["val_loss"])


def _probe_json(folder: Path, name: str, seed_losses: dict[int, float]) -> None:
    for seed, loss in seed_losses.items():
        final = {"val_loss": loss, "context_gain": 1.0 - loss / 10, "gain_over_no_context": 0.5}
        (folder / f"{name}-w32-s{seed}.json").write_text(json.dumps({"final": final}))


def test_paired_vs_prints_candidate_minus_reference_paired_by_seed(tmp_path, capsys):
    _probe_json(tmp_path, "ref", {0: 5.0, 1: 5.2, 2: 5.1})
    _probe_json(tmp_path, "cand", {0: 4.9, 1: 5.15, 2: 5.0, 3: 4.0})  # seed 3 has no reference: left out
    paired_vs.main(paired_vs.candidate_runs(str(tmp_path), "ref"), "ref", str(tmp_path), ["cand"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| candidate | width | seeds | val_loss cand | val_loss ref |")
    cells = lines[2].split(" | ")
    assert cells[:3] == ["| cand", "32", "0,1,2"]
    se = float(torch.tensor([-0.1, -0.05, -0.1]).std()) / math.sqrt(3)
    assert cells[3:6] == ["5.017", "5.100", f"-0.083 ± {se:.3f}"]


def test_reference_runs_are_the_ok_ledger_records_of_one_parametrization_and_eta(tmp_path):
    from ptsweep.trials import ledger

    def trial(key, par, lr, width, seed, status="ok"):
        ledger.record(tmp_path, key, key, {"model.parametrization": par, "optim.lr": lr, "model.width": width,
                                           "seed": seed}, {"status": status, "val_loss": 5.0 + seed, "error": ""})

    trial("lr-sp-a", "sp", 0.01, 32, 0)
    trial("lr-sp-b", "sp", 0.01, 64, 1)
    trial("lr-sp-c", "sp", 0.02, 32, 0)                      # another eta
    trial("lr-mup-d", "mup", 0.01, 32, 0)                    # another parametrization
    trial("lr-sp-e", "sp", 0.01, 128, 0, status="failed")   # not ok
    (tmp_path / "trials" / "lr-sp-f").mkdir()                # unfinished: no ledger record
    refs = paired_vs.reference_runs(str(tmp_path), "sp", 0.01)
    assert sorted(refs) == [(32, 0), (64, 1)]
    assert refs[(64, 1)]["val_loss"] == 6.0
