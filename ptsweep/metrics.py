"""Validation metrics with their noise, next to the trivial baselines every loss must be read against.

- **Masked-token cross-entropy** (spec §5) over the fixed-mask validation set, with the cluster-robust SE of a
  ratio estimator over blocks b with loss sum S_b and n_b scored tokens (N = sum n_b, m = S / N):

      SE(m)^2 = B / (B - 1) * sum_b (S_b - m n_b)^2 / N^2

- **Unigram baseline**: the cross-entropy of the add-one smoothed training-set token frequencies on the same
  tokens; ``gain_over_unigram`` = unigram - model, paired.
- **No-context baseline** (:class:`NoContextBaseline`): the Bayes predictor that sees only the target's own input
  token (shown as [MASK] with p_m, a random regular token with p_r, itself with p_u; R regular tokens, prior p):

      P(t | [MASK]) = p(t),     P(t | x) = p(t) (p_u 1[t = x] + p_r / R) / (p_u p(x) + p_r / R)   (x visible)

  ``gain_over_no_context`` = no-context - model on all targets.
- **Context gain**: on the targets whose input is [MASK], ``context_gain`` = unigram - model (paired), with
  ``mask_loss`` and ``mask_unigram_loss``; context is **learned** when it is > 2 SE (:func:`learned_context`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ptsweep.io import replace_atomically
from ptsweep.metric_keys import CONTEXT_KEYS, learned_context

UNIGRAM_FILE = "unigram_counts.npy"


@dataclass(frozen=True)
class MeanSE:
    """A mean over scored tokens with its block-clustered standard error."""

    mean: float
    se: float
    n_tokens: int
    n_blocks: int


def clustered_mean_se(values: torch.Tensor, block: torch.Tensor) -> MeanSE:
    """Mean of ``values`` (n,) and its cluster-robust SE over the clusters ``block`` (n,) (module docstring)."""
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
    if path is not None:  # concurrent trials may count at the same time: each writes its own temporary file
        def save(tmp: Path) -> None:
            with tmp.open("wb") as f:  # a file object: given a name, np.save would add ".npy" to it
                np.save(f, counts)

        replace_atomically(path, save)
    return counts


def unigram_log_probs(corpus) -> torch.Tensor:
    """log p(w) (V,) of the add-one smoothed training frequencies over the non-special tokens (special: -inf)."""
    memo = corpus._memo
    if "unigram_logp" not in memo:
        counts = unigram_counts(corpus).astype(np.float64)
        regular = np.zeros(corpus.vocab_size, dtype=bool)
        regular[corpus.regular_ids] = True
        smoothed = np.where(regular, counts + 1.0, 0.0)
        with np.errstate(divide="ignore"):
            memo["unigram_logp"] = torch.from_numpy(np.log(smoothed / smoothed.sum()))
    return memo["unigram_logp"]


@dataclass(frozen=True)
class NoContextBaseline:
    """The context-free reference predictors of one corpus and corruption scheme (module docstring): ``unigram_logp``
    (V,), the [MASK] id, R and the corruption probabilities of a selected target."""

    unigram_logp: torch.Tensor
    mask_id: int
    n_regular: int
    p_random: float
    p_unchanged: float

    @staticmethod
    def of(corpus, data_cfg) -> NoContextBaseline:
        """The baseline of ``corpus`` under the masking of ``data_cfg``."""
        p_random = float(data_cfg.random_replace_prob)
        return NoContextBaseline(unigram_log_probs(corpus), int(corpus.mask_id), int(len(corpus.regular_ids)),
                                 p_random, max(0.0, 1.0 - float(data_cfg.mask_replace_prob) - p_random))

    def unigram_losses(self, targets: torch.Tensor) -> torch.Tensor:
        """-log p(t) (n,) for targets (n,)."""
        return -self.unigram_logp.to(targets.device)[targets]

    def no_context_losses(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """-log P(t | x) (n,) of the visible-token predictor for targets (n,) shown as inputs (n,) (float64)."""
        logp = self.unigram_logp.to(targets.device).double()
        lp_t = logp[targets]
        visible = inputs != self.mask_id
        x = torch.where(visible, inputs, targets)  # any regular id where masked (unused there)
        base = self.p_random / self.n_regular
        same = (targets == x).double()
        with torch.no_grad():
            num = torch.log(self.p_unchanged * same + base)                    # log(p_u 1[t=x] + p_r/R)
            den = torch.log(self.p_unchanged * logp[x].exp() + base)           # log(p_u p(x) + p_r/R)
        return torch.where(visible, -(lp_t + num - den), -lp_t)


def token_losses(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy (n,) of ``logits`` (n, V) in fp32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


def _paired(out: dict, keys: tuple, model: torch.Tensor, ref: torch.Tensor, block: torch.Tensor) -> MeanSE:
    """Mean and ``_se`` of model, ref, ref - model (paired) into ``out`` under ``keys`` (None: skip); the model's."""
    stats = [clustered_mean_se(x, block) for x in (model, ref, ref.double() - model.double())]
    for key, s in zip(keys, stats):
        out.update({key: s.mean, f"{key}_se": s.se} if key else {})
    return stats[0]


