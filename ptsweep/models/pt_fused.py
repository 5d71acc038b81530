"""PT's head-selection softmax and ternary Z messages on torch's fused, LSE-returning attention kernels
(``model.attention_impl=fused``; CPU: ``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward).

The quantities are those of ``pt_dense`` (spec §6.3 steps 2-4 and 6), per batch b and channel c (a kernel "head"):

    l[i, j]         = s <q_i^{k(i,j)}, v_j^{k(i,j)}>  (s = w_attn * s_H),  R[i, :] = softmax_{j != i} l[i, :]
    ctx_child[i, k] = sum_j R[i,j] 1[k(i,j)=k] v_j^k       ctx_head[j, k] = sum_i R[i,j] 1[k(i,j)=k] q_i^k

Far (unbounded) classes are causal kernel calls on shifted slices: the left class (j <= i - D) has queries q[D:]
and keys v[:L-D] with key index <= query index; the right class (j >= i + D) is the same on sequences flipped along
L. Near (bounded) classes are elementwise, one signed offset d at a time, as in ``pt_dense``. The row normaliser is
the log-sum-exp of the parts (flash-decoding's merge): lse_i = logsumexp(lse_left_i, lse_right_i, l[i, i+d] ...),
and each far part's output is weighted by exp(lse_part_i - lse_i). The head direction of a far class is a second
call with queries v_j, keys and values q_i and the per-key bias -lse_i (an ``attn_mask`` broadcast over queries):
its normalised output times exp(its own LSE) is sum_i R[i,j] q_i (every exponent <= 0: nothing overflows).

Backward (one ``torch.autograd.Function`` over projection -> messages; it saves P^ and lse only, and recomputes q
and v): with G_c, G_h the gradients of the two contexts, dR[i,j] = <G_c_i, v_j> + <q_i, G_h_j> and
dl = R (dR - D_i), D_i = sum_j R[i,j] dR[i,j] = sum_k <G_c_i^k, ctx_child_i^k> + <q_i^k, (R G_h)_i^k>. One forward
call per far class gives its child context and R G_h (values v and G_h stacked along the kernel's head axis); one
backward call per far class, given the merged lse, Q = [q, 0, 0], K = [v, 0, 0], V = [v, G_h, 0],
dO = [G_c, q, 1] and O = [0, 0, D] (so that the kernel's rowsum(dO * O) is D_i), returns dq and dk of the scores,
P^T G_c (for dv) and P^T q (the head context, for dW_head). Autograd through the private ops would be wrong here:
their LSE output is not differentiable and the CPU backward returns no gradient for ``attn_mask``.

Only batches without pads and with L >= 2 (``applicable``); the model sends the others, the same math, to the
blockwise path (``pt_attention``). Half-precision q, v are upcast to float32 for the kernels (as the reference's
float32 softmax).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from ptsweep.models.pt_dense import _rows as near_rows


def flash_ops():
    """The private CPU kernels used here (forward, backward); their signatures are pinned by a test."""
    aten = torch.ops.aten
    return aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_flash_attention_for_cpu_backward


def applicable(mask: torch.Tensor) -> bool:
    """Whether a batch can take the fused path: on the CPU, no pads (mask (B, L) all True) and L >= 2."""
    return mask.device.type == "cpu" and mask.shape[1] >= 2 and bool(mask.all())


@dataclass(frozen=True)
class FusedLayout:
    """Far classes as (class id, direction, D) with D the smallest |d| of the class; near ones as (class id, d)."""

    far: tuple[tuple[int, int, int], ...]
    near: tuple[tuple[int, int], ...]


@lru_cache(maxsize=32)
def fused_layout(classes: tuple) -> FusedLayout:
    """The ``FusedLayout`` of the model's ``DistanceClass`` tuple."""
    far = tuple((k, c.direction, c.lo) for k, c in enumerate(classes) if c.offsets is None)
    near = tuple((k, d) for k, c in enumerate(classes) if c.offsets is not None for d in c.offsets)
    return FusedLayout(far, near)


