"""Names of the evaluation metrics every run reports (``ptsweep.metrics`` computes them; no torch import here, so
sweep drivers and tables can use the names without loading torch)."""

import math

CONTEXT_KEYS = ("context_gain", "context_gain_se", "mask_loss", "mask_loss_se", "mask_unigram_loss",
                "mask_unigram_loss_se", "mask_tokens", "no_context_loss", "no_context_loss_se", "gain_over_no_context",
                "gain_over_no_context_se")
"""The context metrics of every evaluation (``ptsweep.metrics`` docstring); test evaluations carry them with a
``test_`` prefix."""

EVAL_KEYS = ("val_loss_se", "unigram_loss", "unigram_loss_se", "gain_over_unigram", "gain_over_unigram_se",
             *CONTEXT_KEYS)
"""Every number of one evaluation besides ``val_loss`` itself (tables, ledgers and reports read these)."""

LEDGER_KEYS = (*EVAL_KEYS, "val_tokens", "val_blocks", "test_loss", "test_loss_se",
               *(f"test_{k}" for k in EVAL_KEYS), "test_tokens")
"""The final metrics of a run that result tables copy from its ledger record (validation and held-out test)."""


def learned_context(m: dict, prefix: str = "") -> bool:
    """True when ``context_gain`` > 2 SE (the [MASK]-target gain over unigram is resolved above 0)."""
    g, se = m.get(prefix + "context_gain"), m.get(prefix + "context_gain_se")
    if g is None or se is None or not (math.isfinite(g) and math.isfinite(se)):
        return False
    return g > 2.0 * se


def seed_mean(values, ses) -> tuple[float, float]:
    """Mean over seeds of a metric and its SE: sqrt(se_tok^2 + sd^2 / n), se_tok the RMS of the runs' token SEs
    (the seeds share the evaluation tokens, so that part does not shrink with n). NaN/inf runs are dropped."""
    pairs = [(float(v), float(s)) for v, s in zip(values, ses)
             if v is not None and s is not None and math.isfinite(float(v))]
    if not pairs:
        return math.nan, math.nan
    vals = [v for v, _ in pairs]
    n, mean = len(vals), sum(vals) / len(vals)
    tok = [s for _, s in pairs if math.isfinite(s)]
    se_tok = math.sqrt(sum(s * s for s in tok) / len(tok)) if tok else math.nan
    var = sum((v - mean) ** 2 for v in vals) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt((se_tok if math.isfinite(se_tok) else 0.0) ** 2 + var / n)


def context_line(m: dict, prefix: str = "") -> str:
    """'context gain +0.123 ± 0.012 (learned)' or '... (NOT learned: no evidence about transfer)'."""
    g, se = m.get(prefix + "context_gain", math.nan), m.get(prefix + "context_gain_se", math.nan)
    mark = "learned" if learned_context(m, prefix) else "NOT learned: no evidence about transfer"
    return f"context gain {g:+.3f} ± {se:.3f} ({mark})"


def visible_targets(m: dict, split: str) -> tuple[float, float]:
    """(model loss, no-context loss) of ``split`` ("val" | "test") on its visible targets - those shown as themselves
    or as a random token, every target but the [MASK]ed ones - from the all-target and [MASK]-target means and their
    token counts (NaN without them). On [MASK] targets the no-context predictor is the unigram one, so

        visible = (mean_all * n_all - mean_mask * n_mask) / (n_all - n_mask)."""
    pre = "test_" if split == "test" else ""
    n, k = m.get(f"{split}_tokens", math.nan), m.get(f"{pre}mask_tokens", math.nan)
    if not (isinstance(n, (int, float)) and isinstance(k, (int, float)) and n > k >= 0):
        return math.nan, math.nan

    def rest(total_key: str, mask_key: str) -> float:
        return (float(m.get(total_key, math.nan)) * n - float(m.get(mask_key, math.nan)) * k) / (n - k)

    return rest(f"{split}_loss", f"{pre}mask_loss"), rest(f"{pre}no_context_loss", f"{pre}mask_unigram_loss")
