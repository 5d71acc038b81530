"""PT's head-selection softmax and ternary Z messages with memory linear in L (``model.attention_impl=blockwise``).

The dense path (``pt_dense``) keeps O(L^2) tensors per sequence and iteration for backward. Here the same quantities
(spec §6.3 steps 2-4 and 6) are computed for blocks of ``block`` child rows i against all heads j, so each block
holds complete rows and its row softmax is exact in one pass:

    q, v         = P^ W_qv                                    (B, K, C, L, r), classes in layout order (far, near)
    S[i, j]      = sum_k 1[k(i,j)=k] <q_i^{k,c}, v_j^{k,c}>   far (unbounded) classes: (b x L) products; near
                                                              (bounded) classes: banded, one column per offset d
    R[i, :]      = softmax_j(where(valid[i,j], w_attn s_H S[i,j], mask_value))       (fp32 softmax, as the reference)
                   (with a ``score_transform`` T: w_attn T(S, valid)[i,j] in place of w_attn s_H S[i,j])
    child[i, k]  = sum_j R[i,j] 1[k(i,j)=k] v_j^k              (row-softmax attention, per class)
    head[j, k]  += sum_{i in block} R[i,j] 1[k(i,j)=k] q_i^k   (transposed attention, accumulated over blocks)
    msg_child    = ctx_child (B*L, K*C*r) @ W_child (K*C*r, N);  msg_head likewise with W_head

One ``torch.autograd.Function`` covers projection -> messages. It saves P^ (B, L, N); backward recomputes q, v and
each row block under autograd, so what is kept is O(L * N) and the transients O(b * L * C) per block. Classes come
in ``layout_order`` (far, then near), so that far and near parts are plain slices.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK_ROWS = 32  # child rows per block: transient memory O(B * C * BLOCK_ROWS * L) per block


def layout_order(classes) -> list[int]:
    """Class ids in layout order: the unbounded (far) classes, then the bounded (near) ones."""
    return ([k for k, c in enumerate(classes) if c.offsets is None]
            + [k for k, c in enumerate(classes) if c.offsets is not None])


class ClassLayout:
    """Distance classes (spec §4) for one length L in layout order: ``n_far`` far classes with (n_far, L, L)
    membership masks, then near classes given by their signed offsets d (``near``: (layout slot - n_far, d))."""

    def __init__(self, classes, length: int, device):
        order = layout_order(classes)
        pos = torch.arange(length, device=device)
        offset = pos[None, :] - pos[:, None]  # (L, L): j - i
        far = [k for k in order if classes[k].offsets is None]
        self.length = length
        self.n_far = len(far)
        self.n_near = len(order) - self.n_far
        self.near = [(slot, d) for slot, k in enumerate(order[self.n_far:]) for d in classes[k].offsets]
        self.width = max((abs(d) for _, d in self.near), default=0)
        self.far_member = torch.stack([classes[k].contains(offset) for k in far])  # (nF, L, L)
        self.not_diag = offset != 0                                                # (L, L)
        self.one_per_class = [s for s, _ in self.near] == list(range(self.n_near))

    def columns(self, i0: int, i1: int, device) -> torch.Tensor:
        """(b, nD) column i + d + w of each near offset on a w-padded head axis, for rows i in [i0, i1)."""
        ds = torch.tensor([d for _, d in self.near], dtype=torch.long, device=device)
        return torch.arange(i0, i1, device=device)[:, None] + ds + self.width


def _by_offset(x: torch.Tensor, layout: ClassLayout) -> torch.Tensor:
    """(B, nN, ...) per near class -> (B, nD, ...) per near offset (a view when every class has one offset)."""
    if layout.one_per_class:
        return x
    return x[:, [s for s, _ in layout.near]]


def _to_class(x: torch.Tensor, layout: ClassLayout) -> torch.Tensor:
    """(B, nD, ...) per near offset -> (B, nN, ...) summed per near class."""
    if layout.one_per_class:
        return x
    idx = torch.tensor([s for s, _ in layout.near], device=x.device)
    return x.new_zeros(x.shape[0], layout.n_near, *x.shape[2:]).index_add(1, idx, x)


def _block(q_blk, v_far, v_win, mask, layout: ClassLayout, i0: int, i1: int, scale: float, mask_value: float,
           score_transform=None):
    """Rows [i0, i1) of the attention. Inputs: q_blk (B, K, C, b, r) = q[..., i0:i1, :]; v_far (B, nF, C, L, r);
    v_win (B, nN, C, b + 2w, r) = near-class v on the w-padded head rows [i0, i1 + 2w); mask (B, L) bool;
    ``score_transform``: the model's hook (whole rows, as on the dense path), or None.

    Returns child (B, K, C, b, r), head_far (B, nF, C, L, r) and head_near (B, nN, C, b + 2w, r) on v_win's rows."""
    bsz, _, chans, b, rank = q_blk.shape
    length, w, nf = layout.length, layout.width, layout.n_far
    valid = (mask[:, i0:i1, None] & mask[:, None, :] & layout.not_diag[i0:i1])[:, None]  # (B, 1, b, L)
    mem_far = layout.far_member[:, i0:i1][None, :, None]                                 # (1, nF, 1, b, L)
    q_far, q_near = q_blk[:, :nf], _by_offset(q_blk[:, nf:], layout)                     # (B, nF|nD, C, b, r)
    scores = torch.where(mem_far, q_far @ v_far.transpose(-1, -2), 0.0).sum(1)           # (B, C, b, L)
    nd = len(layout.near)
    if nd:
        v_win_d = _by_offset(v_win, layout)
        v_shift = torch.stack([v_win_d[:, o, :, w + d: w + d + b] for o, (_, d) in enumerate(layout.near)], 1)
        band = (q_near * v_shift).sum(-1).permute(0, 2, 3, 1)                            # (B, C, b, nD): S[i,i+d]
        cols = layout.columns(i0, i1, q_blk.device).expand(bsz, chans, b, nd)            # (B, C, b, nD)
        padded = scores.new_zeros(bsz, chans, b, length + 2 * w).scatter(-1, cols, band)
        scores = scores + padded[..., w: w + length]
    if score_transform is not None:  # the block holds whole rows, as the dense path's scores
        scores = score_transform(scores, valid)
    logits = torch.where(valid, scale * scores, mask_value)
    r_blk = torch.softmax(logits.float(), dim=-1).to(q_blk.dtype)                        # (B, C, b, L): Q_h rows
    r_far = torch.where(mem_far, r_blk[:, None], 0.0)                                    # (B, nF, C, b, L)
    child = r_far @ v_far                                                                # (B, nF, C, b, r)
    head_far = r_far.transpose(-1, -2) @ q_far                                           # (B, nF, C, L, r)
    head_near = v_win.new_zeros(bsz, layout.n_near, chans, b + 2 * w, rank)
    if nd:
        r_band = F.pad(r_blk, (w, w)).gather(-1, cols).permute(0, 3, 1, 2)[..., None]    # (B, nD, C, b, 1)
        child = torch.cat([child, _to_class(r_band * v_shift, layout)], 1)               # (B, K, C, b, r)
        sent = r_band * q_near                                                           # (B, nD, C, b, r)
        # child i sends R[i, i+d] q_i to head i + d: row (i - i0) + w + d of the window
        head_near = _to_class(torch.stack([F.pad(sent[:, o], (0, 0, w + d, w - d))
                                           for o, (_, d) in enumerate(layout.near)], 1), layout)
    return child, head_far, head_near


