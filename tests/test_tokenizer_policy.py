"""Nothing changes silently: the paper preset never trains a substitute tokenizer; the fallback WordPiece is
deterministic across processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_paper_preset_without_its_tokenizer_is_a_one_line_error_saying_how_to_get_it(tmp_path: Path) -> None:
    code = ("from ptsweep.cli import compose\nfrom ptsweep import data\n"
            "cfg = compose(['preset=paper'])\nassert not cfg.data.tokenizer_fallback\n"
            "data.load_tokenizer(cfg.data, docs=object())\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "DataError" in last and "bert-base-uncased" in last and "download bert-base-uncased" in last
    assert "FALLBACK" not in r.stderr  # no substitute tokenizer was trained
