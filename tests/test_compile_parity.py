"""``bench/compile_parity.py`` end to end on the CPU (the smoke preset's shapes, mode 'none' so no compile is
waited for): three runs from one initialisation, their per-step losses, and the largest differences it reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_parity_reports_per_step_losses_and_their_largest_differences(tmp_path):
    out = tmp_path / "parity.json"
    r = subprocess.run([sys.executable, "bench/compile_parity.py", "--dry", "--mode", "none", "--steps", "4",
                        "--lr", "1e-2", "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "max |loss diff| compiled - eager" in r.stdout
    p = json.loads(out.read_text())
    eager, again, comp = p["eager_losses"], p["eager_again_losses"], p["compiled_losses"]
    assert len(eager) == len(again) == len(comp) == 4
    assert eager[-1] < eager[0]  # the runs train: batch i is new each step, the unigram is learned
    assert p["max_abs_diff_eager_eager"] == max(abs(a - b) for a, b in zip(eager, again)) == 0.0
    assert p["max_abs_diff_compiled_eager"] == max(abs(a - b) for a, b in zip(eager, comp)) == 0.0
    assert (p["mode"], p["device"], p["steps"]) == ("none", "cpu", 4)
