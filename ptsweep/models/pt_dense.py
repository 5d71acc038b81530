"""PT's dense head-selection scores and ternary Z messages (``attention_impl=dense``): the (B, C, L, L) path.

The quantities are those of spec §6.3 steps 3 and 6, for distance classes k(i, j) (spec §4):

    S[b,c,i,j]        = <q_i^{k(i,j),c}, v_j^{k(i,j),c}>          0 on the diagonal
    ctx_child[i,k,c]  = sum_j R[c,i,j] 1[k(i,j)=k] v_j^{k,c}      (R = Q_h, the head-selection distribution)
    ctx_head[i,k,c]   = sum_j R[c,j,i] 1[k(j,i)=k] q_j^{k,c}

Unbounded ("far") classes are one (L x L) product each, kept where the pair is in the class. Bounded ("near")
classes are evaluated per signed offset d on shifted slices and moved between the (L, 2w+1) band layout and the
(L, L) layout by a pad-and-reshape skew (``skew`` / ``unskew``), not by index tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class DenseLayout:
    """Distance classes for one length L: far classes (class id, (L, L) membership) and near offsets (class id, d);
    ``width`` w = the largest |d| of a near offset (the band is (L, 2w + 1))."""

    far: tuple[tuple[int, torch.Tensor], ...]
    near: tuple[tuple[int, int], ...]
    width: int


@lru_cache(maxsize=32)
def dense_layout(classes: tuple, length: int, device: torch.device) -> DenseLayout:
    """The ``DenseLayout`` of the model's ``DistanceClass`` tuple at length L (cached: built once per shape)."""
    pos = torch.arange(length, device=device)
    offset = pos[None, :] - pos[:, None]  # (L, L): j - i
    far = tuple((k, cls.contains(offset)) for k, cls in enumerate(classes) if cls.offsets is None)
    near = tuple((k, d) for k, cls in enumerate(classes) if cls.offsets is not None for d in cls.offsets)
    return DenseLayout(far, near, max([0] + [abs(d) for _, d in near]))  # no max(default=): a dynamo graph break


def skew(band: torch.Tensor) -> torch.Tensor:
    """(..., L, 2w+1) band -> (..., L, L) with out[i, j] = band[i, j - i + w] for |j - i| <= w, else 0 (the padded
    band read with row stride L + 2w)."""
    *lead, length, width = band.shape
    w = (width - 1) // 2
    flat = F.pad(band, (0, length)).flatten(-2)[..., : length * (length + 2 * w)]
    return flat.view(*lead, length, length + 2 * w)[..., w: w + length]


def unskew(x: torch.Tensor, w: int) -> torch.Tensor:
    """(..., L, L) -> (..., L, 2w+1) band with band[i, t] = x[i, i + t - w] (0 where i + t - w is outside [0, L))."""
    *lead, length, _ = x.shape
    flat = F.pad(F.pad(x, (w, w)).flatten(-2), (0, length))  # row i of the padded x read with stride L + 2w + 1
    return flat.view(*lead, length, length + 2 * w + 1)[..., : 2 * w + 1]


def _rows(length: int, d: int) -> tuple[int, int]:
    """Rows i in [lo, hi) whose partner i + d is inside [0, L) (lo == hi: none)."""
    lo = min(max(0, -d), length)
    return lo, max(lo, length - max(0, d))


def _per_class(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(B, K, C, L, r) -> K views (B, L, C, r), in the layout of the projection matmul (no copy in backward)."""
    return x.permute(0, 3, 1, 2, 4).unbind(2)


def pair_scores(q: torch.Tensor, v: torch.Tensor, layout: DenseLayout) -> torch.Tensor:
    """S (B, C, L, L) from q, v (B, K, C, L, r); equal to the per-class restriction of each class's q v^T."""
    qs, vs = _per_class(q), _per_class(v)                                      # K x (B, L, C, r)
    bsz, _, chans, length, _ = q.shape
    w = layout.width
    cols = [q.new_zeros(bsz, length, chans)] * (2 * w + 1)                     # column t = d + w of the band
    for k, d in layout.near:
        lo, hi = _rows(length, d)
        if hi == lo:
            continue
        prod = (qs[k][:, lo:hi] * vs[k][:, lo + d: hi + d]).sum(-1)            # S[i, i+d] for i in [lo, hi)
        cols[d + w] = F.pad(prod, (0, 0, lo, length - hi))                     # (B, L, C)
    scores = skew(torch.stack(cols, -1).permute(0, 2, 1, 3))                   # (B, C, L, L), 0 off the band
    for k, member in layout.far:
        scores = torch.where(member, qs[k].transpose(1, 2) @ vs[k].permute(0, 2, 3, 1), scores)
    return scores


def contexts(q_h: torch.Tensor, q: torch.Tensor, v: torch.Tensor, layout: DenseLayout
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """ctx_child, ctx_head (B*L, K*C*r) from Q_h (B, C, L, L) and q, v (B, K, C, L, r) (module docstring)."""
    qs, vs = _per_class(q), _per_class(v)                                      # K x (B, L, C, r)
    bsz, n_cls, chans, length, rank = q.shape
    child: list = [None] * n_cls
    head: list = [None] * n_cls
    for k, member in layout.far:
        r_k = torch.where(member, q_h, 0.0)                                    # (B, C, L, L) restricted to class k
        child[k] = (r_k @ vs[k].transpose(1, 2)).transpose(1, 2)               # (B, L, C, r)
        head[k] = (r_k.transpose(-1, -2) @ qs[k].transpose(1, 2)).transpose(1, 2)
    band = unskew(q_h, layout.width).permute(0, 2, 1, 3)                       # (B, L, C, 2w+1): R[i, i+d]
    for k, d in layout.near:
        lo, hi = _rows(length, d)
        if hi == lo:
            continue
        r_d = band[:, lo:hi, :, d + layout.width, None]                        # (B, hi-lo, C, 1)
        c_d = F.pad(r_d * vs[k][:, lo + d: hi + d], (0, 0, 0, 0, lo, length - hi))
        # child i sends R[i, i+d] q_i to head i + d: rows [lo + d, hi + d)
        h_d = F.pad(r_d * qs[k][:, lo:hi], (0, 0, 0, 0, lo + d, length - hi - d))
        child[k] = c_d if child[k] is None else child[k] + c_d
        head[k] = h_d if head[k] is None else head[k] + h_d
    zero = q.new_zeros(bsz, length, chans, rank)

    def flat(parts: list) -> torch.Tensor:
        stacked = torch.stack([zero if p is None else p for p in parts], 2)    # (B, L, K, C, r)
        return stacked.view(bsz * length, n_cls * chans * rank)

    return flat(child), flat(head)