def _place(x: torch.Tensor, rows: slice, length: int, fill: float = 0.0) -> torch.Tensor:
    """(B, C, n, ...) on rows [rows.start, rows.stop) -> (B, C, L, ...) padded with ``fill``."""
    return F.pad(x, (0, 0) * (x.dim() - 3) + (rows.start, length - rows.stop), value=fill)


def _flash(q, k, v, flip: bool, scale: float, bias=None):
    """Causal attention (key index <= query index) with its LSE: out (B, H, n, E), lse (B, H, n); ``flip``: the
    same on the sequences reversed along n (anti-causal), results back in the original order."""
    fwd, _ = flash_ops()
    if flip:
        q, k, v = q.flip(2), k.flip(2), v.flip(2)
        bias = None if bias is None else bias.flip(-1)
    out, lse = fwd(q, k, v, 0.0, True, attn_mask=bias, scale=scale)
    return (out.flip(2), lse.flip(-1)) if flip else (out, lse)


def _flash_grad(g_out, q, k, v, out, lse, flip: bool, scale: float):
    """The kernel's backward for rows P = exp(scale q k^T - lse) (causal, or anti-causal with ``flip``):
    (dq, dk, dv) with D = rowsum(g_out * out)."""
    _, bwd = flash_ops()
    if flip:
        g_out, q, k, v, out, lse = (t.flip(-1 if t.dim() == 3 else 2) for t in (g_out, q, k, v, out, lse))
    grads = bwd(g_out, q, k, v, out, lse, 0.0, True, attn_mask=None, scale=scale)
    return tuple(g.flip(2) for g in grads) if flip else grads


def _near(qs, vs, layout: FusedLayout, scale: float) -> list:
    """(k, d, rows i, rows i + d, logits l[i, i+d] (B, C, m)) for each near offset with m >= 1 rows."""
    length = qs[0].shape[2]
    out = []
    for k, d in layout.near:
        lo, hi = near_rows(length, d)
        if hi > lo:
            rows, partners = slice(lo, hi), slice(lo + d, hi + d)
            out.append((k, d, rows, partners, scale * (qs[k][:, :, rows] * vs[k][:, :, partners]).sum(-1)))
    return out


def _far(layout: FusedLayout, length: int) -> list:
    """(k, query rows i, key rows j, flip) for each far class with at least one pair at length L: left (j <= i - D)
    queries q[D:], keys v[:L-D], causal; right (j >= i + D) q[:L-D], v[D:], anti-causal (``flip``)."""
    out = []
    for k, direction, lo in layout.far:
        if lo < length:
            left = direction < 0
            rows = (slice(lo, length), slice(0, length - lo)) if left else (slice(0, length - lo), slice(lo, length))
            out.append((k, *rows, not left))
    return out


def _add(parts: list, k: int, x: torch.Tensor) -> None:
    parts[k] = x if parts[k] is None else parts[k] + x


def _flat(parts: list, like: torch.Tensor) -> torch.Tensor:
    """K per-class (B, C, L, r) tensors (None: zero) -> (B*L, K*C*r), the layout of the flat projection weights."""
    zero = torch.zeros_like(like)
    stacked = torch.stack([zero if p is None else p for p in parts], 1)               # (B, K, C, L, r)
    bsz, n_cls, chans, length, rank = stacked.shape
    return stacked.permute(0, 3, 1, 2, 4).reshape(bsz * length, n_cls * chans * rank)


def _per_class(flat: torch.Tensor, shape, bsz: int, length: int, dtype) -> list:
    """(B*L, K*C*r) -> K views (B, C, L, r) in ``dtype``."""
    k, c, r = shape
    x = flat.view(bsz, length, k, c, r).to(dtype)
    return [x[:, :, i].transpose(1, 2) for i in range(k)]


