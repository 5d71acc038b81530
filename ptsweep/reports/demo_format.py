"""Number and table formatting of the demo report (``demo_report``): values with their noise, a loss next to both
context-free baselines, GitHub-markdown tables."""

from __future__ import annotations

import math

import pandas as pd

from ptsweep import metric_keys


def _float(v) -> float:
    """``v`` as a float; NaN for a non-number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def num(v, nd: int = 3, sign: bool = False) -> str:
    """A number with nd decimals (signed if asked); "n/a" for NaN or a non-number, "inf" / "-inf"."""
    v = _float(v)
    if not math.isfinite(v):
        return "n/a" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:+.{nd}f}" if sign else f"{v:.{nd}f}"


def gain_text(g, se) -> str:
    """'+0.123 +- 0.012 (learned)' or '+0.010 +- 0.012 (NOT learned)': context gain with its SE and the 2-SE mark."""
    if not math.isfinite(_float(g)):
        return "n/a"
    mark = "learned" if metric_keys.learned_context({"context_gain": g, "context_gain_se": se}) else "NOT learned"
    return f"{num(g, sign=True)} +- {num(se)} ({mark})"


def loss_line(loss, unigram, no_context) -> str:
    """'6.105 (unigram 6.297: -0.192; no-context 5.727: +0.378)': a loss next to both baselines."""
    return (f"{num(loss)} (unigram {num(unigram)}: {num(float(loss) - float(unigram), sign=True)}; "
            f"no-context {num(no_context)}: {num(float(loss) - float(no_context), sign=True)})")


def _table_cell(v) -> str:
    """A markdown table cell."""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return "inf"
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame, cols: list[str] | None = None, max_rows: int = 80) -> str:
    """A GitHub-markdown table of ``df`` (no tabulate dependency)."""
    cols = [c for c in (cols or list(df.columns)) if c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.head(max_rows).iterrows():
        lines.append("| " + " | ".join(_table_cell(row[c]) for c in cols) + " |")
    if len(df) > max_rows:
        lines.append(f"\n({len(df) - max_rows} more rows in the CSV)")
    return "\n".join(lines)


def vs_unigram(loss, unigram) -> str:
    """'-0.123 (below)' or '+0.050 ABOVE unigram: nothing learned' (every loss is read against the baseline)."""
    d = _float(loss) - _float(unigram)
    if not math.isfinite(d):
        return ""
    return f"{d:+.3f} (below)" if d < 0 else f"{d:+.3f} ABOVE unigram: nothing learned"


def ci_text(v) -> str:
    """"[lo, hi]" of a finite interval, else ""."""
    return f"[{v[0]:.3g}, {v[1]:.3g}]" if v and all(isinstance(x, (int, float)) and math.isfinite(x) for x in v) else ""


def table_rows(df, cols: dict[str, str]) -> str:
    """markdown_table of ``df`` with renamed columns ({source column: header}; those present, in this order)."""
    return markdown_table(df[[c for c in cols if c in df.columns]].rename(columns=cols))