def _flat(ctx: torch.Tensor) -> torch.Tensor:
    """(B, K, C, L, r) -> (B*L, K*C*r), the layout of the flat back-projection weights."""
    bsz, _, _, length, _ = ctx.shape
    return ctx.permute(0, 3, 1, 2, 4).reshape(bsz * length, -1)


def _project(p_hat: torch.Tensor, w_qv: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    """qv = P^ W_qv: (B, L, N) -> (B, L, K, C, 2r), contiguous."""
    bsz, length, n = p_hat.shape
    k, c, r = shape
    return (p_hat.reshape(bsz * length, n) @ w_qv.to(p_hat.dtype)).view(bsz, length, k, c, 2 * r)


def _split(qv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L, K, C, 2r) -> q, v views (B, K, C, L, r)."""
    r = qv.shape[-1] // 2
    qv = qv.permute(0, 2, 3, 1, 4)
    return qv[..., :r], qv[..., r:]


def _window(x: torch.Tensor, i0: int, i1: int, w: int) -> tuple[torch.Tensor, int, int, int]:
    """Rows [i0 - w, i1 + w) of x (..., L, r), zero outside [0, L): (..., b + 2w, r); plus the real rows [lo, hi)
    and the offset a of row lo in the window."""
    length = x.shape[-2]
    lo, hi = max(0, i0 - w), min(length, i1 + w)
    a = lo - (i0 - w)
    return F.pad(x[..., lo:hi, :], (0, 0, a, (i1 + w) - hi)), lo, hi, a


class _BlockwiseMessages(torch.autograd.Function):
    """(P^, W_qv, W_child, W_head) -> (msg_child, msg_head), each (B, L, N); module docstring."""

    @staticmethod
    def forward(ctx, p_hat, w_qv, w_child, w_head, mask, layout, shape, scale, mask_value, block, score_transform):
        bsz, length, n = p_hat.shape
        w, nf = layout.width, layout.n_far
        qv = _project(p_hat, w_qv, shape)
        q, v = _split(qv)
        w_c, w_h = w_child.to(q.dtype), w_head.to(q.dtype)
        v_far = v[:, :nf]
        out_c = p_hat.new_empty(bsz, length, n)
        ctx_h = torch.zeros_like(q)                                                  # (B, K, C, L, r)
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            v_win, lo, hi, a = _window(v[:, nf:], i0, i1, w)                         # (B, nN, C, b + 2w, r)
            c_blk, h_far, h_near = _block(q[..., i0:i1, :], v_far, v_win, mask, layout, i0, i1, scale, mask_value,
                                          score_transform)
            out_c[:, i0:i1] = (_flat(c_blk) @ w_c).view(bsz, i1 - i0, n)
            ctx_h[:, :nf] += h_far
            ctx_h[:, nf:, :, lo:hi] += h_near[..., a: a + hi - lo, :]
        out_h = (_flat(ctx_h) @ w_h).view(bsz, length, n)
        ctx.save_for_backward(p_hat, w_qv, w_child, w_head, mask)
        ctx.args = (layout, shape, scale, mask_value, block, score_transform)
        return out_c, out_h

    @staticmethod
    def backward(ctx, g_c, g_h):
        p_hat, w_qv, w_child, w_head, mask = ctx.saved_tensors
        layout, shape, scale, mask_value, block, score_transform = ctx.args
        bsz, length, n = p_hat.shape
        w, nf = layout.width, layout.n_far
        qv = _project(p_hat, w_qv, shape)                                            # recomputed (B, L, K, C, 2r)
        q, v = _split(qv)
        k_, c_ = q.shape[1], q.shape[2]
        dt = q.dtype
        w_c, w_h = w_child.to(dt), w_head.to(dt)
        g_c, g_h = g_c.to(dt), g_h.to(dt)
        gctx_h = (g_h.reshape(-1, n) @ w_h.t()).view(bsz, length, k_, c_, -1).permute(0, 2, 3, 1, 4)
        g_qv = torch.zeros_like(qv)                                                  # (B, L, K, C, 2r)
        gq, gv = _split(g_qv)                                                        # views (B, K, C, L, r)
        ctx_h = torch.zeros_like(q)                                                  # recomputed, for dW_head
        gw_c = torch.zeros_like(w_c)
        v_far = v[:, :nf].detach().requires_grad_()
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            gc_blk = g_c[:, i0:i1].reshape(-1, n)                                     # (B*b, N)
            gctx_c = (gc_blk @ w_c.t()).view(bsz, i1 - i0, k_, c_, -1).permute(0, 2, 3, 1, 4)
            gh_win = _window(gctx_h[:, nf:], i0, i1, w)[0]                           # (B, nN, C, b + 2w, r)
            with torch.enable_grad():
                q_blk = q[..., i0:i1, :].detach().requires_grad_()
                v_win, lo, hi, a = _window(v[:, nf:].detach(), i0, i1, w)
                v_win.requires_grad_()
                c_blk, h_far, h_near = _block(q_blk, v_far, v_win, mask, layout, i0, i1, scale, mask_value,
                                              score_transform)
                gq_blk, gv_far, gv_win = torch.autograd.grad(
                    (c_blk, h_far, h_near), (q_blk, v_far, v_win), (gctx_c, gctx_h[:, :nf], gh_win),
                    allow_unused=True)
            gq[..., i0:i1, :] += gq_blk
            gv[:, :nf] += gv_far
            if gv_win is not None:
                gv[:, nf:, :, lo:hi] += gv_win[..., a: a + hi - lo, :]
            ctx_h[:, :nf] += h_far.detach()
            ctx_h[:, nf:, :, lo:hi] += h_near.detach()[..., a: a + hi - lo, :]
            gw_c += _flat(c_blk.detach()).t() @ gc_blk
            del c_blk, h_far, h_near, gq_blk, gv_far, gv_win
        gw_h = _flat(ctx_h).t() @ g_h.reshape(-1, n)
        g_flat = g_qv.view(bsz * length, -1)                                         # (B*L, K*C*2r)
        g_p = (g_flat @ w_qv.to(dt).t()).view_as(p_hat)
        g_wqv = p_hat.reshape(bsz * length, n).t() @ g_flat
        return (g_p.to(p_hat.dtype), g_wqv.to(w_qv.dtype), gw_c.to(w_child.dtype), gw_h.to(w_head.dtype),
                None, None, None, None, None, None, None)


def blockwise_messages(p_hat: torch.Tensor, weights: dict, shape: tuple[int, int, int], mask: torch.Tensor,
                       classes, scale: float, mask_value: float, block: int = BLOCK_ROWS, score_transform=None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Child- and head-side Z messages (B, L, N) from P^ (B, L, N) without the (L x L) tensors. weights:
    ``flat_weights(layout_order=True)``; shape: (K, C, r); mask: (B, L) bool, True on real tokens; scale = w_attn *
    s_H; classes: the model's DistanceClass list; ``score_transform``: the model's hook."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    layout = ClassLayout(classes, p_hat.shape[1], p_hat.device)
    return _BlockwiseMessages.apply(p_hat, weights["qv"], weights["child"], weights["head"], mask, layout,
                                    tuple(shape), float(scale), float(mask_value), block, score_transform)
