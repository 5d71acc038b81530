"""Model registry and the one MLM loss shared by PT, BERT, UT and the ModernBERT-style baseline.

Every model implements the same two-step interface, so that the MLM head is evaluated only at the positions that
carry a label (15% of tokens; conventions.md §4: 3-5x faster steps on CPU):

    hidden = model.encode(input_ids, attention_mask)   # (B, L, D)
    logits = model.head(hidden[labels != -100])        # (n_targets, V)

and exposes ``model.width`` and ``model.parametrization`` for :mod:`ptsweep.parametrization`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ptsweep.config import BertConfig, ModernBertConfig, PTConfig, UTConfig

IGNORE_INDEX = -100


def build_model(model_cfg, vocab_size: int, max_len: int = 512) -> nn.Module:
    """Build PT / BERT / UT / ModernBERT from its config (explicit dispatch on the config type, no string lookups)."""
    if isinstance(model_cfg, PTConfig):
        from ptsweep.models.pt import ProbabilisticTransformer

        return ProbabilisticTransformer(model_cfg, vocab_size)
    if isinstance(model_cfg, UTConfig):
        from ptsweep.models.ut import UniversalTransformerMLM

        return UniversalTransformerMLM(model_cfg, vocab_size, max_len)
    if isinstance(model_cfg, BertConfig):
        from ptsweep.models.bert import BertMLM

        return BertMLM(model_cfg, vocab_size, max_len)
    if isinstance(model_cfg, ModernBertConfig):
        from ptsweep.models.modernbert import ModernBertMLM

        return ModernBertMLM(model_cfg, vocab_size, max_len)
    raise TypeError(f"no model for config of type {type(model_cfg).__name__}")


def mlm_logits(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               labels: torch.Tensor) -> torch.Tensor:
    """Head logits at the labelled positions only, in row-major order: (n_targets, V)."""
    hidden = model.encode(input_ids, attention_mask)  # (B, L, D)
    return model.head(hidden[labels != IGNORE_INDEX])  # (n_targets, V)


def mlm_loss(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Token-averaged cross-entropy over the masked positions (spec §5). Returns (loss, n_targets)."""
    logits = mlm_logits(model, input_ids, attention_mask, labels)
    targets = labels[labels != IGNORE_INDEX]
    return F.cross_entropy(logits.float(), targets), int(targets.numel())