def _forward(qs, vs, layout: FusedLayout, scale: float):
    """Contexts (K lists of (B, C, L, r) or None) and the merged row lse (B, C, L) from per-class q, v."""
    length = qs[0].shape[2]
    far, near = _far(layout, length), _near(qs, vs, layout, scale)
    child: list = [None] * len(qs)
    head: list = [None] * len(qs)
    parts = [_flash(qs[k][:, :, rq], vs[k][:, :, rk], vs[k][:, :, rk], flip, scale) for k, rq, rk, flip in far]
    lse = torch.stack([_place(lse_k, rq, length, -torch.inf) for (_, rq, _, _), (_, lse_k) in zip(far, parts)]
                      + [_place(lg, rows, length, -torch.inf) for _, _, rows, _, lg in near], -1).logsumexp(-1)
    for (k, rq, rk, flip), (out, lse_k) in zip(far, parts):
        _add(child, k, _place(out * (lse_k - lse[:, :, rq]).exp()[..., None], rq, length))
        q_k = qs[k][:, :, rq]
        h, lse_h = _flash(vs[k][:, :, rk], q_k, q_k, not flip, scale, bias=-lse[:, :, None, rq])
        _add(head, k, _place(h * lse_h.exp()[..., None], rk, length))
    for k, _, rows, partners, logits in near:
        r_d = (logits - lse[:, :, rows]).exp()[..., None]                             # (B, C, m, 1): R[i, i+d]
        _add(child, k, _place(r_d * vs[k][:, :, partners], rows, length))
        _add(head, k, _place(r_d * qs[k][:, :, rows], partners, length))
    return child, head, lse


def _backward(qs, vs, gcs, ghs, lse, layout: FusedLayout, scale: float):
    """Gradients of q, v and the recomputed contexts (each K lists of (B, C, L, r) or None); module docstring."""
    length, rank = qs[0].shape[2], qs[0].shape[3]
    far, near = _far(layout, length), _near(qs, vs, layout, scale)
    n_cls = len(qs)
    gq, gv, child, head = ([None] * n_cls for _ in range(4))
    dsum = torch.zeros_like(lse)                                                      # D_i (B, C, L)
    for k, rq, rk, flip in far:   # child context and R G_h of the class: values v and G_h on the head axis
        q_k, v_k = qs[k][:, :, rq], vs[k][:, :, rk]
        out, lse_k = _flash(q_k.repeat(1, 2, 1, 1), v_k.repeat(1, 2, 1, 1),
                            torch.cat([v_k, ghs[k][:, :, rk]], 1), flip, scale)
        out = out * (lse_k - lse[:, :, rq].repeat(1, 2, 1)).exp()[..., None]
        ctx, rgh = out.chunk(2, 1)                                                     # (B, C, n, r) each
        dsum[:, :, rq] += (gcs[k][:, :, rq] * ctx).sum(-1) + (q_k * rgh).sum(-1)
        _add(child, k, _place(ctx, rq, length))
        _add(gq, k, _place(rgh, rq, length))
    near_r = []
    for k, _, rows, partners, logits in near:
        r_d = (logits - lse[:, :, rows]).exp()                                        # (B, C, m)
        g_r = ((gcs[k][:, :, rows] * vs[k][:, :, partners]).sum(-1)
               + (qs[k][:, :, rows] * ghs[k][:, :, partners]).sum(-1))
        dsum[:, :, rows] += r_d * g_r
        near_r.append((r_d, g_r))
        r_d = r_d[..., None]
        _add(child, k, _place(r_d * vs[k][:, :, partners], rows, length))
        _add(head, k, _place(r_d * qs[k][:, :, rows], partners, length))
        _add(gq, k, _place(r_d * ghs[k][:, :, partners], rows, length))
        _add(gv, k, _place(r_d * gcs[k][:, :, rows], partners, length))
    for k, rq, rk, flip in far:
        q_k, v_k, d_k = qs[k][:, :, rq], vs[k][:, :, rk], dsum[:, :, rq, None]
        zq = q_k.new_zeros(*q_k.shape[:3], rank + 1)
        dq, dk, dv = _flash_grad(torch.cat([gcs[k][:, :, rq], q_k, torch.ones_like(d_k)], -1),
                                 torch.cat([q_k, zq], -1), torch.cat([v_k, zq], -1),
                                 torch.cat([v_k, ghs[k][:, :, rk], torch.zeros_like(d_k)], -1),
                                 torch.cat([torch.zeros_like(q_k), torch.zeros_like(q_k), d_k], -1),
                                 lse[:, :, rq], flip, scale)
        _add(gq, k, _place(dq[..., :rank], rq, length))
        _add(gv, k, _place(dk[..., :rank] + dv[..., :rank], rk, length))
        _add(head, k, _place(dv[..., rank: 2 * rank], rk, length))
    for (k, _, rows, partners, _), (r_d, g_r) in zip(near, near_r):
        dl = (scale * r_d * (g_r - dsum[:, :, rows]))[..., None]                      # (B, C, m, 1)
        _add(gq, k, _place(dl * vs[k][:, :, partners], rows, length))
        _add(gv, k, _place(dl * qs[k][:, :, rows], partners, length))
    return gq, gv, child, head


