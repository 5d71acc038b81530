"""Measured training speed for the run planner (``ptsweep.planner``): the GPU rows of the records
``bench/bench_models.py`` writes to ``runs/bench/**/*.json`` (``{"meta": {"batch", "seq_len", ...}, "results":
[{"model", "shape", "width", "flops_per_token", "tokens_per_s", "device", "device_name"}, ...]}``) and of the GPU
check's records in ``bench/results/`` (rows with a ``part``, their ``micro_batch``, ``compile`` and, for packed
trials, ``trials`` per GPU and their aggregate tokens/s). Failed, skipped and dry-run rows are never used.

A planned run uses a record of the same GPU, model, width, FLOPs per token (within 1 %: the shape, vocabulary and
sequence length), PT attention path, compile mode and trials per GPU (else one trial alone); of several, the one
whose batch is closest to the run's micro-batch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

FLOPS_TOLERANCE = 0.01
"""Relative difference of FLOPs per token within which a record measures the planned shape."""


@dataclass(frozen=True)
class Measurement:
    device: str
    model: str
    width: int
    path: str
    """PT's attention path (dense | blockwise); '' for BERT and UT."""
    flops_per_token: float
    batch: int
    seq_len: int
    tokens_per_s: float
    source: str
    """The file it came from, relative to the folder read (prefixed with the folder when several were read)."""
    compile: str = "none"
    """``train.compile`` mode of the measured step."""
    trials: int = 1
    """Trials sharing the GPU; ``tokens_per_s`` is then their aggregate."""


def pt_path(shape: str) -> str:
    """The attention path bench_models.py wrote at the end of a PT shape ("... dense", "... blockwise"; older
    records: "... blockwise (fused is CPU-only)")."""
    return "blockwise" if "blockwise" in shape else shape.split()[-1] if shape.split() else ""


def planned_path(model_cfg) -> str:
    """The path a PT training step takes on a GPU."""
    if model_cfg.name != "pt":
        return ""
    return "blockwise" if model_cfg.use_blockwise("cuda") else "dense"


def load(folders: str | Path) -> tuple[list[Measurement], list[str]]:
    """(every GPU step-time record under ``folders``, separated by commas, and the JSON files without any); a file
    that is not valid JSON is a one-line ValueError."""
    parts = [p for p in str(folders).split(",") if p]
    if len(parts) == 1:
        return _load_one(Path(parts[0]), "")
    records, skipped = [], []
    for part in parts:
        found, left = _load_one(Path(part), part.rstrip("/") + "/")
        records, skipped = records + found, skipped + left
    return records, skipped


def _load_one(folder: Path, prefix: str) -> tuple[list[Measurement], list[str]]:
    """``load`` of one folder, each source named ``prefix`` + its path relative to the folder."""
    records, skipped = [], []
    for f in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
        try:
            doc = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"bench record {f}: not readable JSON ({type(e).__name__}: {e})".splitlines()[0]) from e
        name = prefix + str(f.relative_to(folder))
        found = _records(doc, name) if isinstance(doc, dict) else []
        records += found
        if not found:
            skipped.append(name)
    return records, skipped


def _usable(r, meta: dict) -> bool:
    """A measured GPU row (not failed, skipped or from a dry run) with the fields a plan needs."""
    need = ("model", "width", "flops_per_token", "tokens_per_s", "device")
    return (isinstance(r, dict) and all(r.get(k) is not None for k in need) and str(r["device"]).startswith("cuda")
            and "error" not in r and "skipped" not in r and not meta.get("dry")
            and "batch" in meta and "seq_len" in meta)


def _records(doc: dict, source: str) -> list[Measurement]:
    """The GPU step-time records of one bench_models.py output or GPU check record (none for other files)."""
    meta, out = doc.get("meta") or {}, []
    for r in doc.get("results") or []:
        if not _usable(r, meta):
            continue
        out.append(Measurement(device=str(r.get("device_name") or r["device"]), model=str(r["model"]),
                               width=int(r["width"]),
                               path=pt_path(str(r.get("shape", ""))) if r["model"] == "pt" else "",
                               flops_per_token=float(r["flops_per_token"]),
                               batch=int(r.get("micro_batch") or meta["batch"]), seq_len=int(meta["seq_len"]),
                               tokens_per_s=float(r["tokens_per_s"]), source=source,
                               compile=str(r.get("compile") or "none"), trials=int(r.get("trials", 1))))
    return out


def choose_device(records: list[Measurement], device: str) -> str:
    """The GPU whose records the plan uses: ``device`` (a case-insensitive part of the name), else the only GPU the
    records have ('' when none); ValueError when that is ambiguous or missing."""
    names = sorted({r.device for r in records})
    if device:
        hits = [n for n in names if device.lower() in n.lower()]
        if len(hits) != 1:
            raise ValueError(f"--device {device!r}: {'no' if not hits else 'several'} GPU(s) of the bench records "
                             f"match (they have: {', '.join(names) or 'none'})")
        return hits[0]
    if len(names) > 1:
        raise ValueError(f"the bench records measure several GPUs ({', '.join(names)}): choose one with --device")
    return names[0] if names else ""


def pick(records: list[Measurement], device: str, model_cfg, flops_per_token: float, seq_len: int,
         micro_batch: int, compile_mode: str = "none", trials: int = 1) -> Measurement | None:
    """The record of ``device`` that measures this shape, compile mode and packing (module docstring; one trial alone
    where no record has ``trials`` per GPU), batch closest to ``micro_batch``."""
    same = [r for r in records if r.device == device and r.model == model_cfg.name
            and r.width == int(model_cfg.width) and r.path == planned_path(model_cfg) and r.seq_len == seq_len
            and abs(r.flops_per_token - flops_per_token) <= FLOPS_TOLERANCE * flops_per_token
            and r.compile == compile_mode]
    same = [r for r in same if r.trials == trials] or [r for r in same if r.trials == 1]
    if not same:
        return None
    return min(same, key=lambda r: (abs(math.log(r.batch / max(micro_batch, 1))), -r.batch))
