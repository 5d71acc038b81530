"""Universal Transformer baseline (spec §11): ONE post-LN HF ``BertLayer`` applied ``n_layers`` times.

    x = embeddings(ids)                               # (B, L, d), same as BERT (positions added once, at the input)
    for t in 0..n_layers-1:  x = layer(x + e_t, pad_mask)   # the same module object every step: shared weights
    logits = head(x)                                  # same MLM head as BERT (tied decoder)

``e_t`` is a learned timestep embedding (table n_layers x d, role input, SP init N(0, 0.02^2)) added before every
step, as in Dehghani et al.; unlike their UT, position embeddings are added only once (as BERT does) and there is no
ACT (a fixed number of steps).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertLayer

from ptsweep.config import UTConfig
from ptsweep.models.bert import MLMBackbone, _sp_normal
from ptsweep.parametrization import Role, declare


class UniversalTransformerMLM(MLMBackbone):
    """UT MLM baseline: one shared ``BertLayer`` applied ``cfg.n_layers`` times with a timestep embedding."""

    def __init__(self, cfg: UTConfig, vocab_size: int, max_len: int = 512) -> None:
        super().__init__(cfg, vocab_size, max_len)
        self.n_steps = cfg.n_layers
        self.layer = BertLayer(self.hf_config, layer_idx=0)  # the only layer; reused at every step
        self.timestep = nn.Parameter(torch.zeros(cfg.n_layers, cfg.width))  # (T, d)
        declare(self.timestep, Role.INPUT, _sp_normal)
        self._finish_init()

    def _layers_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for t in range(self.n_steps):
            x = self.layer(x + self.timestep[t], mask)  # (B, L, d)
        return x
