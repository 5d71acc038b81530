"""Paired comparison of two parametrizations at each one's best LR, per width ("muP - SP paired").

Reads every finished run under the given folders (sweep trials' ledger records, instrumented probes' ``*.json``). At
each width and budget, each parametrization's eta* is the eta with the lowest seed-mean loss among those with the
most seeds; A - B at the two optima is paired by seed (a seed fixes the data order and init streams), with a t
interval over the shared seeds, beside the unigram and no-context baselines.

    python -m ptsweep.analysis.paired_gap ../study/runs/lr-long runs/lr-anchored --a mup_sp --b sp
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path

from ptsweep.analysis.blocked_fit import t_ppf
from ptsweep.analysis.context_transfer import paired_difference
from ptsweep.config import OptimConfig, PTConfig


SHAPE_KEYS = {"name", "width", "scaling", "parametrization", "base_width", "base_rank"}
"""Model fields that say which model and width a run is, not which variant of the default."""


def _changed(values: dict, defaults: dict, skip: set) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in values.items()
                        if k not in skip and k in defaults and str(v) != str(defaults[k])
                        and not (isinstance(defaults[k], tuple) and list(defaults[k]) == v)))


def _variant(model: dict, optim: dict | None = None) -> tuple:
    """The model fields and optimizer settings (other than eta) a run changed from the PTConfig and OptimConfig
    defaults (levers, controls); () for the default model trained the default way."""
    return (_changed(model, dataclasses.asdict(PTConfig()), SHAPE_KEYS)
            + _changed(optim or {}, dataclasses.asdict(OptimConfig()), {"lr"}))


def _probe_row(d: dict) -> dict | None:
    cfg, final = d.get("config"), d.get("final")
    if not isinstance(cfg, dict) or not isinstance(final, dict) or "val_loss" not in final:
        return None
    levers = tuple((k, str(d[k])) for k in ("feature_cap", "independent_wd") if d.get(k))
    variant = _variant(cfg["model"], cfg.get("optim")) + levers
    return {"par": cfg["model"]["parametrization"], "width": cfg["model"]["width"], "lr": cfg["optim"]["lr"],
            "tokens": cfg["train"]["tokens"], "seed": cfg["seed"], "variant": variant, **final}


def _trial_row(d: dict) -> dict | None:
    ov = d.get("overrides", {})
    if d.get("status") != "ok" or "model.parametrization" not in ov:
        return None
    model = {k.split(".", 1)[1]: v for k, v in ov.items() if k.startswith("model.")}
    optim = {k.split(".", 1)[1]: v for k, v in ov.items() if k.startswith("optim.")}
    return {"par": ov["model.parametrization"], "width": ov["model.width"], "lr": ov["optim.lr"],
            "tokens": ov["train.tokens"], "seed": ov["seed"], "variant": _variant(model, optim), **d}


def _finished(folder: Path):
    """(record, is a sweep trial) of every finished run under ``folder``: each trial's ledger record
    (``ledger.read_ledger``) and each instrumented probe's JSON (it holds a ``trace``)."""
    from ptsweep.trials.ledger import read_ledger

    for path in sorted(folder.rglob("*.json")):
        if path.parent.parent.name == "trials":  # a sweep trial's folder: its ledger record only
            rec = read_ledger(path.parent.parent.parent, path.parent.name) if path.name == "final.json" else None
            if rec is not None:
                yield rec, True
            continue
        try:
            d = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(d, dict) and "trace" in d:
            yield d, False


def load_runs(folders: list[Path], variants: bool = False) -> list[dict]:
    """One row per finished run of the default model (status ok, no lever or control; every variant with
    ``variants``) found under ``folders``; a (par, width, lr, tokens, seed, variant) seen twice keeps the first."""
    rows, seen = [], set()
    for folder in folders:
        for d, is_trial in _finished(folder):
            row = _trial_row(d) if is_trial else _probe_row(d)
            if row is None or (row["variant"] and not variants) or not math.isfinite(row["val_loss"]):
                continue
            ident = (row["par"], int(row["width"]), float(row["lr"]), float(row["tokens"]), int(row["seed"]),
                     row["variant"])
            if ident not in seen:
                seen.add(ident)
                rows.append(row)
    return rows


