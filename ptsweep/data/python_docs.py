"""A second English corpus: the prose of the Python documentation, built from Debian's ``python3.11-doc`` package
(``make corpus-python-docs``; docs/data.md): ``train.jsonl`` and ``validation.jsonl`` (one ``{"path", "text"}``
document a line, a page held out iff sha1(corpus, its path) < :data:`HELD_OUT_FRACTION`) plus ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from ptsweep.data.corpora import unit_hash
from ptsweep.data.keys import locked
from ptsweep.data.rst_text import rst_to_text, section_labels
from ptsweep.errors import DataError
from ptsweep.io import read_json, replace_atomically, repo_root, resolve_path, write_json

PACKAGE = "python3.11-doc"
CORPUS = "python-docs"
HELD_OUT_FRACTION = 0.05
MIN_CHARS = 200  # pages with less prose than this are tables of contents or stubs (e.g. library/windows)
FORMAT = 1  # bump when the conversion or the split changes: a built corpus of another format is rebuilt
CHARS_PER_TOKEN = 4.7  # of the V = 8192 WordPiece of data=python_docs: the token estimate of ``summary``
SPLITS = ("train", "validation")


def corpus_dir(dest: str | Path | None = None) -> Path:
    """Where the corpus is written: ``dest``, else ``runs/cache/corpora/python-docs`` under the repository root."""
    return resolve_path(dest) if dest is not None else repo_root() / "runs" / "cache" / "corpora" / CORPUS


def documents_from_sources(sources: Path) -> dict[str, str]:
    """{page path without '.rst.txt': its prose} for every reST source under ``sources`` with at least
    :data:`MIN_CHARS` characters of prose; untitled ``:ref:`` links resolve to the section titles of all pages."""
    raw = {p.relative_to(sources).as_posix().removesuffix(".rst.txt"): p.read_text(encoding="utf-8")
           for p in sorted(sources.rglob("*.rst.txt"))}
    labels: dict[str, str] = {}
    for text in raw.values():
        labels.update(section_labels(text))
    docs = {path: rst_to_text(text, labels) for path, text in raw.items()}
    return {path: text for path, text in docs.items() if len(text) >= MIN_CHARS}


def split_by_path(docs: dict[str, str], fraction: float = HELD_OUT_FRACTION) -> dict[str, dict[str, str]]:
    """{'train': {...}, 'validation': {...}}: a page is held out iff sha1(corpus, path) < ``fraction``."""
    held_out = {p for p in docs if unit_hash(CORPUS, p) < fraction}
    if not held_out or len(held_out) == len(docs):
        raise DataError(f"{len(docs)} pages cannot be split into train and validation at fraction {fraction}")
    return {"train": {p: t for p, t in docs.items() if p not in held_out},
            "validation": {p: t for p, t in docs.items() if p in held_out}}


def _run(cmd: list[str], what: str, hint: str, cwd: Path | None = None) -> str:
    """Run ``cmd``; DataError naming ``what`` failed, its last stderr line and ``hint`` if it cannot."""
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise DataError(f"{what}: {cmd[0]} not found (a Debian or Ubuntu machine is needed); {hint}") from None
    except subprocess.TimeoutExpired:
        raise DataError(f"{what}: no answer in 600 s; {hint}") from None
    if res.returncode != 0:
        errors = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("W:")] or ["no output"]
        raise DataError(f"{what} failed ({errors[-1].strip()}); {hint}")
    return res.stdout


def download_deb(package: str, folder: Path) -> Path:
    """The ``.deb`` of ``package`` in ``folder``, fetched with ``apt-get download`` unless one is there already."""
    found = sorted(folder.glob(f"{package}_*.deb"))
    if found:
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:  # never a half-written .deb
        _run(["apt-get", "download", package], f"apt-get download {package}",
             "check the apt sources and the network, or fetch the .deb elsewhere and pass --deb PATH", cwd=Path(tmp))
        got = sorted(Path(tmp).glob(f"{package}_*.deb"))
        if not got:
            raise DataError(f"apt-get download {package} wrote no {package}_*.deb")
        shutil.move(got[-1], folder / got[-1].name)
    return folder / got[-1].name


def _package_field(deb: Path, field: str) -> str:
    return _run(["dpkg-deb", "-f", str(deb), field], f"dpkg-deb -f {deb.name}", "is it a .deb file?").strip()


def extract_sources(deb: Path, dest: Path) -> Path:
    """Unpack ``deb`` into ``dest`` (``dpkg-deb -x``) and return its ``usr/share/doc/*/html/_sources`` folder."""
    _run(["dpkg-deb", "-x", str(deb), str(dest)], f"dpkg-deb -x {deb.name}", "is it a .deb file?")
    found = sorted(p for p in dest.glob("usr/share/doc/*/html/_sources") if p.is_dir())
    if not found:
        raise DataError(f"{deb.name} holds no usr/share/doc/*/html/_sources: not a Python documentation package")
    return found[0]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _write_jsonl(path: Path, docs: dict[str, str]) -> None:
    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            for p, text in docs.items():
                f.write(json.dumps({"path": p, "text": text}, ensure_ascii=False) + "\n")
    replace_atomically(path, write)


