"""Model registry and the one MLM loss shared by PT, BERT, UT and the ModernBERT-style baseline.

Every model implements the same two-step interface, so that the MLM head runs only at the labelled positions:

    hidden = model.encode(input_ids, attention_mask)   # (B, L, D)
    logits = model.head(hidden[labels != -100])        # (n_targets, V)

and exposes ``model.width`` and ``model.parametrization``. A training step backpropagates ``training_objective``:
the MLM loss plus the auxiliary terms a model names in ``loss_terms``, which its ``encode(..., aux=dict)`` fills.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ptsweep.config import BertConfig, ModernBertConfig, PTConfig, UTConfig

IGNORE_INDEX = -100


def build_model(model_cfg, vocab_size: int, max_len: int = 512) -> nn.Module:
    """Build PT / BERT / UT / ModernBERT from its config (explicit dispatch on the config type, no string lookups)."""
    if isinstance(model_cfg, PTConfig):  # the paper's model with the variants of model.variants attached
        from ptsweep.models.pt import ProbabilisticTransformer
        from ptsweep.variants import attach

        return attach(ProbabilisticTransformer(model_cfg, vocab_size), model_cfg)
    if isinstance(model_cfg, UTConfig):
        from ptsweep.models.bert import UniversalTransformerMLM

        return UniversalTransformerMLM(model_cfg, vocab_size, max_len)
    if isinstance(model_cfg, BertConfig):
        from ptsweep.models.bert import BertMLM

        return BertMLM(model_cfg, vocab_size, max_len)
    if isinstance(model_cfg, ModernBertConfig):
        from ptsweep.models.modernbert import ModernBertMLM

        return ModernBertMLM(model_cfg, vocab_size, max_len)
    raise TypeError(f"no model for config of type {type(model_cfg).__name__}")


def mlm_logits(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               labels: torch.Tensor, aux: dict | None = None) -> torch.Tensor:
    """Head logits at the labelled positions only, in row-major order: (n_targets, V). ``aux``: a dict for the
    auxiliary loss terms (only a model with ``loss_terms`` takes one)."""
    kwargs = {} if aux is None else {"aux": aux}
    hidden = model.encode(input_ids, attention_mask, **kwargs)  # (B, L, D)
    return model.head(hidden[labels != IGNORE_INDEX])  # (n_targets, V)


def mlm_loss(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             labels: torch.Tensor, aux: dict | None = None) -> tuple[torch.Tensor, int]:
    """Token-averaged cross-entropy over the masked positions (spec §5): (loss, n_targets)."""
    logits = mlm_logits(model, input_ids, attention_mask, labels, aux)
    targets = labels[labels != IGNORE_INDEX]
    return F.cross_entropy(logits.float(), targets), int(targets.numel())


def training_objective(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """(objective, MLM loss, auxiliary terms): objective = MLM loss + the weighted terms the model names in
    ``loss_terms`` (without terms, the MLM loss tensor itself)."""
    aux = {} if getattr(model, "loss_terms", ()) else None
    loss, _ = mlm_loss(model, input_ids, attention_mask, labels, aux)
    terms = aux or {}
    return (loss + sum(terms.values()) if terms else loss), loss, terms
