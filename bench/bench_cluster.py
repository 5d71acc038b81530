"""The GPU check (``bench/gpu_cluster_check.sh`` runs it part by part on a lent GPU machine; ``make bench-cluster``
runs every part): what the paper preset's runs cost on one GPU, measured the way training runs, each row written to
a record file as soon as it is measured (``cluster_record``).

The models are the ones the plan prices (:func:`plan_models`: PT at a scale and the BERT, UT and ModernBERT that
scaling-curves matches to it under the preset), so ``make plan`` can time its runs from these rows
(``ptsweep.bench_times``). Parts, in this order:

- ``step-eager``: PT, BERT, UT and ModernBERT at PT widths 256 and 1536, eager (bf16 autocast, the preset's batch
  and ``train.micro_batch_size``): tokens/s, FLOP/s, MFU, peak memory, the plan's micro-batch and peak beside them;
- ``step-graphs``: the same rows with ``train.compile=reduce-overhead`` (CUDA graphs), PT first;
- ``pack``: 1, 2, 4 and 8 PT width-256 trials on one GPU, packed by Ray's fractional GPUs (``cluster_pack``):
  aggregate tokens/s, peak memory per trial;
- ``wide``: PT at width 3072, then the UT of PT scale 2048 (width 3008: the plan's largest peak per trial) and of
  scale 3072, with ``train.micro_batch_size=auto``: peak memory and micro-batch against the plan's.

``--dry`` runs the same parts on the CPU at the smoke preset's shapes (PT widths 128 and 256, batch 8 x 32,
V = 1000; packs of 1 and 2) in about a minute: the compiled rows are recorded as skipped (CUDA graphs need a GPU).

    python bench/bench_cluster.py --new-record bench/results [--dry]       # prints the new record's path
    python bench/bench_cluster.py --record PATH --parts step-eager,pack [--dry] [--timeout 90]
    python bench/bench_cluster.py [--dry] [--results bench/results]        # a new record, every part
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cluster_record
from cluster_measure import head, run_group

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

FULL = {"preset": "paper", "scales": (256, 1536), "wide": (("pt", 3072), ("ut", 2048), ("ut", 3072)), "steps": 10,
        "warmup": 3, "wide_steps": 5, "packs": (1, 2, 4, 8), "device": "cuda"}
DRY = {"preset": "smoke", "scales": (128, 256), "wide": (("pt", 256), ("ut", 128)), "steps": 2, "warmup": 1,
       "wide_steps": 2, "packs": (1, 2), "device": "cpu"}
MODELS = ("pt", "bert", "ut", "modernbert")
PARTS = ("step-eager", "step-graphs", "pack", "wide")
GRAPHS = "reduce-overhead"


def plan_models(shape: dict) -> tuple[dict, dict]:
    """({(model, PT scale): the model config scaling-curves trains there}, the preset's batch / data / micro-batch
    settings), for every model at the step scales and the wide part's scales (``ptsweep.planner.planned``)."""
    from ptsweep import planner
    from ptsweep.config import compose

    scales = sorted({*shape["scales"], *(s for _, s in shape["wide"])})
    cfg = compose([f"preset={shape['preset']}", f"sweep.models=[{','.join(MODELS)}]",
                   f"sweep.scales=[{','.join(map(str, scales))}]"])
    models: dict = {}
    for t in planner.planned(cfg, ["scaling-curves"])["scaling-curves"]:
        models.setdefault((t.model.name, t.scale), t.model)
    run = {"vocab": cfg.data.vocab_size, "seq_len": cfg.data.seq_len, "batch": cfg.train.batch_size,
           "micro": cfg.train.micro_batch_size}
    return models, run


def make_spec(shape: dict, run: dict, models: dict, model: str, scale: int, compile_mode: str = "none",
          steps: int | None = None, micro=None) -> dict:
    """The measured setting (``cluster_measure``'s spec) of ``model`` at PT scale ``scale`` under ``shape``: the
    preset's batch and micro-batch unless ``micro`` is given, ``shape``'s steps unless ``steps`` is."""
    return {"model_cfg": models[(model, scale)], "scale": scale, **run, "micro": run["micro"] if micro is None
            else micro, "steps": steps or shape["steps"], "warmup": shape["warmup"], "compile": compile_mode,
            "device": shape["device"], "fraction": 1.0}


def _writer(record: Path, part: str):
    """``on_row(spec, row)`` that appends the row to the record with its part and the plan's prediction."""
    def on_row(spec: dict, row: dict) -> None:
        plan = cluster_record.plan_fields(spec, row.get("total_mem_gib")) if "error" not in row else {}
        cluster_record.append(record, {"part": part, **row, **plan})
    return on_row


def run_part(part: str, shape: dict, record: Path, timeout_s: float) -> None:
    """Measure one part (module docstring) and append its rows to ``record``."""
    models, run = plan_models(shape)
    if part in ("step-eager", "step-graphs"):
        mode = "none" if part == "step-eager" else GRAPHS
        specs = [make_spec(shape, run, models, m, s, mode) for s in shape["scales"] for m in MODELS]
        if mode == GRAPHS and shape["device"] != "cuda":
            for spec in specs:
                cluster_record.append(record, {"part": "step", **head(spec),
                                               "skipped": "CUDA graphs need a GPU (dry run on the CPU)"})
            return
        if mode == GRAPHS:  # PT's rows first: it is the launch-bound model that graphs are for
            specs.sort(key=lambda s: s["model_cfg"].name != "pt")
        run_group(specs, timeout_s, _writer(record, "step"))
    elif part == "pack":
        from cluster_pack import packed_rows

        spec = make_spec(shape, run, models, "pt", shape["scales"][0])
        packed_rows(spec, shape["packs"], timeout_s / len(shape["packs"]),
                    lambda n, packer, rows: cluster_record.append(record, cluster_record.pack_row(spec, n, packer,
                                                                                                   rows)))
    elif part == "wide":
        specs = [make_spec(shape, run, models, m, s, steps=shape["wide_steps"], micro="auto") for m, s in shape["wide"]]
        run_group(specs, timeout_s, _writer(record, "wide"))


def _device_name(shape: dict) -> str:
    import torch

    return torch.cuda.get_device_name() if shape["device"] == "cuda" and torch.cuda.is_available() else "cpu"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry", action="store_true", help="CPU, the smoke preset's tiny shapes, no compiled rows")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per part")
    ap.add_argument("--record", default="", help="append to this record file (default: a new one in --results)")
    ap.add_argument("--results", default=str(ROOT / "bench" / "results"), help="folder of new record files")
    ap.add_argument("--new-record", default="", metavar="DIR", help="create a record in DIR, print its path, exit")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    shape = DRY if a.dry else FULL
    parts = [p for p in a.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        print(f"bench_cluster: unknown part(s) {', '.join(unknown)} (choose from {', '.join(PARTS)})", file=sys.stderr)
        return 2
    if a.new_record or not a.record:
        _, run = plan_models(shape)
        meta = {"dry": a.dry, "preset": shape["preset"], "device_name": _device_name(shape),
                **{k: run[k] for k in ("batch", "seq_len", "vocab")}, "micro_batch_size": run["micro"],
                "steps": shape["steps"], "warmup": shape["warmup"]}
        path = cluster_record.new_record(a.new_record or a.results, meta)
        if a.new_record:
            print(path)
            return 0
    else:
        path = Path(a.record)
    for part in parts:
        t0 = time.time()
        print(f"== {part}", flush=True)
        run_part(part, shape, path, a.timeout)
        print(f"== {part}: {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
