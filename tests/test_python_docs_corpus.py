"""The Python-documentation corpus: reST -> prose, the split by page path, the build from a .deb, its errors, and
conf/data/python_docs.yaml. No network and no apt: the .deb here is built locally with dpkg-deb."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from ptsweep.config import compose
from ptsweep.data import prepare
from ptsweep.data import python_docs as pd
from ptsweep.data.__main__ import main as data_main
from ptsweep.data.rst_text import rst_to_text, section_labels
from ptsweep.errors import DataError

SAMPLE = """\
.. _intro-label:
.. index:: single: spam; module

:mod:`spam` --- The spam module
===============================

.. module:: spam
   :synopsis: Eggs and spam.

.. index:: single: spam

**Source code:** :source:`Lib/spam.py`

--------------

The :func:`~spam.fry` function cooks *eggs* per :pep:`8` and :RFC:`2324`; see `the menu
<https://example.org/menu>`_ and :ref:`intro-label`.

Fry two eggs::

    import spam
    spam.fry(2)

>>> spam.fry(1)
'egg'

.. code-block:: shell-session

   $ python -m spam

.. note:: Spam is
   not ham.

.. function:: fry(n, *, oil=None, \\
   pan=None)
   :noindex:

   Return ``n\\t`` fried eggs.

   .. versionchanged:: 3.11
      Added the *oil* parameter.

.. method:: Pan.heat()
            Pan.cool()

   Change the heat.

+------+-----+
| a    | b   |
+======+=====+
| eggs | ham |
+------+-----+

=====  =====
Spam   Eggs
=====  =====
1      2
=====  =====

* First item
  continues with
  + 0.1 in the text.
* Second item.

.. This comment is dropped
   with its body.
"""

# Written by hand from the rules in ptsweep/data/rst_text.py's docstring, not by running the converter.
EXPECTED = """\
spam --- The spam module

The fry function cooks eggs per PEP 8 and RFC 2324; see the menu and spam --- The spam module.

Fry two eggs:

Spam is not ham.

Return n\\t fried eggs.

Added the oil parameter.

Change the heat.

First item continues with + 0.1 in the text.

Second item.
"""


def test_rst_to_text_keeps_the_prose_and_drops_code_tables_and_navigation() -> None:
    assert section_labels(SAMPLE) == {"intro-label": "spam --- The spam module"}
    assert rst_to_text(SAMPLE, section_labels(SAMPLE)) == EXPECTED


def test_rst_to_text_untitled_ref_without_a_known_label_reads_the_label() -> None:
    assert rst_to_text("See :ref:`json-commandline` and :ref:`the CLI <json-cli>`.\n") == \
        "See json commandline and the CLI.\n"


def _unit(path: str) -> float:
    """sha1(corpus, path) as a number in [0, 1), computed here independently of ptsweep.data.corpora."""
    return int.from_bytes(hashlib.sha1(f"python-docs\x1f{path}".encode()).digest()[:8], "big") / 2.0**64


def test_split_by_path_follows_the_path_hash_not_the_text_or_the_order() -> None:
    paths = [f"library/mod{i}" for i in range(2000)]
    split = pd.split_by_path({p: f"text {p}" for p in paths})
    held = set(split["validation"])
    assert held == {p for p in paths if _unit(p) < pd.HELD_OUT_FRACTION}
    assert held.isdisjoint(split["train"]) and len(held) + len(split["train"]) == len(paths)
    assert 60 <= len(held) <= 140  # 5 % of 2000 = 100, binomial sd ~10
    shuffled = paths[:]
    random.Random(0).shuffle(shuffled)
    again = pd.split_by_path({p: f"other text {p}" for p in shuffled})
    assert set(again["validation"]) == held


def _deb(tmp: Path, pages: dict[str, str]) -> Path:
    """A python3.11-doc-shaped .deb holding ``pages`` as reST sources, built with dpkg-deb (no network)."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb not installed")
    root = tmp / "pkg"
    sources = root / "usr/share/doc/python3.11/html/_sources"
    for name, text in pages.items():
        (sources / f"{name}.rst.txt").parent.mkdir(parents=True, exist_ok=True)
        (sources / f"{name}.rst.txt").write_text(text)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN/control").write_text("Package: python3.11-doc\nVersion: 3.11.2-0test\nArchitecture: all\n"
                                         "Maintainer: t <t@example.org>\nDescription: test docs\n")
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(tmp / "docs.deb")], check=True,
                   capture_output=True)
    return tmp / "docs.deb"