def summarize(model_losses: torch.Tensor, unigram_losses: torch.Tensor, block: torch.Tensor,
              is_mask: torch.Tensor | None = None, no_context_losses: torch.Tensor | None = None) -> dict[str, float]:
    """The metrics of one evaluation: val_loss, unigram_loss, gain_over_unigram (each + _se), val_tokens,
    val_blocks, and ``CONTEXT_KEYS`` (from ``is_mask`` and ``no_context_losses``; NaN where absent)."""
    out: dict = {}
    model = _paired(out, ("val_loss", "unigram_loss", "gain_over_unigram"), model_losses, unigram_losses, block)
    out.update(val_tokens=model.n_tokens, val_blocks=model.n_blocks)
    out.update({k: 0 if k == "mask_tokens" else math.nan for k in CONTEXT_KEYS})
    if is_mask is not None:
        sel = is_mask.bool()
        out["mask_tokens"] = _paired(out, ("mask_loss", "mask_unigram_loss", "context_gain"), model_losses[sel],
                                     unigram_losses[sel], block[sel]).n_tokens
    if no_context_losses is not None:
        _paired(out, (None, "no_context_loss", "gain_over_no_context"), model_losses, no_context_losses, block)
    return out


def format_loss(m: dict, key: str = "val_loss", prefix: str = "") -> str:
    """'6.123 +- 0.012 (unigram 6.270, no-context 5.730; context gain +0.147 +- 0.004: learned)';
    ``prefix='test_'`` reads the test split's keys."""
    def f(x, sign=""):
        return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:{sign}.3f}"
    key = f"{prefix}loss" if prefix and key == "val_loss" else key
    out = f"{f(m.get(key))} +- {f(m.get(key + '_se'))}"
    if prefix + "unigram_loss" in m:
        out += f" (unigram {f(m.get(prefix + 'unigram_loss'))}"
        if m.get(prefix + "no_context_loss") is not None:
            out += f", no-context {f(m.get(prefix + 'no_context_loss'))}"
        if m.get(prefix + "context_gain") is not None:
            mark = "learned" if learned_context(m, prefix) else "NOT learned"
            out += (f"; context gain {f(m.get(prefix + 'context_gain'), '+')} +- "
                    f"{f(m.get(prefix + 'context_gain_se'))}: {mark}")
        out += ")"
    return out


def masked_token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x (B, L) over the real tokens (mask (B, L) bool); 0 when there are none."""
    keep = mask.to(x.dtype)
    return (x * keep).sum() / keep.sum().clamp_min(1.0)


def token_entropy(q: torch.Tensor) -> torch.Tensor:
    """H(q) = -sum q log q over the last axis (nats), in float32 or wider; log of q clamped at the smallest normal
    number, so the gradient stays finite where q = 0."""
    q = q.float() if q.dtype in (torch.float16, torch.bfloat16) else q
    return -(q * q.clamp_min(torch.finfo(q.dtype).tiny).log()).sum(-1)
