"""transfer.yaml provenance: tune-small records the settings, every sweep that reads the file checks them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ptsweep import cli
from ptsweep.config import TRANSFER_KEYS
from ptsweep.errors import SweepError
from ptsweep.sweeps.transfer import check_transfer, read_transfer, transfer_settings

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}


def _write_transfer(path: Path, overrides: list[str]) -> Path:
    cfg = cli.compose(["preset=smoke", *overrides])
    doc = {"values": {k: 1.0 for k in TRANSFER_KEYS}, "provenance": {"study": "t", "settings": transfer_settings(cfg)}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_settings_survive_the_yaml_round_trip_and_match_themselves(tmp_path):
    f = _write_transfer(tmp_path / "transfer.yaml", [])
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={f}", "model.width=256"])  # the width may differ
    values, prov, path = read_transfer(cfg)
    assert prov["mismatch"] == {} and set(values) == set(TRANSFER_KEYS)
    assert "model.width" not in prov["settings"] and "optim.lr" not in prov["settings"]
    assert {"model.scaling", "model.parametrization", "model.n_iters", "model.base_width", "data.name",
            "data.tokenizer", "data.seq_len", "train.tokens"} <= set(prov["settings"])


@pytest.mark.parametrize("over, key", [("model.scaling=channels", "model.scaling"),
                                       ("model.n_iters=2", "model.n_iters"),
                                       ("data.seq_len=64", "data.seq_len"),
                                       ("train.tokens=8192", "train.tokens"),
                                       ("model.parametrization=sp", "model.parametrization")])
def test_mismatch_names_the_key_in_one_line(tmp_path, over, key):
    f = _write_transfer(tmp_path / "transfer.yaml", ["model.scaling=rank"])
    base = ["model.scaling=rank"] if key != "model.scaling" else []
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={f}", *base, over])
    with pytest.raises(SweepError) as e:
        read_transfer(cfg)
    msg = str(e.value)
    assert "\n" not in msg and key in msg and "allow_transfer_mismatch" in msg
    others = {"model.scaling", "model.n_iters", "data.seq_len", "train.tokens", "model.parametrization"} - {key}
    assert not any(o in msg for o in others)


def test_override_proceeds_and_records_the_mismatch(tmp_path):
    f = _write_transfer(tmp_path / "transfer.yaml", ["model.scaling=rank"])
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={f}", "model.scaling=channels",
                       "sweep.allow_transfer_mismatch=true"])
    _, prov, _ = read_transfer(cfg)
    assert prov["mismatch"] == {"model.scaling": {"tuned": "rank", "now": "channels"}}


def test_legacy_file_is_checked_on_the_keys_it_records(tmp_path):
    f = tmp_path / "transfer.yaml"
    f.write_text(yaml.safe_dump({"values": {k: 1.0 for k in TRANSFER_KEYS},
                                 "provenance": {"scaling": "rank", "seq_len": 32}}))
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={f}"])
    assert check_transfer(cli.compose(["preset=smoke", "model.scaling=rank"]), {"scaling": "rank", "seq_len": 32},
                          f) == {}
    with pytest.raises(SweepError, match="model.scaling"):
        read_transfer(cfg)


def test_cli_verify_transfer_stops_with_one_line(tmp_path):
    """Tuned with model.scaling=rank, verified with channels: exit status != 0, one stderr line naming the key,
    before any trial starts."""
    f = _write_transfer(tmp_path / "transfer.yaml", ["model.scaling=rank"])
    res = subprocess.run([sys.executable, "-m", "ptsweep", "verify-transfer", "preset=smoke",
                          "model.scaling=channels", f"sweep.transfer_file={f}", f"out_dir={tmp_path / 'runs'}"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: transfer.yaml mismatch: model.scaling"), res.stderr
    assert not (tmp_path / "runs" / "verify-transfer" / "trials").exists()
