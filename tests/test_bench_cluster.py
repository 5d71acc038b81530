"""The GPU check's record file (``bench/cluster_record.py``): a new file per run, rows appended as they come, a pack
row's aggregate only when every packed trial measured, the plan's prediction beside a GPU row."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptsweep import planner
from ptsweep.config import PTConfig

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import cluster_record  # noqa: E402


def _spec() -> dict:
    return {"model_cfg": PTConfig(width=128), "scale": 128, "vocab": 1000, "seq_len": 32, "batch": 8, "micro": "auto",
            "compile": "none", "fraction": 1.0}


def test_each_run_gets_its_own_file_and_keeps_every_row(tmp_path):
    meta = {"dry": True, "device_name": "NVIDIA H200", "batch": 8, "seq_len": 32}
    first, second = cluster_record.new_record(tmp_path, meta), cluster_record.new_record(tmp_path, meta)
    assert first.name.startswith("gpu-nvidia-h200-") and second.name == first.stem + "-2.json"
    cluster_record.append(first, {"part": "step", "tokens_per_s": 1.0})
    cluster_record.append(first, {"part": "pack", "error": "x"})
    doc = cluster_record.read(first)
    assert [r["part"] for r in doc["results"]] == ["step", "pack"] and doc["meta"]["kind"] == "gpu-check"
    assert cluster_record.read(second)["results"] == [] and not list(tmp_path.glob("*.tmp"))


def test_pack_row_sums_only_when_every_trial_measured():
    ok = {"tokens_per_s": 100.0, "peak_mem_gib": 2.0, "mfu": 0.1, "width": 128, "flops_per_token": 1e6,
          "device": "cuda", "total_mem_gib": None}
    row = cluster_record.pack_row(_spec(), 2, "ray", [ok, {**ok, "tokens_per_s": 50.0, "peak_mem_gib": 3.0}])
    assert (row["tokens_per_s"], row["peak_mem_gib"], row["mfu"], row["trials"]) == (150.0, 3.0, pytest.approx(0.2), 2)
    bad = cluster_record.pack_row(_spec(), 2, "ray", [ok, {"error": "OutOfMemoryError"}])
    assert bad["tokens_per_s"] is None and bad["error"] == "OutOfMemoryError" and len(bad["per_trial"]) == 2


def test_plan_fields_are_the_planners_prediction_at_the_memory_share():
    spec = _spec()
    cfg = spec["model_cfg"]
    act, static = planner.activation_bytes(cfg, 1000, 32)["peak"], planner.static_bytes(cfg, 1000)
    full = cluster_record.plan_fields(spec, 80.0)
    assert full["planned_micro_batch"] == 8 and full["planned_peak_gib"] == pytest.approx((static + 8 * act) / 2**30)
    tight = cluster_record.plan_fields({**spec, "fraction": (static + 3.5 * act) / 0.9 / (80 * 2**30)}, 80.0)
    assert tight["planned_micro_batch"] == 3  # ceil(8 / 3): the largest even split that fits the share
    assert cluster_record.plan_fields(spec, None) == {}