def _attention_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class _FusedMessages(torch.autograd.Function):
    """(P^, W_q, W_v, W_child, W_head) -> (msg_child, msg_head), each (B, L, N); module docstring."""

    @staticmethod
    def forward(ctx, p_hat, w_q, w_v, w_child, w_head, shape, scale, layout):
        bsz, length, n = p_hat.shape
        flat = p_hat.reshape(bsz * length, n)
        dt = _attention_dtype(p_hat.dtype)
        qs, vs = (_per_class(flat @ w.to(p_hat.dtype), shape, bsz, length, dt) for w in (w_q, w_v))
        child, head, lse = _forward(qs, vs, layout, scale)
        out_c, out_h = (_flat(parts, qs[0]) @ w.to(dt) for parts, w in ((child, w_child), (head, w_head)))
        ctx.save_for_backward(p_hat, w_q, w_v, w_child, w_head, lse)
        ctx.args = (shape, scale, layout)
        return out_c.view(bsz, length, n).to(p_hat.dtype), out_h.view(bsz, length, n).to(p_hat.dtype)

    @staticmethod
    def backward(ctx, g_c, g_h):
        p_hat, w_q, w_v, w_child, w_head, lse = ctx.saved_tensors
        shape, scale, layout = ctx.args
        bsz, length, n = p_hat.shape
        flat = p_hat.reshape(bsz * length, n)
        dt = _attention_dtype(p_hat.dtype)
        qs, vs = (_per_class(flat @ w.to(p_hat.dtype), shape, bsz, length, dt) for w in (w_q, w_v))
        g_c, g_h = g_c.reshape(-1, n).to(dt), g_h.reshape(-1, n).to(dt)
        gcs, ghs = (_per_class(g @ w.to(dt).t(), shape, bsz, length, dt) for g, w in ((g_c, w_child), (g_h, w_head)))
        gq, gv, child, head = _backward(qs, vs, gcs, ghs, lse, layout, scale)
        gw_c = _flat(child, qs[0]).t() @ g_c                                            # (K*C*r, N)
        gw_h = _flat(head, qs[0]).t() @ g_h
        g_q, g_v = _flat(gq, qs[0]).to(p_hat.dtype), _flat(gv, qs[0]).to(p_hat.dtype)  # (B*L, K*C*r)
        g_p = (g_q @ w_q.to(p_hat.dtype).t() + g_v @ w_v.to(p_hat.dtype).t()).view_as(p_hat)
        return (g_p, (flat.t() @ g_q).to(w_q.dtype), (flat.t() @ g_v).to(w_v.dtype), gw_c.to(w_child.dtype),
                gw_h.to(w_head.dtype), None, None, None)


def fused_messages(p_hat: torch.Tensor, weights: dict, shape: tuple[int, int, int], classes,
                   scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Child- and head-side Z messages (B, L, N) from P^ (B, L, N) of a batch without pads (``applicable``).
    weights: ``flat_weights()``; shape: (K, C, r); scale = w_attn * s_H; classes: the model's DistanceClass list."""
    return _FusedMessages.apply(p_hat, weights["q"], weights["v"], weights["child"], weights["head"], tuple(shape),
                                float(scale), fused_layout(tuple(classes)))
