"""bench/README.md's GPU tables (``bench/gpu_table.py``), rendered from the made-up fixture record: packing, CUDA
graphs, PT/BERT ratios and memory against the plan; no numbers where no real record exists."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "gpu-check-fixture.json"
sys.path.insert(0, str(REPO / "bench"))
import gpu_table  # noqa: E402


@pytest.fixture()
def record() -> dict:
    return json.loads(FIXTURE.read_text())


def _row(text: str, start: str) -> list[str]:
    """The cells of the first table line that starts with ``start``."""
    line = next(ln for ln in text.splitlines() if ln.startswith(start))
    return [c.strip() for c in line.strip("|").split("|")]


def test_fixture_renders_packing_graphs_ratios_and_memory(record):
    text = gpu_table.render({"gpu-check-fixture.json": record})
    assert text.startswith("### FIXTURE GPU (made-up numbers, not a measurement)")
    assert _row(text, "| 4 | ray |")[2:4] == ["320,000", "3.20"]  # aggregate tokens/s, x one trial
    assert _row(text, "| 8 | ray |")[2] == "OutOfMemoryError: CUDA out of memory"
    assert _row(text, "| 256 | pt |")[4:8] == ["100,000", "250,000", "0.007", "0.018"]  # eager / graphs
    assert _row(text, "| 1536 | ut |")[5] == "no result within 180 s"
    assert "- PT/BERT tokens/s at PT scale 256 (BERT width 320): 0.25" in text
    assert "- PT/BERT tokens/s at PT scale 1536 (BERT width 704): 0.38" in text
    assert _row(text, "| wide | ut |")[2:6] == ["3008", "86 / 128", "65.0", "96.5"]


def test_no_real_record_means_no_numbers(record):
    dry = copy.deepcopy(record)
    dry["meta"]["dry"] = True
    for records in ({}, {"gpu-cpu-dry.json": dry}):
        text = gpu_table.render(records)
        assert text.startswith("No GPU record in bench/results yet") and not any(c.isdigit() for c in text)


def test_the_readme_block_is_replaced_and_checked(tmp_path, record):
    readme = tmp_path / "README.md"
    readme.write_text(f"# B\n\nbefore\n\n{gpu_table.START}\nold\n{gpu_table.END}\nafter\n")
    (tmp_path / "results").mkdir()
    args = ["--readme", str(readme), "--results", str(tmp_path / "results")]
    assert gpu_table.main(args + ["--check"]) == 1
    assert gpu_table.main(args) == 0 and gpu_table.main(args + ["--check"]) == 0
    assert readme.read_text().endswith(f"{gpu_table.START}\n{gpu_table.render({})}{gpu_table.END}\nafter\n")
    (tmp_path / "results" / "gpu-x.json").write_text(json.dumps(record))
    assert gpu_table.main(args + ["--check"]) == 1  # a new record makes the block out of date
    with pytest.raises(ValueError, match="no <!-- gpu-table:start -->"):
        gpu_table.replace_block("no markers", "x")


def test_committed_readme_shows_what_bench_results_holds():
    assert gpu_table.main(["--check"]) == 0
