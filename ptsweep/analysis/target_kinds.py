"""PT - baseline differences by kind of MLM target, as run: on the [MASK]ed targets, where only context can help, and
on the visible ones (shown as themselves or as a random token), where the token shown carries most of the answer.

The claims compare losses on all targets, which mix the two kinds at the masking scheme's proportions (about 80 / 20
under BERT's 80 % [MASK] / 10 % random / 10 % unchanged). A difference on all targets can therefore be set by how well
a model reads the visible token rather than by how much context it uses; these lines say which kind drives it. They
decide nothing: each is ``model_spread.per_scale`` of the two cells' seed losses in one column (``mask_loss``,
``visible_loss`` of the runs table), with each cell's own seed spread.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ptsweep.analysis.model_spread import cell_spreads, per_scale

KINDS = {"mask_loss": "[MASK] targets", "visible_loss": "visible targets"}
"""Runs-table column -> the targets it scores."""


def differences(runs, pt_series: Sequence[str], baselines: Sequence[str], scales: Sequence) -> dict:
    """{column: {"pt-bert": {scale: spread_ci dict}}} for each column of :data:`KINDS` that ``runs`` has."""
    out = {}
    for col in (c for c in KINDS if c in runs.columns):
        view = runs.assign(loss=runs[col].astype(float))
        spreads = cell_spreads(view)
        out[col] = {f"{pts}-{other}": per_scale(view, spreads, pts, other, scales)
                    for pts in pt_series for other in baselines}
    return out


def _cell(d: Mapping) -> str:
    """'-0.123 [-0.200, -0.046] (4 / 4 seeds)', '+0.052 (no seed spread: no interval)' or 'no runs'."""
    if not math.isfinite(d.get("diff", math.nan)):
        return "no runs"
    if not math.isfinite(d.get("lo", math.nan)):
        return f"{d['diff']:+.3f} (no seed spread: no interval)"
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] ({d['n_a']} / {d['n_b']} seeds)"


def report_lines(summary: Mapping) -> list[str]:
    """The report's paragraph on ``summary["by_target"]`` (:func:`differences`); none without it."""
    by = summary.get("by_target") or {}
    if not by:
        return []
    out = ["By kind of target (as run, PT - baseline, mean over seeds with a 95 % Welch interval; negative = PT "
           "lower; descriptive, the claims are on all targets):", ""]
    for col, pairs in by.items():
        for pair, per in pairs.items():
            out.append(f"- {KINDS[col]}, {pair}: " + "; ".join(f"N={s}: {_cell(d)}" for s, d in per.items()))
    return [*out, ""]