def optimum(rows: list[dict]) -> tuple[float, dict[int, dict]]:
    """(eta*, {seed: row}) of one (parametrization, width, budget): the lowest seed-mean loss among the etas with
    the most seeds."""
    by_lr: dict[float, dict[int, dict]] = defaultdict(dict)
    for r in rows:
        by_lr[float(r["lr"])][int(r["seed"])] = r
    most = max(len(s) for s in by_lr.values())
    best = min((lr for lr, s in by_lr.items() if len(s) == most),
               key=lambda lr: sum(r["val_loss"] for r in by_lr[lr].values()) / most)
    return best, by_lr[best]


def paired(a: dict[int, dict], b: dict[int, dict], key: str) -> tuple[float, float, float, int]:
    """Mean of a - b over the shared seeds, its SE (``context_transfer.paired_difference``) and the 95 % t
    half-width (nan with one seed)."""
    p = paired_difference({s: r[key] for s, r in a.items()}, {s: r[key] for s, r in b.items()})
    return p["diff"], p["se"], t_ppf(0.975, p["n"] - 1) * p["se"] if p["n"] > 1 else math.nan, p["n"]


def interval_text(diff: float, se: float, half: float, label: str) -> str:
    """A paired difference as 'mean ± SE [mean - half, mean + half] (label)' (half: the interval's half width)."""
    return f"{diff:+.4f} ± {se:.4f} [{diff - half:+.3f}, {diff + half:+.3f}] ({label})"


def paired_text(a: dict[int, dict], b: dict[int, dict], key: str = "val_loss", percent: bool = True) -> str:
    """a - b of ``key`` paired by seed as 'mean ± SE [95 % t] (n)', with ``percent`` followed by its percent of b's
    mean over the shared seeds (', +x.x %'); '-' without two shared seeds."""
    diff, se, h, n = paired(a, b, key)
    if n < 2:
        return "-"
    text = interval_text(diff, se, h, str(n))
    if not percent:
        return text
    shared = set(a) & set(b)
    ref = sum(b[s][key] for s in shared) / len(shared)
    return f"{text}, {100 * diff / ref:+.1f} %"


def _mean(rows: dict[int, dict], key: str) -> float:
    return sum(r[key] for r in rows.values()) / len(rows)


def table(rows: list[dict], par_a: str, par_b: str) -> list[str]:
    """Markdown lines: per (budget, width) each side's eta*, seeds, loss and context gain, and A - B paired."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(float(r["tokens"]), int(r["width"]), r["par"])].append(r)
    out = [f"| steps | width | {par_a} eta* (seeds) | loss | ctx gain | {par_b} eta* (seeds) | loss | ctx gain "
           f"| unigram / no-context | {par_a} - {par_b} loss (paired SE, n) | ctx gain diff |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for tokens, width in sorted({(t, w) for t, w, _ in groups}):
        if (tokens, width, par_a) not in groups or (tokens, width, par_b) not in groups:
            continue
        (lr_a, a), (lr_b, b) = optimum(groups[(tokens, width, par_a)]), optimum(groups[(tokens, width, par_b)])
        d, se, _, n = paired(a, b, "val_loss")
        dg, seg, _, _ = paired(a, b, "context_gain")
        steps = int(tokens // (16 * 64))
        out.append(f"| {steps} | {width} | {lr_a:g} ({len(a)}) | {_mean(a, 'val_loss'):.3f} | "
                   f"{_mean(a, 'context_gain'):+.3f} | {lr_b:g} ({len(b)}) | {_mean(b, 'val_loss'):.3f} | "
                   f"{_mean(b, 'context_gain'):+.3f} | {_mean(b, 'unigram_loss'):.3f} / "
                   f"{_mean(b, 'no_context_loss'):.3f} | {d:+.3f} ± {se:.3f} ({n}) | {dg:+.3f} ± {seg:.3f} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--a", default="mup_sp", help="parametrization A (default mup_sp)")
    ap.add_argument("--b", default="sp", help="parametrization B (default sp)")
    args = ap.parse_args(argv)
    print("\n".join(table(load_runs(args.folders), args.a, args.b)))


if __name__ == "__main__":
    main()
