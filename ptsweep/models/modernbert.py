"""ModernBERT-style baseline for the MLM comparison, built from Hugging Face's ModernBERT modules (Warner et al.,
2024, "Smarter, Better, Faster, Longer"), as :mod:`ptsweep.models.bert` builds BERT from ``BertLayer``.

Architecture (``ModernBertForMaskedLM`` without unpadding, flash attention or local layers):

    x = LN(tok_emb[ids])                                  # (B, L, d)  HF ``ModernBertEmbeddings``; no position table
    cos, sin = rope(0..L-1)                               # (1, L, d_head)  HF ``ModernBertRotaryEmbedding``
    x = x + Attn_l(LN_l(x), cos, sin, key_pad_mask)       # pre-LN; rotary on q, k; layer 1 has no LN (x is normed)
    x = x + W_o(GELU(x W_a) * (x W_b)) on LN(x)           # GeGLU MLP, inner width f = 3d/2; both HF ``EncoderLayer``
    h = LN(x)                                             # final norm (``ModernBertModel.final_norm``)
    logits = LN(GELU(dense(h))) @ tok_emb^T + b_out       # HF ``ModernBertPredictionHead`` + tied decoder

No Linear or LayerNorm has a bias (ModernBERT's defaults); the decoder bias is the only one. Deviations from
ModernBERT: every layer attends globally (the blocks here are short) and the rotary base is ``model.rope_theta``.

Roles as BERT's (``bert.declare_roles``). SP only; the init is ModernBERT's (``_init_weights``): normals cut at 2
std, std 0.02 for the embedding and the input projections, 0.02 / sqrt(2 L) for the projections that write into the
residual stream or the head (attention Wo, MLP Wo, head dense).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from transformers import ModernBertConfig as HFModernBertConfig
from transformers.models.modernbert.modeling_modernbert import (ModernBertAttention, ModernBertEmbeddings,
                                                                ModernBertEncoderLayer, ModernBertMLP,
                                                                ModernBertPredictionHead, ModernBertRotaryEmbedding)

from ptsweep.config import ModernBertConfig
from ptsweep.models.bert import declare_roles, keep_config
from ptsweep.models.sizing import default_heads
from ptsweep.parametrization import Role, declare, init_parameters

INIT_STD = 0.02
"""ModernBERT's ``initializer_range``: std of the embedding and of the input projections."""
INIT_CUTOFF = 2.0
"""ModernBERT's ``initializer_cutoff_factor``: truncated normals are cut at this many std."""
LAYER_TYPE = "full_attention"
"""The HF layer type of every layer (global attention; the rotary module keys its tables by it)."""


def _trunc_normal(p: torch.Tensor, std: float) -> None:
    """ModernBERT's init of a weight matrix: N(0, std^2) truncated at +-INIT_CUTOFF std."""
    nn.init.trunc_normal_(p, 0.0, std, -INIT_CUTOFF * std, INIT_CUTOFF * std)


def sp_init(module: nn.Module, n_layers: int):
    """The init of each Linear / Embedding weight of ``module`` (module docstring), for ``bert.declare_roles``."""
    out_std = INIT_STD / math.sqrt(2.0 * n_layers)
    residual_writers = {m.Wo for m in module.modules() if isinstance(m, (ModernBertAttention, ModernBertMLP))}
    residual_writers |= {m.dense for m in module.modules() if isinstance(m, ModernBertPredictionHead)}
    return lambda m: partial(_trunc_normal, std=out_std if m in residual_writers else INIT_STD)


def hf_config(cfg: ModernBertConfig, vocab_size: int) -> HFModernBertConfig:
    """The Hugging Face config of the baseline: global sdpa attention in every layer, no biases, GeGLU of width f."""
    heads = cfg.n_heads or default_heads(cfg.width)
    if (cfg.width // heads) % 2:
        raise ValueError(f"model.width={cfg.width} with {heads} heads gives an odd head dim {cfg.width // heads}; "
                         "rotary embeddings rotate pairs of coordinates (set model.n_heads)")
    return HFModernBertConfig(
        vocab_size=vocab_size, hidden_size=cfg.width, intermediate_size=cfg.ffn_width,
        num_hidden_layers=cfg.n_layers, num_attention_heads=heads, hidden_activation="gelu",
        max_position_embeddings=cfg.max_positions, layer_types=[LAYER_TYPE] * cfg.n_layers,
        rope_parameters={LAYER_TYPE: {"rope_type": "default", "rope_theta": float(cfg.rope_theta)}},
        embedding_dropout=cfg.dropout, attention_dropout=cfg.dropout, mlp_dropout=cfg.dropout,
        initializer_range=INIT_STD, initializer_cutoff_factor=INIT_CUTOFF,
        pad_token_id=None, bos_token_id=None, eos_token_id=None, cls_token_id=None, sep_token_id=None,  # pads masked
        attn_implementation="sdpa",
    )


class ModernBertMLM(nn.Module):
    """ModernBERT-style MLM baseline: ``cfg.n_layers`` HF ``ModernBertEncoderLayer`` s (module docstring)."""

    def __init__(self, cfg: ModernBertConfig, vocab_size: int, max_len: int = 512) -> None:
        super().__init__()
        keep_config(self, cfg, hf_config(cfg, vocab_size), max_len)
        self.embeddings = ModernBertEmbeddings(self.hf_config)  # token table, LN, dropout
        self.rotary = ModernBertRotaryEmbedding(self.hf_config)  # inverse frequencies: a buffer, no parameter
        self.layers = nn.ModuleList([ModernBertEncoderLayer(self.hf_config, layer_idx=i)
                                     for i in range(cfg.n_layers)])
        self.final_norm = nn.LayerNorm(cfg.width, eps=self.hf_config.norm_eps, bias=self.hf_config.norm_bias)
        self.head_transform = ModernBertPredictionHead(self.hf_config)  # dense -> GELU -> LN
        self.decoder_bias = nn.Parameter(torch.zeros(vocab_size))  # (V,)
        declare_roles(self, sp_init(self, cfg.n_layers))
        declare(self.decoder_bias, Role.BIAS, nn.init.zeros_)
        init_parameters(self, self.width, self.parametrization)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Contextual hidden states (B, L, d). ``attention_mask`` (B, L) bool, False at padding (masked as keys)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        x = self.embeddings(input_ids=input_ids)  # (B, L, d)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # (1, L)
        rope = self.rotary(x, positions, LAYER_TYPE)  # cos, sin: (1, L, d_head) each
        mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L): True = may attend (sdpa convention)
        for layer in self.layers:
            x = layer(x, attention_mask=mask, position_embeddings=rope)  # (B, L, d)
        return self.final_norm(x)  # (B, L, d)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """MLM logits (n, V) for selected hidden states (n, d): transform, then the decoder tied to the token table."""
        h = self.head_transform(hidden)  # (n, d)
        return F.linear(h, self.embeddings.tok_embeddings.weight) + self.decoder_bias  # (n, V)
