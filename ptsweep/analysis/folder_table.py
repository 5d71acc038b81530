"""Study folders side by side, one variant per folder: per folder and eta the seeds' losses, their mean and context
gain, the seed-paired difference against the first folder at the same eta and against the folder's own run at
``--ref-lr``, each with its 95 % t interval and its percent of the reference's mean.

A study's global Hydra overrides are not in its trials' overrides, so the folder names the variant: each folder must
hold one variant of its trials' overrides, or ``--variant`` picks one in every folder (``w_unary=2``; ``default``
for the runs that changed nothing). Folders joined with '+' are one study (a rule run through a different option at
each eta); ``folder@eta`` takes that eta of a folder only; an (eta, seed) in two of them is an error.

    python -m ptsweep.analysis.folder_table runs/zdec-w1-py runs/zlev-zl-py --variant default
    python -m ptsweep.analysis.folder_table runs/zdec-w1-py runs/zdec-lr2-py@0.02+runs/zdec-w1-py@0.04
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ptsweep.analysis.paired_gap import load_runs, paired_text
from ptsweep.analysis.weight_grid import STEPS_TOKENS


def parse_variant(text: str | None) -> dict[str, float | str] | None:
    """``--variant``'s text as {field: value}: 'w_unary=2,w_child=2' -> {'w_unary': 2.0, 'w_child': 2.0},
    'default' -> {} (the runs that changed nothing), None -> None (no filter)."""
    if text is None:
        return None
    if text == "default":
        return {}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--variant {text!r}: expected field=value[,field=value] or 'default'")
        out[key] = _value(value)
    return out


def _value(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _matches(variant: tuple, want: dict | None) -> bool:
    """Whether a run's variant (``load_runs``: sorted (field, str(value)) pairs) is ``want``; None matches all."""
    return want is None or {k: _value(v) for k, v in variant} == want


def cells(folder: Path, width: int, want: dict | None = None) -> dict[float, dict[int, dict]]:
    """{eta: {seed: run}} of one folder's finished runs at ``width`` and the study's budget (of variant ``want``
    only, when given)."""
    out: dict[float, dict[int, dict]] = {}
    variants = set()
    for r in load_runs([folder], variants=True):
        if int(r["width"]) == width and float(r["tokens"]) == STEPS_TOKENS and _matches(r["variant"], want):
            out.setdefault(float(r["lr"]), {})[int(r["seed"])] = r
            variants.add(r["variant"])
    if len(variants) > 1:
        raise ValueError(f"{folder} holds {len(variants)} variants at width {width} ({sorted(variants)}); "
                         "pick one with --variant or give each its own study folder")
    return out


Study = Path | tuple[tuple[Path, float | None], ...]
"""One folder, or several joined with '+', each with the one eta it contributes or None for all
(:func:`parse_study`)."""


def parse_study(text: str) -> tuple[tuple[Path, float | None], ...]:
    """'runs/a@0.02+runs/b' -> ((Path('runs/a'), 0.02), (Path('runs/b'), None))."""
    parts = []
    for part in text.split("+"):
        folder, sep, eta = part.rpartition("@")
        parts.append((Path(folder), float(eta)) if sep else (Path(part), None))
    return tuple(parts)


def _parts(study: Study) -> tuple[tuple[Path, float | None], ...]:
    return study if isinstance(study, tuple) else ((study, None),)


def study_name(study: Study) -> str:
    return "+".join(part.name + ("" if eta is None else f"@{eta:g}") for part, eta in _parts(study))


def study_cells(study: Study, width: int, want: dict | None = None) -> dict[float, dict[int, dict]]:
    """:func:`cells` of each of the study's folders (of its one eta where it names one), merged; an (eta, seed) in
    two of them is a ValueError."""
    out: dict[float, dict[int, dict]] = {}
    for part, only in _parts(study):
        for lr, runs in cells(part, width, want).items():
            if only is not None and lr != only:
                continue
            both = out.setdefault(lr, {}).keys() & runs.keys()
            if both:
                raise ValueError(f"{study_name(study)}: eta {lr:g} seed {min(both)} is in two of its folders")
            out[lr].update(runs)
    return out


def table(folders: list[Study], width: int, ref_lr: float, want: dict | None = None) -> list[str]:
    """Markdown lines: one row per (study, eta), of variant ``want`` only when given."""
    by_folder = {f: study_cells(f, width, want) for f in folders}
    first = folders[0]
    out = [f"| study (width {width}) | eta | val_loss by seed | mean (seeds) | context gain | - {study_name(first)} "
           f"at the same eta | - its own eta {ref_lr:g} |", "|---|---:|---|---|---|---|---|"]
    for f, by_lr in by_folder.items():
        for lr, runs in sorted(by_lr.items()):
            losses = " / ".join(f"{runs[s]['val_loss']:.4f}" for s in sorted(runs))
            mean = sum(r["val_loss"] for r in runs.values()) / len(runs)
            gains = " / ".join(f"{runs[s].get('context_gain', float('nan')):+.2f}" for s in sorted(runs))
            vs_first = paired_text(runs, by_folder[first].get(lr, {})) if f != first else "-"
            vs_ref = paired_text(runs, by_lr.get(ref_lr, {})) if lr != ref_lr else "-"
            out.append(f"| {study_name(f)} | {lr:g} | {losses} | {mean:.4f} ({len(runs)}) | {gains} | {vs_first} | "
                       f"{vs_ref} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=parse_study,
                    help="study folders (several joined with '+' are one study); the first is the reference")
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--ref-lr", type=float, default=0.02, help="the eta each folder's other etas are paired with")
    ap.add_argument("--variant", help="only the runs of this variant in every folder: field=value[,...] "
                    "(e.g. w_unary=2) or 'default'")
    args = ap.parse_args(argv)
    missing = [str(part) for f in args.folders for part, _ in f if not part.is_dir()]
    if missing:
        sys.exit(f"folder_table: no such study folder: {', '.join(missing)}")
    try:
        print("\n".join(table(args.folders, args.width, args.ref_lr, parse_variant(args.variant))))
    except ValueError as e:
        sys.exit(f"folder_table: {e}")


if __name__ == "__main__":
    main()