def read_manifest(folder: Path) -> dict | None:
    """The manifest of a complete corpus in ``folder`` (its files all present), else None."""
    man = folder / "manifest.json"
    if not man.is_file() or not all((folder / f"{s}.jsonl").is_file() for s in SPLITS):
        return None
    return read_json(man)


def build_python_docs(dest: str | Path | None = None, deb: str | Path | None = None,
                      package: str = PACKAGE) -> tuple[dict, bool]:
    """Build the corpus unless it is built already: (its manifest, whether it was already there). ``deb`` uses
    that package file instead of ``apt-get download package``."""
    out = corpus_dir(dest)
    deb_path = resolve_path(deb) if deb is not None else None
    if deb_path is not None and not deb_path.is_file():
        raise DataError(f"--deb {deb}: no such file")
    with locked(out):
        out.mkdir(parents=True, exist_ok=True)
        man = read_manifest(out)
        wanted = {"format": FORMAT, **({"deb_sha256": _sha256(deb_path)} if deb_path else {"package": package})}
        if man is not None and all(man.get(k) == v for k, v in wanted.items()):
            return man, True
        (out / "manifest.json").unlink(missing_ok=True)  # a rebuild killed half-way must not look complete
        deb_path = deb_path or download_deb(package, out / "deb")
        with tempfile.TemporaryDirectory(dir=out, prefix=".extract-") as tmp:
            docs = documents_from_sources(extract_sources(deb_path, Path(tmp)))
        splits = split_by_path(docs)
        for name, part in splits.items():
            _write_jsonl(out / f"{name}.jsonl", part)
        man = {"format": FORMAT, "package": _package_field(deb_path, "Package"),
               "version": _package_field(deb_path, "Version"), "deb": deb_path.name, "deb_sha256": _sha256(deb_path),
               "held_out_fraction": HELD_OUT_FRACTION, "min_chars": MIN_CHARS,
               "documents": {s: len(splits[s]) for s in SPLITS},
               "characters": {s: sum(map(len, splits[s].values())) for s in SPLITS}}
        write_json(out / "manifest.json", man)  # last: its presence marks a complete corpus
    return man, False


def summary(man: dict, folder: Path) -> str:
    """One line: pages, characters and a token estimate per split, and where the files are."""
    docs, chars = man["documents"], man["characters"]
    total = sum(chars.values())
    return (f"{CORPUS} ({man['package']} {man['version']}): {sum(docs.values())} documents "
            f"(train {docs['train']}, validation {docs['validation']}), {total:,} characters "
            f"(train {chars['train']:,}, validation {chars['validation']:,}), "
            f"~{total / CHARS_PER_TOKEN / 1e6:.1f} M tokens at ~{CHARS_PER_TOKEN:g} characters per token -> {folder}")
