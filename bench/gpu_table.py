"""bench/README.md's GPU tables, rendered from the GPU check's record files (``bench/bench_cluster.py``,
``cluster_record``): trials per GPU against aggregate tokens/s, tokens/s and MFU with and without CUDA graphs,
PT/BERT tokens/s, peak memory against the plan. Dry records (CPU, tiny shapes) are never rendered; where no record
is left, the text says so and shows no number.

    python bench/gpu_table.py                          # rewrite the block of bench/README.md from bench/results
    python bench/gpu_table.py --check                  # exit 1 when the README's block is not what the records give
    python bench/gpu_table.py --record PATH            # print one record's tables (the script's last step)

The README's block lies between the lines ``<!-- gpu-table:start -->`` and ``<!-- gpu-table:end -->``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- gpu-table:start -->", "<!-- gpu-table:end -->"


def _f(v, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def _ok(r: dict) -> bool:
    return "error" not in r and "skipped" not in r and r.get("tokens_per_s") is not None


def _why(r: dict) -> str:
    return (r.get("error") or r.get("skipped") or "no result").replace("|", "/")


def step_table(rows: list[dict]) -> list[str]:
    """Per model and PT scale: micro-batch, tokens/s and MFU eager and with CUDA graphs, eager peak memory."""
    steps = [r for r in rows if r.get("part") == "step"]
    keys = list(dict.fromkeys((r["scale"], r["model"]) for r in steps))
    out = ["| PT scale | model | width | micro | tokens/s eager | tokens/s graphs | MFU eager | MFU graphs | "
           "peak GiB eager |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for scale, model in keys:
        by = {r["compile"]: r for r in steps if (r["scale"], r["model"]) == (scale, model)}
        e, g = by.get("none", {}), by.get("reduce-overhead", {})
        cell = {k: (_f(r.get("tokens_per_s")) if _ok(r) else _why(r) if r else "-") for k, r in (("e", e), ("g", g))}
        out.append(f"| {scale} | {model} | {_f(e.get('width') or g.get('width'), 'd')} | "
                   f"{_f(e.get('micro_batch'), 'd')} | {cell['e']} | {cell['g']} | {_f(e.get('mfu'), '.3f')} | "
                   f"{_f(g.get('mfu'), '.3f')} | {_f(e.get('peak_mem_gib'), '.1f')} |")
    return out


def ratio_lines(rows: list[dict]) -> list[str]:
    """PT/BERT eager tokens/s at each scale where both were measured."""
    eager = {(r["model"], r["scale"]): r for r in rows if r.get("part") == "step" and r.get("compile") == "none"
             and _ok(r)}
    return [f"- PT/BERT tokens/s at PT scale {s} (BERT width {b['width']}): "
            f"{eager[('pt', s)]['tokens_per_s'] / b['tokens_per_s']:.2f}"
            for (m, s), b in eager.items() if m == "bert" and ("pt", s) in eager]


def pack_table(rows: list[dict]) -> list[str]:
    """Trials per GPU against aggregate tokens/s (and against one trial alone), largest peak memory of a trial."""
    packs = [r for r in rows if r.get("part") == "pack"]
    if not packs:
        return []
    alone = next((r["tokens_per_s"] for r in packs if r["trials"] == 1 and _ok(r)), None)
    out = [f"| PT trials per GPU (scale {packs[0]['scale']}) | packer | aggregate tokens/s | x one trial | "
           "aggregate MFU | peak GiB per trial | planned peak GiB |", "|---:|---|---:|---:|---:|---:|---:|"]
    for r in packs:
        speedup = _f(r["tokens_per_s"] / alone, ".2f") if _ok(r) and alone else "-"
        out.append(f"| {r['trials']} | {r['packer']} | {_f(r['tokens_per_s']) if _ok(r) else _why(r)} | {speedup} | "
                   f"{_f(r.get('mfu'), '.3f')} | {_f(r.get('peak_mem_gib'), '.1f')} | "
                   f"{_f(r.get('planned_peak_gib'), '.1f')} |")
    return out


def memory_table(rows: list[dict]) -> list[str]:
    """Every eager step and wide row: measured micro-batch and peak memory against the plan's."""
    mem = [r for r in rows if r.get("part") in ("step", "wide") and r.get("compile") == "none"]
    out = ["| part | model | width | micro (measured / plan) | peak GiB measured | peak GiB plan |",
           "|---|---|---:|---|---:|---:|"]
    for r in mem:
        if not _ok(r):
            out.append(f"| {r['part']} | {r['model']} | - | {_why(r)} | - | - |")
            continue
        out.append(f"| {r['part']} | {r['model']} | {r['width']} | {r['micro_batch']} / "
                   f"{_f(r.get('planned_micro_batch'), 'd')} | {_f(r.get('peak_mem_gib'), '.1f')} | "
                   f"{_f(r.get('planned_peak_gib'), '.1f')} |")
    return out