def test_build_from_a_deb_writes_the_split_pages_once(tmp_path: Path, capsys) -> None:
    body = "Some prose about the module that is long enough to count as a page of documentation. " * 3
    pages = {f"library/m{i}": f"Module {i}\n========\n\n{body}\n" for i in range(60)}
    pages["library/index"] = "Library\n=======\n\n.. toctree::\n\n   m0.rst\n"  # no prose: left out
    pages["library/m0"] = ".. _m-zero:\n\nZero\n====\n\n" + body + "\n"
    pages["howto/x"] = f"X\n===\n\nSee :ref:`m-zero`. {body}\n"  # an untitled ref to another page's section
    deb = _deb(tmp_path, pages)
    out = tmp_path / "corpus"
    assert data_main(["build-python-docs", "--deb", str(deb), "--dest", str(out)]) == 0
    assert capsys.readouterr().out.startswith("built: python-docs (python3.11-doc 3.11.2-0test): 61 documents")
    rows = {s: [json.loads(ln) for ln in (out / f"{s}.jsonl").read_text().splitlines()] for s in pd.SPLITS}
    assert sorted(r["path"] for r in rows["validation"]) == sorted(
        p for p in pages if p != "library/index" and _unit(p) < pd.HELD_OUT_FRACTION)
    texts = {r["path"]: r["text"] for s in pd.SPLITS for r in rows[s]}
    assert len(texts) == 61 and "library/index" not in texts and texts["howto/x"].startswith("X\n\nSee Zero. Some")
    man = json.loads((out / "manifest.json").read_text())
    assert man["documents"] == {s: len(rows[s]) for s in pd.SPLITS}
    assert sum(man["characters"].values()) == sum(map(len, texts.values()))
    mtime = (out / "train.jsonl").stat().st_mtime_ns
    assert data_main(["build-python-docs", "--deb", str(deb), "--dest", str(out)]) == 0
    assert capsys.readouterr().out.startswith("already built: ")
    assert (out / "train.jsonl").stat().st_mtime_ns == mtime


def _fake_apt_get(folder: Path) -> None:
    """An apt-get that fails as one does without network (the test never reaches a mirror)."""
    script = folder / "apt-get"
    script.write_text("#!/bin/sh\necho 'W: some warning' >&2\n"
                      "echo 'E: Failed to fetch http://deb.debian.org/x.deb  Temporary failure resolving' >&2\n"
                      "exit 100\n")
    script.chmod(0o755)


def test_failed_or_missing_apt_get_is_a_one_line_error(tmp_path: Path, monkeypatch, capsys) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(DataError) as ei:
        pd.build_python_docs(tmp_path / "c1")
    assert "\n" not in str(ei.value) and "apt-get not found" in str(ei.value) and "--deb" in str(ei.value)
    _fake_apt_get(bin_dir)
    assert data_main(["build-python-docs", "--dest", str(tmp_path / "c2")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get download python3.11-doc failed (E: Failed to fetch" in err
    assert not (tmp_path / "c2" / "manifest.json").exists() and not list((tmp_path / "c2").rglob("*.deb"))


def test_python_docs_config_composes_and_a_missing_corpus_names_the_build_command(tmp_path: Path) -> None:
    cfg = compose(["preset=lr_study", "data=python_docs"])
    d = cfg.data
    assert (d.name, d.tokenizer, d.vocab_size, d.build_command) == ("local", "wordpiece", 8192, "make corpus-python-docs")
    assert d.files == ["runs/cache/corpora/python-docs/train.jsonl"]
    assert d.val_files == ["runs/cache/corpora/python-docs/validation.jsonl"]
    # reports and horizon.json name the corpus by its folder, not by the loader's "local"
    assert d.label == "python-docs (local files)" and compose(["data=shakespeare"]).data.label == "shakespeare"
    assert compose(["data=local", "data.files=[notes.txt]"]).data.label == "notes.txt (local files)"
    missing = compose(["preset=smoke", "data=python_docs", f"data.files=[{tmp_path}/train.jsonl]",
                       f"data.cache_dir={tmp_path}/cache"]).data
    with pytest.raises(DataError) as ei:
        prepare(missing)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("data.files: no file matches") and msg.endswith(
        "build it with `make corpus-python-docs`")


def test_build_command_changes_no_run_identity() -> None:
    from ptsweep.identity import config_hash, result_config

    a, b = compose(["data=python_docs"]), compose(["data=python_docs", "data.build_command=other"])
    assert "data.build_command" not in result_config(a) and config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(compose(["data=python_docs", "data.files=[other.jsonl]"]))
