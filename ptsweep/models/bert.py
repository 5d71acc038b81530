"""BERT and Universal Transformer baselines for the MLM comparison (spec §11), built from Hugging Face's BERT modules.

BERT (the standard BERT-base-style MLM model, no pooler, no NSP):

    x = LN(word_emb[ids] + pos_emb[0..L-1] + type_emb[0])            # (B, L, d)   HF ``BertEmbeddings``
    x = BertLayer_l(x, key_pad_mask)  for l = 1..n_layers               # post-LN, GELU, d_ff = 4d, HF ``BertLayer``
    logits = LN(GELU(dense(h))) @ word_emb^T * logit_scale + b_out   # HF BertPredictionHeadTransform + tied decoder

UT: ONE ``BertLayer`` applied n_layers times, ``x = layer(x + e_t, key_pad_mask)`` for t = 0..n_layers-1, with a
learned timestep embedding e_t (role input) as in Dehghani et al.; positions are added once (as BERT) and no ACT.

Roles: :func:`declare_roles`; the decoder is tied to the word embedding (role input). SP (the default) re-applies
HF's init: weights N(0, 0.02^2), biases 0, LayerNorm gains 1. ``parametrization="mup"`` (for the coordinate check)
also scales attention scores by 1/head_dim instead of 1/sqrt(head_dim) and the tied decoder's logits by 1/d (muP's
readout multiplier for a shared embedding, as ``mup.MuSharedReadout``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig as HFBertConfig
from transformers.models.bert.modeling_bert import (BertEmbeddings, BertLayer, BertPredictionHeadTransform,
                                                    BertSelfAttention)

from ptsweep.config import BertConfig, UTConfig
from ptsweep.models.sizing import TYPE_VOCAB_SIZE, default_heads
from ptsweep.parametrization import Role, declare, init_parameters

HF_INIT_STD = 0.02
"""Hugging Face BERT's ``initializer_range``: std of every weight matrix and embedding table under SP."""


def _sp_normal(p: torch.Tensor) -> None:
    """Hugging Face's BERT init of a weight matrix or embedding table."""
    nn.init.normal_(p, 0.0, HF_INIT_STD)


def declare_roles(module: nn.Module, sp_init=lambda m: _sp_normal) -> None:
    """Declare the muP role and SP init of every Linear (hidden) / Embedding (input) / LayerNorm (gain) weight and
    bias (bias) inside ``module``; ``sp_init(m)``: the init of a Linear's or Embedding's weight (HF BERT's)."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            declare(m.weight, Role.HIDDEN if isinstance(m, nn.Linear) else Role.INPUT, sp_init(m))
        elif isinstance(m, nn.LayerNorm):
            declare(m.weight, Role.GAIN, nn.init.ones_)
        else:
            continue
        if getattr(m, "bias", None) is not None:
            declare(m.bias, Role.BIAS, nn.init.zeros_)


def hf_config(cfg: BertConfig, vocab_size: int) -> HFBertConfig:
    """The Hugging Face config of one of our baselines (post-LN BERT layer, GELU, d_ff = 4d, sdpa attention)."""
    d = cfg.width
    return HFBertConfig(
        vocab_size=vocab_size, hidden_size=d, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads or default_heads(d), intermediate_size=4 * d, hidden_act="gelu",
        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
        max_position_embeddings=cfg.max_positions, type_vocab_size=TYPE_VOCAB_SIZE,
        initializer_range=HF_INIT_STD, layer_norm_eps=1e-12, pad_token_id=None,  # no row is special: pads are masked
        attn_implementation="sdpa",
    )


def keep_config(module: nn.Module, cfg, hf_cfg, max_len: int) -> None:
    """Keep ``cfg``, ``width``, ``parametrization`` and ``hf_config`` on ``module``; ValueError when the sequence
    length exceeds ``cfg.max_positions``."""
    if max_len > cfg.max_positions:
        raise ValueError(f"model.max_positions={cfg.max_positions} is smaller than the sequence length {max_len}")
    module.cfg, module.width, module.parametrization, module.hf_config = cfg, cfg.width, cfg.parametrization, hf_cfg


class MLMBackbone(nn.Module):
    """Embeddings, key-padding mask, MLM head and muP bookkeeping shared by BERT and UT: subclasses create their
    layers, call :meth:`_finish_init` and implement :meth:`_layers_forward`."""

    def __init__(self, cfg: BertConfig, vocab_size: int, max_len: int) -> None:
        super().__init__()
        keep_config(self, cfg, hf_config(cfg, vocab_size), max_len)
        self.embeddings = BertEmbeddings(self.hf_config)  # word + position + token type, LN, dropout
        self.head_transform = BertPredictionHeadTransform(self.hf_config)  # dense -> GELU -> LN
        self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))  # (V,)
        # muP readout multiplier of the tied decoder (module docstring); exactly 1 in SP.
        self.logit_scale = 1.0 / cfg.width if cfg.parametrization == "mup" else 1.0

    def _finish_init(self) -> None:
        """Declare every role, apply the muP attention scale, and initialise (torch's global RNG)."""
        declare_roles(self)
        declare(self.decoder_bias, Role.BIAS, nn.init.zeros_)
        if self.parametrization == "mup":
            for m in self.modules():
                if isinstance(m, BertSelfAttention):
                    m.scaling = 1.0 / m.attention_head_size  # muP: 1/head_dim instead of 1/sqrt(head_dim)
        init_parameters(self, self.width, self.parametrization)

    def _layers_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Contextual hidden states (B, L, d). ``attention_mask`` (B, L) bool, False at padding (masked as keys)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        x = self.embeddings(input_ids=input_ids)  # (B, L, d)
        mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L): True = may attend (sdpa convention)
        return self._layers_forward(x, mask)  # (B, L, d)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """MLM logits (n, V) for selected hidden states (n, d): transform, then the decoder tied to the word table."""
        h = self.head_transform(hidden)  # (n, d)
        return F.linear(h, self.embeddings.word_embeddings.weight) * self.logit_scale + self.decoder_bias  # (n, V)


class BertMLM(MLMBackbone):
    """BERT MLM baseline: ``cfg.n_layers`` unshared post-LN HF ``BertLayer`` s between the shared embeddings/head."""

    def __init__(self, cfg: BertConfig, vocab_size: int, max_len: int = 512) -> None:
        super().__init__(cfg, vocab_size, max_len)
        self.layers = nn.ModuleList([BertLayer(self.hf_config, layer_idx=i) for i in range(cfg.n_layers)])
        self._finish_init()

    def _layers_forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask)  # (B, L, d)
        return x


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