def render_record(name: str, doc: dict) -> list[str]:
    """One record's heading and its tables."""
    m, rows = doc.get("meta", {}), doc.get("results", [])
    out = [f"### {m.get('device_name', '?')}, {m.get('started', '?')[:10]}, commit {m.get('commit', '?')} "
           f"(`{name}`)", "",
           f"Preset {m.get('preset')}, batch {m.get('batch')} x {m.get('seq_len')}, V = {m.get('vocab')}, "
           f"train.micro_batch_size={m.get('micro_batch_size')}, {m.get('steps')} timed steps after "
           f"{m.get('warmup')}, torch {m.get('torch')}.", "", *step_table(rows), ""]
    ratios = ratio_lines(rows)
    out += [*ratios, ""] if ratios else []
    pack = pack_table(rows)
    out += [*pack, ""] if pack else []
    return out + memory_table(rows) + [""]


def render(records: dict[str, dict]) -> str:
    """The README block for ``{file name: record}`` (dry records left out); says so when none is left."""
    real = {k: v for k, v in sorted(records.items()) if not v.get("meta", {}).get("dry")}
    if not real:
        return ("No GPU record in bench/results yet: the GPU check has not run on a GPU, so this section has no "
                "measured numbers (`make plan` prices GPU-hours at the assumed MFU until one is committed).\n")
    lines = []
    for name, doc in real.items():
        lines += render_record(name, doc)
    return "\n".join(lines).rstrip() + "\n"


def load(folder: str | Path) -> dict[str, dict]:
    """{file name: record} of every GPU check record (meta kind 'gpu-check') in ``folder``."""
    out = {}
    for f in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        doc = json.loads(f.read_text())
        if isinstance(doc, dict) and (doc.get("meta") or {}).get("kind") == "gpu-check":
            out[f.name] = doc
    return out


def replace_block(text: str, block: str) -> str:
    """``text`` with the lines between START and END replaced by ``block``; a ValueError without the markers."""
    if START not in text or END not in text:
        raise ValueError(f"the README has no {START} ... {END} block")
    before, rest = text.split(START, 1)
    return f"{before}{START}\n{block}{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--readme", default=str(ROOT / "bench" / "README.md"))
    ap.add_argument("--record", default="", help="print this record's tables (dry or not) and exit")
    ap.add_argument("--check", action="store_true", help="exit 1 when the README's block is out of date")
    a = ap.parse_args(argv)
    if a.record:
        print("\n".join(render_record(Path(a.record).name, json.loads(Path(a.record).read_text()))))
        return 0
    readme = Path(a.readme)
    new = replace_block(readme.read_text(), render(load(a.results)))
    if a.check:
        same = new == readme.read_text()
        print(f"{readme}: GPU tables {'up to date' if same else 'out of date: run python bench/gpu_table.py'}")
        return 0 if same else 1
    readme.write_text(new)
    print(f"wrote the GPU tables of {readme} from {a.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
