"""The GPU check's dry mode: ``DRY=1 bash bench/gpu_cluster_check.sh`` runs the script's own path on the CPU at the
smoke preset's shapes and writes a record of the schema the committed GPU records have (the fixture's), which the
planner never prices from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptsweep import bench_times

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "gpu-check-fixture.json"
PLAN_KEYS = {"planned_micro_batch", "planned_peak_gib"}
"""Fields of the plan's prediction: on the CPU there is no GPU memory to plan against."""


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[dict, str]:
    """(the dry run's record, its log) from one run of the script."""
    tmp = tmp_path_factory.mktemp("gpu-check")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a local Ray of its own, never another's
    env.update(DRY="1", RESULTS=str(tmp / "results"), OUT=str(tmp / "out"), PY=sys.executable, OMP_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    r = subprocess.run(["bash", "bench/gpu_cluster_check.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=420)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (path,) = sorted((tmp / "results").glob("gpu-cpu-*.json"))
    return json.loads(path.read_text()), (tmp / "out" / "log.txt").read_text()


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_dry_run_writes_every_part_in_order(dry_run):
    doc, log = dry_run
    assert doc["meta"]["kind"] == "gpu-check" and doc["meta"]["dry"] is True and doc["meta"]["preset"] == "smoke"
    rows = doc["results"]
    assert [r["part"] for r in rows] == ["step"] * 16 + ["pack"] * 2 + ["wide"] * 2
    assert [(r["model"], r["scale"]) for r in rows[:8]] == \
        [(m, s) for s in (128, 256) for m in ("pt", "bert", "ut", "modernbert")]
    assert all(r["compile"] == "none" and r["tokens_per_s"] > 0 for r in rows[:8]), rows[:8]
    assert all(r["compile"] == "reduce-overhead" and "skipped" in r for r in rows[8:16])
    assert [(r["trials"], r["packer"], len(r["per_trial"])) for r in rows[16:18]] == [(1, "ray", 1), (2, "ray", 2)]
    assert all(r["tokens_per_s"] > 0 and "error" not in r for r in rows[16:18]), rows[16:18]
    assert [(r["model"], r["width"], r["micro_batch"]) for r in rows[18:]] == [("pt", 256, 8), ("ut", 192, 8)]
    assert log.index("== step-eager") < log.index("== pack") < log.index("== wide") < log.index("== trained: not run")
    assert "| PT trials per GPU (scale 128) |" in log  # the table printed from the record at the end


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_dry_record_has_the_committed_records_schema(dry_run):
    doc, _ = dry_run
    fixture = json.loads(FIXTURE.read_text())
    assert set(fixture["meta"]) - {"fixture"} <= set(doc["meta"]), sorted(set(fixture["meta"]) - set(doc["meta"]))
    for part in ("step", "pack", "wide"):
        want = set().union(*(r.keys() for r in fixture["results"] if r["part"] == part and "error" not in r))
        got = set().union(*(r.keys() for r in doc["results"] if r["part"] == part and "skipped" not in r))
        assert want - PLAN_KEYS - {"mfu"} <= got, (part, sorted(want - got))  # a pack's MFU needs a GPU's peak


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_dry_records_are_never_priced(dry_run, tmp_path):
    doc, _ = dry_run
    (tmp_path / "gpu-cpu.json").write_text(json.dumps(doc))
    cuda = {**doc, "results": [{**r, "device": "cuda"} for r in doc["results"]]}  # even rows that claim a GPU
    (tmp_path / "gpu-claims-cuda.json").write_text(json.dumps(cuda))
    records, skipped = bench_times.load(tmp_path)
    assert records == [] and skipped == ["gpu-claims-cuda.json", "gpu-cpu.json"]
