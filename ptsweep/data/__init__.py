"""Corpus -> tokenizer -> packed token ids -> MLM batches (imports no model code); the steps: docs/data.md.

:func:`prepare` loads the documents (:mod:`.corpora`), the tokenizer (:mod:`.tokenizer`) and the packed token cache
(:mod:`.cache`, :mod:`.keys`) and opens it as a :class:`Corpus`; :mod:`.batches` masks it into MLM batches.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ptsweep.config import DataConfig
from ptsweep.data.batches import batch_indices, mask_tokens, test_batches, train_batch, val_batches
from ptsweep.data.cache import TOKENIZER_FILE, TOKENIZER_NAME, Corpus, build_token_cache, split_test_blocks
from ptsweep.data.corpora import Documents, fetch_shakespeare, load_documents, read_shakespeare, split_documents
from ptsweep.data.keys import FORMAT_VERSION, locked, sha_key
from ptsweep.data.tokenizer import load_tokenizer
from ptsweep.errors import DataError
from ptsweep.io import replace_atomically, resolve_path
from ptsweep.wordpiece import SPECIAL_TOKENS

__all__ = ["Corpus", "Documents", "batch_indices", "describe", "fetch_shakespeare", "load_documents", "load_tokenizer",
           "mask_tokens", "open_token_cache", "prepare", "read_shakespeare", "split_documents", "split_test_blocks",
           "test_batches", "train_batch", "val_batches"]


def _special_id(tok: Tokenizer, token: str) -> int:
    i = tok.token_to_id(token)
    if i is None:
        raise DataError(f"tokenizer has no {token} token: use a BERT-style tokenizer")
    return int(i)


def prepare(cfg: DataConfig) -> Corpus:
    """Load (or build and cache) the tokenizer and the packed token arrays of ``cfg``; with ``cfg.token_cache``,
    open that folder (:func:`open_token_cache`)."""
    cfg.validate()
    if cfg.token_cache:
        return open_token_cache(cfg)
    docs = load_documents(cfg)  # needed in any case: its identity is part of every cache key
    tok, tok_name, tok_cached = load_tokenizer(cfg, docs)
    ids = {t: _special_id(tok, t) for t in SPECIAL_TOKENS}
    tok_hash = sha_key(tok.to_str())[:16]
    key_parts = [docs.identity, tok_name, tok_hash, cfg.seq_len, cfg.max_train_tokens, cfg.max_val_blocks,
                 FORMAT_VERSION]
    if cfg.max_test_blocks:  # only then: caches without a test split keep their keys
        key_parts.append(f"test{cfg.max_test_blocks}")
    key = sha_key(*key_parts)[:16]
    folder = resolve_path(cfg.cache_dir) / "tokens" / f"{docs.name}-{key}"
    cached = (folder / "meta.json").is_file()
    if not cached:
        with locked(folder):
            cached = (folder / "meta.json").is_file()
            if not cached:
                build_token_cache(folder, docs, tok, cfg, ids["[SEP]"])
    if not (folder / TOKENIZER_NAME).is_file():  # caches built before the tokenizer copy: add it once
        with locked(folder):
            replace_atomically(folder / TOKENIZER_FILE, lambda tmp: tok.save(str(tmp)))
            replace_atomically(folder / TOKENIZER_NAME, lambda tmp: Path(tmp).write_text(tok_name))
    return _open(folder, cfg, tok, tok_name, tok_cached, cached)


def open_token_cache(cfg: DataConfig) -> Corpus:
    """The corpus in the prepared folder ``cfg.token_cache`` (its meta.json and tokenizer copy), without the
    documents. DataError when the folder holds no prepared cache or one of another ``data.seq_len``."""
    folder = Path(cfg.token_cache)
    missing = [f for f in ("meta.json", TOKENIZER_FILE, TOKENIZER_NAME) if not (folder / f).is_file()]
    if missing:
        raise DataError(f"data.token_cache={folder}: not a prepared token cache (missing {', '.join(missing)}); "
                        f"leave data.token_cache empty to prepare the corpus")
    seq_len = json.loads((folder / "meta.json").read_text()).get("seq_len")
    if seq_len != cfg.seq_len:
        raise DataError(f"data.token_cache={folder}: blocks of {seq_len} tokens, but data.seq_len={cfg.seq_len}")
    tok = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    return _open(folder, cfg, tok, (folder / TOKENIZER_NAME).read_text(), True, True)


def _open(folder: Path, cfg: DataConfig, tok: Tokenizer, tok_name: str, tok_cached: bool, cached: bool) -> Corpus:
    """The :class:`Corpus` of the token cache ``folder`` (memory maps of its splits) and its tokenizer."""
    ids = {t: _special_id(tok, t) for t in SPECIAL_TOKENS}
    meta = json.loads((folder / "meta.json").read_text())
    shapes = {s: (int(meta.get(f"{s}_blocks", 0)), cfg.seq_len) for s in ("train", "val", "test")}
    splits = {s: np.memmap(folder / f"{s}.bin", dtype=np.int32, mode="r", shape=shape) if shape[0]
              else np.zeros(shape, dtype=np.int32) for s, shape in shapes.items()}  # no test split: empty
    return Corpus(tokenizer=tok, tokenizer_name=tok_name, vocab_size=tok.get_vocab_size(), pad_id=ids["[PAD]"],
                  mask_id=ids["[MASK]"], cls_id=ids["[CLS]"], sep_id=ids["[SEP]"],
                  special_ids=tuple(sorted(set(ids.values()))), **splits, name=meta["corpus"],
                  tokenizer_cached=tok_cached, tokens_cached=cached, cache_path=str(folder))


def describe(corpus: Corpus) -> str:
    """One line for logs: corpus, tokens, blocks, vocab and the tokenizer actually used."""
    n, L = corpus.train.shape
    return (f"data={corpus.name}: train {n:,} blocks x {L} = {n * L:,} tokens, val {corpus.val.shape[0]:,} blocks, "
            f"vocab {corpus.vocab_size:,}, tokenizer {corpus.tokenizer_name}"
            f"{' (cached)' if corpus.tokens_cached else ''}")
