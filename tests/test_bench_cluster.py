"""The GPU cluster check's CPU smoke mode (``bench/bench_cluster.py --smoke``): every part runs and is reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_cluster_check_smoke_reports_every_part(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    r = subprocess.run([sys.executable, str(REPO / "bench" / "bench_cluster.py"), "--smoke", "--out", str(tmp_path)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=380)
    assert r.returncode == 0, r.stderr[-3000:]
    (res,) = json.loads((tmp_path / "cluster.json").read_text())["results"]
    rows = [r for p in res["pack"] for r in p["rows"]] + res["mfu"] + res["ratio"] + [res["wide"]]
    assert not [r["error"] for r in rows if "error" in r]
    assert [(p["trials"], len(p["rows"])) for p in res["pack"]] == [(1, 1), (2, 2)]
    assert all(p["total_tokens_per_s"] > 0 for p in res["pack"])
    assert [(r["model"], r["width"]) for r in res["mfu"] + res["ratio"]] == \
        [("pt", 128), ("pt", 192), ("bert", 128), ("bert", 192)]
    assert res["ratio"][0]["model_width"] != 128  # BERT at the width matched to PT's parameter count
    assert all(r["mfu"] is None and r["micro_batch"] == 8 for r in rows)  # CPU: no peak FLOP/s, the full batch
    assert res["wide"]["width"] == 256 and [p["width"] for p in res["plan"]] == [128, 192, 256]
    md = (tmp_path / "cluster.md").read_text()
    assert "| 2 |" in md and "PT/BERT tokens/s at PT width 128" in md and "planned peak GiB" in md
