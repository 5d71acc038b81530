"""The GPU check's record file (``bench/bench_cluster.py``): one JSON file per run, ``{"meta": {...}, "results":
[row, ...]}``, rewritten whole (write, then rename) after every row, so a run cut short keeps each row it measured.

``meta``: ``kind`` ("gpu-check"), ``dry`` (true: a CPU dry run at tiny shapes, never a measurement to price from),
``preset``, ``batch``, ``seq_len``, ``vocab``, ``device_name``, ``torch``, ``commit``, ``started``, ``saved``.
Rows (``part``: step | pack | wide): the measured fields of ``cluster_measure.measure`` (model, scale, width,
compile, micro_batch, tokens_per_s, flops_per_token, flop_per_s, mfu, peak_mem_gib, device, device_name, ...), the
plan's prediction beside them (:func:`plan_fields`), and for a pack row ``trials``, ``gpus_per_trial``, ``packer``,
aggregate ``tokens_per_s`` and ``per_trial``. A row that measured nothing has ``error`` (or ``skipped``) instead.
``ptsweep.bench_times`` reads these files; ``bench/gpu_table.py`` renders them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIND = "gpu-check"


def slug(device_name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (a file-name part)."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "device"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def new_record(folder: str | Path, meta: dict) -> Path:
    """Create ``<folder>/gpu-<device>-<date>.json`` (``-2``, ``-3``, ... when that exists) with ``meta`` and no rows;
    returns its path."""
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{slug(meta['device_name'])}-{time.strftime('%Y-%m-%d')}"
    path, i = folder / f"{stem}.json", 1
    while path.exists():
        i += 1
        path = folder / f"{stem}-{i}.json"
    full = {"kind": KIND, **meta, "torch": torch.__version__, "commit": _commit(), "platform": platform.platform(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write(path, {"meta": full, "results": []})
    return path


def _write(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def read(path: str | Path) -> dict:
    """A record file as a dict (``{"meta", "results"}``)."""
    return json.loads(Path(path).read_text())


def append(path: str | Path, row: dict) -> None:
    """Add one row to the record and rewrite it (module docstring); prints the row as one line."""
    path = Path(path)
    doc = read(path)
    doc["results"].append(row)
    doc["meta"]["saved"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    _write(path, doc)
    shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "per_trial"}
    print("record:", json.dumps(shown), flush=True)


def plan_fields(spec: dict, total_mem_gib: float | None) -> dict:
    """``ptsweep.planner``'s prediction for the spec on a GPU of ``total_mem_gib`` (at the spec's memory share): the
    micro-batch the plan expects ``train.micro_batch_size`` to give and the peak memory at it (the planner counts
    fp32 activations, so bf16 autocast should land below). Empty without a GPU."""
    from ptsweep import planner

    if not total_mem_gib:
        return {}
    cfg, V, L = spec["model_cfg"], spec["vocab"], spec["seq_len"]
    act = planner.activation_bytes(cfg, V, L)["peak"]
    static = planner.static_bytes(cfg, V)
    mem_gb = total_mem_gib * spec.get("fraction", 1.0) * 2**30 / 1e9
    fit = planner.micro_batch(spec["batch"], act, static, mem_gb)
    micro = planner.run_micro_batch(spec["micro"], spec["batch"], fit)
    return {"planned_micro_batch": micro, "planned_peak_gib": (static + max(micro, 1) * act) / 2**30}


def pack_row(spec: dict, n: int, packer: str, rows: list[dict]) -> dict:
    """One pack row from its n trials' rows: aggregate tokens/s (None unless all n measured), the largest peak of a
    trial, the plan's prediction at a 1/n share."""
    ok = [r for r in rows if "error" not in r]
    first = ok[0] if ok else {}
    agg = sum(r["tokens_per_s"] for r in ok) if len(ok) == n else None
    peaks = [r["peak_mem_gib"] for r in ok if r.get("peak_mem_gib") is not None]
    row = {"part": "pack", "model": spec["model_cfg"].name, "scale": spec["scale"], "compile": spec["compile"],
           "trials": n, "gpus_per_trial": 1.0 / n, "packer": packer, "tokens_per_s": agg,
           **{k: first.get(k) for k in ("width", "shape", "batch", "micro_batch", "seq_len", "vocab", "flops_per_token",
                                         "device", "device_name", "total_mem_gib")},
           "peak_mem_gib": max(peaks) if peaks else None,
           "per_trial": [{k: r.get(k) for k in ("tokens_per_s", "peak_mem_gib", "micro_batch", "mfu", "error",
                                                "timed_alone") if k in r} for r in rows]}
    if agg is not None and first.get("flops_per_token") and ok[0].get("mfu") is not None:
        row["mfu"] = sum(r["mfu"] for r in ok)
    if agg is None:
        row["error"] = "; ".join(sorted({r["error"] for r in rows if "error" in r})) or "a trial failed"
    return {**row, **plan_fields({**spec, "fraction": 1.0 / n}, first.get("total_mem_gib"))}
