"""Validation metrics with their noise, next to the trivial baseline every loss must be read against.

- **Masked-token cross-entropy** (spec §5) averaged over all scored tokens of the fixed-mask validation set, with its
  standard error. Tokens of one block are correlated (same text, same context), so the error is the cluster-robust
  one of a ratio estimator over blocks b with loss sum S_b and n_b scored tokens (N = sum n_b, m = S / N):

      SE(m)^2 = B / (B - 1) * sum_b (S_b - m n_b)^2 / N^2

  (it reduces to s / sqrt(N) when every block holds one token).
- **Unigram baseline**: the cross-entropy of the training-set token frequencies (add-one smoothed over the
  non-special vocabulary) on the same masked tokens. A model that does not beat it has learned no context.
- **Gain over unigram**: the paired per-token difference model - unigram with its clustered SE (paired, so it is far
  more precise than the two losses' errors suggest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

UNIGRAM_FILE = "unigram_counts.npy"


@dataclass(frozen=True)
class MeanSE:
    """A mean over scored tokens with its block-clustered standard error."""

    mean: float
    se: float
    n_tokens: int
    n_blocks: int


def clustered_mean_se(values: torch.Tensor, block: torch.Tensor) -> MeanSE:
    """Mean of ``values`` (n,) and its cluster-robust SE, clusters given by integer ids ``block`` (n,) (module
    docstring). Non-finite values give an infinite mean and SE."""
    values = values.detach().double().cpu()
    block = block.detach().cpu().long()
    n = int(values.numel())
    if n == 0:
        return MeanSE(math.nan, math.nan, 0, 0)
    if not bool(torch.isfinite(values).all()):
        return MeanSE(math.inf, math.inf, n, int(block.unique().numel()))
    ids, inv = torch.unique(block, return_inverse=True)
    sums = torch.zeros(len(ids), dtype=torch.float64).index_add_(0, inv, values)      # S_b
    counts = torch.zeros(len(ids), dtype=torch.float64).index_add_(0, inv, torch.ones_like(values))  # n_b
    mean = float(sums.sum() / n)
    n_b = len(ids)
    if n_b < 2:
        return MeanSE(mean, math.nan, n, n_b)
    var = n_b / (n_b - 1) * float(((sums - mean * counts) ** 2).sum()) / n**2
    return MeanSE(mean, math.sqrt(var), n, n_b)


def unigram_counts(corpus) -> np.ndarray:
    """Token counts (V,) of the training split, cached next to the packed tokens (one pass over the memmap)."""
    path = Path(corpus.cache_path) / UNIGRAM_FILE if corpus.cache_path else None
    if path is not None and path.is_file():
        return np.load(path)
    counts = np.zeros(corpus.vocab_size, dtype=np.int64)
    flat = corpus.train.reshape(-1)
    step = 1 << 24
    for i in range(0, flat.shape[0], step):  # chunks keep memory flat on paper-size corpora
        counts += np.bincount(np.asarray(flat[i:i + step]), minlength=corpus.vocab_size)
    if path is not None:
        tmp = path.with_name(f".{path.name}.tmp.npy")
        np.save(tmp, counts)
        tmp.replace(path)
    return counts


def unigram_log_probs(corpus) -> torch.Tensor:
    """log p(w) (V,) of the add-one smoothed training frequencies over the non-special tokens (special: -inf; they
    are never MLM targets)."""
    memo = corpus._memo
    if "unigram_logp" not in memo:
        counts = unigram_counts(corpus).astype(np.float64)
        regular = np.zeros(corpus.vocab_size, dtype=bool)
        regular[corpus.regular_ids] = True
        smoothed = np.where(regular, counts + 1.0, 0.0)
        with np.errstate(divide="ignore"):
            memo["unigram_logp"] = torch.from_numpy(np.log(smoothed / smoothed.sum()))
    return memo["unigram_logp"]


def token_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy (n,) of ``logits`` (n, V) in fp32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


def summarize(model_losses: torch.Tensor, unigram_losses: torch.Tensor, block: torch.Tensor) -> dict[str, float]:
    """The metrics dict of one evaluation: val_loss (+ _se), unigram_loss (+ _se), gain_over_unigram = unigram -
    model (+ _se, paired), val_tokens, val_blocks."""
    model = clustered_mean_se(model_losses, block)
    unigram = clustered_mean_se(unigram_losses, block)
    gain = clustered_mean_se(unigram_losses.double() - model_losses.double(), block)
    return {"val_loss": model.mean, "val_loss_se": model.se, "unigram_loss": unigram.mean,
            "unigram_loss_se": unigram.se, "gain_over_unigram": gain.mean, "gain_over_unigram_se": gain.se,
            "val_tokens": model.n_tokens, "val_blocks": model.n_blocks}


def format_loss(m: dict, key: str = "val_loss") -> str:
    """'6.123 +- 0.012 (unigram 6.270, gain 0.147 +- 0.004)' for reports and CLI summaries."""
    def f(x):
        return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
    out = f"{f(m.get(key))} +- {f(m.get(key + '_se'))}"
    if "unigram_loss" in m:
        out += (f" (unigram {f(m.get('unigram_loss'))}, gain {f(m.get('gain_over_unigram'))}"
                f" +- {f(m.get('gain_over_unigram_se'))})")
    return out
