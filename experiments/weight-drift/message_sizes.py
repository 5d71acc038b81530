"""How PT's MFVI messages change with width during training: PT and PT without the topic message into Z
(``model=pt_no_topic``) at widths 32 and 128, trained with the probe ``message_stats`` (``train.probes``; README.md
here).

Each run is ``python -m ptsweep train`` (configs composed and validated by the CLI) on the lr-transfer study's
long-budget setting: ``preset=lr_study``, rank paradigm anchored at width 32 (C = 4, r = N/4; the default 'mup_sp'
with Z damping 0.5 and 25 % warm-up), eta 0.02, 1200 steps of 16 x 64, an evaluation every 200 steps, seed 0, one
thread. Resumable: a run whose folder holds ``final.json`` is read, not rerun; an interrupted one continues from
its checkpoint (``train.resume=true``). ``--table-only`` reads whatever the run folders hold (partial runs too).

    nice -n 5 .venv/bin/python experiments/weight-drift/message_sizes.py --widths 32
    nice -n 5 .venv/bin/python experiments/weight-drift/message_sizes.py --table-only

Writes ``<out>/message_sizes.csv`` (every evaluation: last iteration ``msg/*`` and mean over iterations
``msg_mean/*``) and ``<out>/message_sizes.md`` (the tables of the README; the last one measures each finished
run's final checkpoint again, with every statistic ``message_stats`` has now).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from ptsweep import data as data_mod
from ptsweep.config import compose
from ptsweep.models import build_model
from ptsweep.train import CHECKPOINT, default_run_dir, message_stats

STUDY = ["preset=lr_study", "tracker=disabled", "train.tokens=1228800", "train.eval_every=200", "optim.lr=0.02",
         "optim.warmup_frac=0.25", "model.scaling=rank", "model.base_width=32", "model.base_channels=4",
         "model.base_rank=8", "seed=0", "train.threads=1", "train.probes=[update_sizes,message_stats]"]
"""The lr-transfer study's long-budget default at eta* (conf/experiment/lr_damped.yaml), with the message statistics on."""
MODELS = ("pt", "pt_no_topic")
SHOWN = ("child_ratio", "head_ratio", "topic_ratio", "attn_logit_rms", "topic_logit_rms", "z_logit_rms",
         "q_h_entropy", "q_g_entropy_frac", "q_z_entropy_frac")
"""The statistics in the markdown tables (last MFVI iteration); the CSV has every one."""
FINAL = ("unary_rms", *SHOWN[:3], "msg_coherence", *SHOWN[3:6], "z_logit_std", *SHOWN[6:])
"""The statistics of the final-checkpoint table (with those added to ``message_stats`` after the runs)."""


def overrides(model: str, width: int, out: Path) -> list[str]:
    return [*STUDY, f"model={model}", f"model.width={width}", f"out_dir={out}", f"run_name={model}-w{width}"]


def train(ov: list[str]) -> Path:
    """The run folder of ``ov``, after training it (or continuing it) unless it already finished."""
    run_dir = default_run_dir(compose(ov))
    if (run_dir / "final.json").exists() and json.loads((run_dir / "final.json").read_text()).get("status") == "ok":
        print(f"finished: {run_dir}", flush=True)
        return run_dir
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    print("running: python -m ptsweep train " + " ".join(ov), flush=True)
    subprocess.run([sys.executable, "-m", "ptsweep", "train", *ov, "train.resume=true"], check=True, env=env)
    return run_dir


def read_run(run_dir: Path, model: str, width: int) -> tuple[pd.DataFrame, dict]:
    """(one row per evaluation holding message statistics, the final metrics or {} while the run goes on)."""
    path = run_dir / "history.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    evals = [{"model": model, "width": width, **r} for r in rows if "msg/child_ratio" in r]
    final = json.loads((run_dir / "final.json").read_text()) if (run_dir / "final.json").exists() else {}
    return pd.DataFrame(evals), final


def fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def steps_table(df: pd.DataFrame) -> list[str]:
    """Per model, width and evaluation step: the validation loss and the :data:`SHOWN` statistics."""
    head = ["model", "width", "step", "val_loss", *SHOWN]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in df.sort_values(["model", "width", "step"]).iterrows():
        cells = [r["model"], str(r["width"]), str(r["step"]), f"{r['val_loss']:.3f}"]
        lines.append("| " + " | ".join(cells + [fmt(r[f"msg/{k}"]) for k in SHOWN]) + " |")
    return lines


def growth_table(df: pd.DataFrame, model: str = "pt") -> list[str]:
    """Width 128 over width 32 of each :data:`SHOWN` statistic at the same step (a ratio > 1: grows with width)."""
    pt = df[df["model"] == model].set_index(["width", "step"])
    steps = sorted(set(pt.loc[32].index) & set(pt.loc[128].index)) if {32, 128} <= set(df["width"]) else []
    head = ["step", *SHOWN]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in steps:
        a, b = pt.loc[(32, s)], pt.loc[(128, s)]
        lines.append("| " + " | ".join([str(s)] + [fmt(b[f"msg/{k}"] / a[f"msg/{k}"]) if a[f"msg/{k}"] else "-"
                                                    for k in SHOWN]) + " |")
    return lines


def finals_table(finals: dict) -> list[str]:
    """Final validation loss and [MASK]-target context gain of each run, and PT minus pt_no_topic per width."""
    lines = ["| model | width | val_loss | context_gain ± SE | status |", "|---|---|---|---|---|"]
    for (model, width), m in sorted(finals.items()):
        lines.append(f"| {model} | {width} | {m.get('val_loss', math.nan):.4f} | "
                     f"{m.get('context_gain', math.nan):+.3f} ± {m.get('context_gain_se', math.nan):.3f} | "
                     f"{m.get('status', 'running')} |")
    for width in sorted({w for _, w in finals}):
        a, b = finals.get(("pt", width), {}), finals.get(("pt_no_topic", width), {})
        if "val_loss" in a and "val_loss" in b:
            lines.append(f"| pt - pt_no_topic | {width} | {a['val_loss'] - b['val_loss']:+.4f} | "
                         f"{a['context_gain'] - b['context_gain']:+.3f} | |")
    return lines


def final_stats(ov: list[str], run_dir: Path) -> dict:
    """``message_stats.measure`` of a finished run's final checkpoint on the first validation batch: every
    statistic the module has now, also those added after the run (its history rows lack them)."""
    cfg = compose(ov)
    corpus = data_mod.prepare(cfg.data)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    model.load_state_dict(torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=False)["model"])
    batch = data_mod.val_batches(corpus, cfg.data, cfg.train.batch_size)[0]
    return message_stats.measure(model, batch, torch.device("cpu"))


def final_table(stats: dict) -> list[str]:
    """One row per finished run: the :data:`FINAL` statistics of its last MFVI iteration."""
    lines = ["| model | width | " + " | ".join(FINAL) + " |", "|" + "---|" * (len(FINAL) + 2)]
    for (model, width), st in sorted(stats.items()):
        lines.append(f"| {model} | {width} | " + " | ".join(fmt(st[f"msg/{k}"]) for k in FINAL) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--out", type=Path, default=Path("runs/weight-drift"))
    ap.add_argument("--table-only", action="store_true", help="read the run folders; train nothing")
    args = ap.parse_args()
    frames, finals, ends = [], {}, {}
    for width in args.widths:
        for model in args.models:
            ov = overrides(model, width, args.out)
            run_dir = default_run_dir(compose(ov)) if args.table_only else train(ov)
            df, final = read_run(run_dir, model, width)
            frames.append(df)
            finals[(model, width)] = final
            if final.get("status") == "ok":
                ends[(model, width)] = final_stats(ov, run_dir)
    df = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else pd.DataFrame()
    if df.empty:
        raise SystemExit(f"no message statistics under {args.out} yet")
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "message_sizes.csv", index=False)
    md = ["## Messages by evaluation step (last MFVI iteration)", "", *steps_table(df), "",
          "## PT, width 128 over width 32 at the same step", "", *growth_table(df), "",
          "## Final validation loss and context gain", "", *finals_table(finals), "",
          "## Every statistic at the end of training (final checkpoints, last MFVI iteration)", "",
          *final_table(ends), ""]
    (args.out / "message_sizes.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
