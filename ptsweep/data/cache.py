"""The token cache (step 4 of :mod:`ptsweep.data`): raw int32 ``train.bin``/``val.bin``/``test.bin`` + ``meta.json``,
and the :class:`Corpus` it opens as."""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from tokenizers import Tokenizer

from ptsweep.config import DataConfig
from ptsweep.data.corpora import Documents, iter_texts, worker_count
from ptsweep.data.keys import FORMAT_VERSION
from ptsweep.errors import DataError

TOKENIZER_FILE, TOKENIZER_NAME = "tokenizer.json", "tokenizer_name.txt"
"""The token cache's copy of its tokenizer and the tokenizer's name (``ptsweep.data.open_token_cache``)."""


def _encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def _token_batches(docs: Any, text_field: str, tok: Tokenizer, num_proc: int) -> Iterator[list[list[int]]]:
    """Token ids per document, in document order. Big ``datasets.Dataset`` shards go through ``map(num_proc)``;
    shards grow geometrically so a small ``max_train_tokens`` cap never tokenises the whole corpus."""
    if isinstance(docs, list) or num_proc <= 1:
        for texts in iter_texts(docs, text_field):
            yield _encode(tok, texts)
        return
    start, shard = 0, 1024
    while start < len(docs):
        part = docs.select(range(start, min(len(docs), start + shard)))
        if len(part) >= 8192:
            enc = part.map(lambda b: {"ids": _encode(tok, [t or "" for t in b[text_field]])}, batched=True,
                           num_proc=num_proc, remove_columns=part.column_names)
            for i in range(0, len(enc), 4096):
                yield enc[i:i + 4096]["ids"]
        else:
            for texts in iter_texts(part, text_field):
                yield _encode(tok, texts)
        start += len(part)
        shard = min(shard * 2, 262_144)


def _write_stream(path: Path, batches: Iterator[list[list[int]]], sep_id: int, max_tokens: int) -> int:
    """Write docs + [SEP] as raw int32 to ``path``; stop after ``max_tokens`` (0 = all). Returns tokens written."""
    n = 0
    with open(path, "wb") as f:
        for batch in batches:
            for ids in batch:
                if not ids:
                    continue
                a = np.asarray(ids + [sep_id], dtype=np.int32)
                if max_tokens and n + len(a) > max_tokens:
                    a = a[: max_tokens - n]
                f.write(a.tobytes())
                n += len(a)
                if max_tokens and n >= max_tokens:
                    return n
    return n


def split_test_blocks(held_out_blocks: int, max_val_blocks: int, max_test_blocks: int) -> int:
    """Blocks of the held-out split that become the TEST split: up to ``max_test_blocks`` right after the first
    ``max_val_blocks`` (validation keeps priority)."""
    return int(max(0, min(max_test_blocks, held_out_blocks - min(held_out_blocks, max_val_blocks))))


def build_token_cache(folder: Path, docs: Documents, tok: Tokenizer, cfg: DataConfig, sep_id: int) -> None:
    L = cfg.seq_len
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.tmp-"))
    try:
        npr = worker_count(cfg)
        t0 = time.time()
        n_train = _write_stream(tmp / "train.bin", _token_batches(docs.train, docs.text_field, tok, npr), sep_id,
                                cfg.max_train_tokens)
        n_val = _write_stream(tmp / "val.bin", _token_batches(docs.val, docs.text_field, tok, npr), sep_id,
                              (cfg.max_val_blocks + cfg.max_test_blocks) * L)
        n_val_blocks = min(n_val // L, cfg.max_val_blocks)
        n_test_blocks = split_test_blocks(n_val // L, cfg.max_val_blocks, cfg.max_test_blocks)
        if n_test_blocks:  # the blocks after the validation blocks -> test.bin; val.bin keeps the first ones
            held = np.fromfile(tmp / "val.bin", dtype=np.int32)
            held[n_val_blocks * L:(n_val_blocks + n_test_blocks) * L].tofile(tmp / "test.bin")
            held[:n_val_blocks * L].tofile(tmp / "val.bin")
        meta = {"train_blocks": n_train // L, "val_blocks": n_val_blocks, "test_blocks": n_test_blocks,
                "seq_len": L, "train_tokens_raw": n_train, "val_tokens_raw": n_val, "corpus": docs.name,
                "tokenize_s": round(time.time() - t0, 2), "format": FORMAT_VERSION}
        if meta["train_blocks"] < 1 or meta["val_blocks"] < 1:
            raise DataError(f"{docs.name}: too little text for one block of data.seq_len={L} tokens "
                            f"(train {n_train}, validation {n_val} tokens)")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; the cache may be shared
        os.replace(tmp, folder)  # atomic publish: readers see the whole folder or nothing
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass(eq=False)
class Corpus:
    """A tokenised, packed corpus: ``train`` (n, L) and ``val`` (n_val, L) int32 (read-only memory maps)."""

    tokenizer: Tokenizer
    tokenizer_name: str
    """The tokenizer actually used: the hub id / path, or ``wordpiece-<V>-<corpus>-<key>`` for the fallback."""
    vocab_size: int
    pad_id: int
    mask_id: int
    cls_id: int
    sep_id: int
    special_ids: tuple[int, ...]
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), dtype=np.int32))
    """Held-out TEST blocks (n_test, L) (``data.max_test_blocks``; may be empty): never used to choose anything."""
    name: str = ""
    tokenizer_cached: bool = False
    """True when the tokenizer was not trained in this call (loaded from the disk cache, the hub or a path)."""
    tokens_cached: bool = False
    """True when the packed token arrays were loaded from the disk cache."""
    cache_path: str = ""
    _memo: dict = field(default_factory=dict, repr=False)

    @functools.cached_property
    def regular_ids(self) -> np.ndarray:
        """Non-special token ids: candidates for the 10% random replacement."""
        return np.setdiff1d(np.arange(self.vocab_size, dtype=np.int64), np.asarray(self.special_ids))
