"""Shared by the bench scripts: write ``<stem>.json`` ({"meta", "results"}) and ``<stem>.md`` into the output folder
and print the table."""

from __future__ import annotations

import json
from pathlib import Path


def write_outputs(out_dir: str | Path, stem: str, meta: dict, results: list[dict], markdown_text: str) -> Path:
    """Write ``<out_dir>/<stem>.json`` and ``<stem>.md``, print the markdown table and where it went."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    (out / f"{stem}.md").write_text(markdown_text)
    print()
    print(markdown_text)
    print(f"wrote {out / f'{stem}.json'} and {out / f'{stem}.md'}")
    return out
