"""PT's head-selection softmax and ternary Z messages with memory linear in L (``model.attention_impl=blockwise``).

The dense reference (``ProbabilisticTransformer.attention_logits`` / ``mask_logits`` / ``z_messages``) keeps the
(B, C, L, L) scores, masks, softmax and per-class restrictions of every MFVI iteration for backward: O(L^2) per
sequence. Here the same quantities (spec §6.3 steps 3-4 and 6) are computed for blocks of ``block`` child rows i
against all heads j, so each block holds complete rows and its row softmax is exact in one pass:

    S[i, j]      = sum_k 1[k(i,j)=k] <q_i^{k,c}, v_j^{k,c}>          far classes: (b x L) products; near classes
                                                                     (bounded offsets): (b x window) products
    R[i, :]      = softmax_j(where(valid[i,j], w_attn s_H S[i,j], mask_value))       (fp32 softmax, as the reference)
    child[i, k]  = sum_j R[i,j] 1[k(i,j)=k] v_j^k              (row-softmax attention, per class)
    head[j, k]  += sum_{i in block} R[i,j] 1[k(i,j)=k] q_i^k   (transposed attention, accumulated over blocks)
    msg_child    = ctx_child (B*L, K*C*r) @ W_child (K*C*r, N);  msg_head likewise with W_head

Only q, v (B, K, C, L, r) (which the projection produced anyway) are saved for backward; the backward pass
recomputes each row block under autograd (``torch.autograd.grad`` on the block's small graph) - recomputation, not
storage, of the O(b x L) intermediates - so saved memory per sequence and iteration is linear in L. The
back-projection is inside the function so the (B, L, K*C*r) contexts are not saved either.

Not supported here (they need the dense Q_h): dropout, damping and step size on H; ``PTConfig.validate`` rejects
``attention_impl=blockwise`` together with them and ``attention_impl=auto`` uses the dense path for them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BLOCK_ROWS = 64  # child rows per block: transient memory O(B * C * BLOCK_ROWS * L) per block


class ClassLayout:
    """Membership masks of the distance classes for one length L (spec §4), split into far (unbounded, all L
    columns) and near (bounded offsets |d| <= w: only a (b, b + 2w) window of columns around the block's diagonal).

    far_ks / near_ks: class ids (long); far_member (n_far, L, L) and near_member(i0, i1) -> (n_near, b, window)."""

    def __init__(self, classes, length: int, device):
        pos = torch.arange(length, device=device)
        offset = pos[None, :] - pos[:, None]  # (L, L): j - i
        far = [k for k, c in enumerate(classes) if c.offsets is None]
        near = [k for k, c in enumerate(classes) if c.offsets is not None]
        self.length = length
        self.n_classes = len(classes)
        self.width = max((abs(d) for k in near for d in classes[k].offsets), default=0)
        self.far_ks = torch.tensor(far, dtype=torch.long, device=device)
        self.near_ks = torch.tensor(near, dtype=torch.long, device=device)
        self.far_member = torch.stack([classes[k].contains(offset) for k in far]) if far else None
        self._near = [classes[k] for k in near]
        self.offset = offset

    def window(self, i0: int, i1: int) -> tuple[int, int]:
        """Columns [j0, j1) that can hold a near-class head of a child in [i0, i1)."""
        return max(0, i0 - self.width), min(self.length, i1 + self.width)

    def near_member(self, i0: int, i1: int) -> torch.Tensor:
        j0, j1 = self.window(i0, i1)
        off = self.offset[i0:i1, j0:j1]
        return torch.stack([c.contains(off) for c in self._near])  # (n_near, b, window)


def _block(q_blk, v_far, v_win, mask, layout: ClassLayout, i0: int, i1: int, scale: float, mask_value: float):
    """Contexts of child rows [i0, i1): child (B, K, C, b, r) and this block's head-side partial (B, K, C, L, r).

    q_blk: (B, K, C, b, r) = q[..., i0:i1, :]; v_far: (B, nF, C, L, r) = v of the far classes; v_win: (B, nN, C, W, r)
    = v of the near classes on the window columns ``layout.window(i0, i1)``; mask: (B, L) bool, True on real tokens."""
    bsz, _, chans, b, rank = q_blk.shape
    length = layout.length
    not_diag = layout.offset[i0:i1] != 0                                             # (b, L)
    valid_blk = (mask[:, i0:i1, None] & mask[:, None, :] & not_diag)[:, None]        # (B, 1, b, L)
    fk, nk = layout.far_ks, layout.near_ks
    scores = q_blk.new_zeros(bsz, chans, b, length)
    if len(fk):
        mem_far = layout.far_member[:, i0:i1][None, :, None]                         # (1, nF, 1, b, L)
        s_far = q_blk[:, fk] @ v_far.transpose(-1, -2)                               # (B, nF, C, b, L)
        scores = scores + torch.where(mem_far, s_far, 0.0).sum(1)
    j0, j1 = layout.window(i0, i1)
    if len(nk):
        mem_near = layout.near_member(i0, i1)[None, :, None]                         # (1, nN, 1, b, W)
        s_near = torch.where(mem_near, q_blk[:, nk] @ v_win.transpose(-1, -2), 0.0).sum(1)
        scores = scores + F.pad(s_near, (j0, length - j1))                           # (B, C, b, L)
    logits = torch.where(valid_blk, scale * scores, mask_value)
    r_blk = torch.softmax(logits.float(), dim=-1).to(q_blk.dtype)                  # (B, C, b, L): Q_h rows
    parts_c, parts_h = [], []
    if len(fk):
        r_far = torch.where(mem_far, r_blk[:, None], 0.0)                            # (B, nF, C, b, L)
        parts_c.append(r_far @ v_far)                                                # (B, nF, C, b, r)
        parts_h.append(r_far.transpose(-1, -2) @ q_blk[:, fk])                       # (B, nF, C, L, r)
    if len(nk):
        r_near = torch.where(mem_near, r_blk[:, None, :, :, j0:j1], 0.0)             # (B, nN, C, b, W)
        parts_c.append(r_near @ v_win)                                               # (B, nN, C, b, r)
        h_near = r_near.transpose(-1, -2) @ q_blk[:, nk]                             # (B, nN, C, W, r)
        parts_h.append(F.pad(h_near, (0, 0, j0, length - j1)))                       # (B, nN, C, L, r)
    order = torch.cat([fk, nk]).argsort()                                            # back to class order k
    return torch.cat(parts_c, 1)[:, order], torch.cat(parts_h, 1)[:, order]


def _flat(ctx: torch.Tensor) -> torch.Tensor:
    """(B, K, C, L, r) -> (B*L, K*C*r), the layout of the flat back-projection weights."""
    bsz, _, _, length, _ = ctx.shape
    return ctx.permute(0, 3, 1, 2, 4).reshape(bsz * length, -1)


def _project(p_hat: torch.Tensor, w_qv: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    """qv = P^ W_qv: (B, L, N) -> (B, L, K, C, 2r), contiguous (the layout of ``ProbabilisticTransformer.projections``)."""
    bsz, length, n = p_hat.shape
    k, c, r = shape
    return (p_hat.reshape(bsz * length, n) @ w_qv.to(p_hat.dtype)).view(bsz, length, k, c, 2 * r)


def _split(qv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L, K, C, 2r) -> q, v views (B, K, C, L, r)."""
    r = qv.shape[-1] // 2
    qv = qv.permute(0, 2, 3, 1, 4)
    return qv[..., :r], qv[..., r:]


class _BlockwiseMessages(torch.autograd.Function):
    """(P^, W_qv, W_child, W_head) -> (msg_child, msg_head), each (B, L, N). Saves P^ (and qv if ``save_qv``);
    backward recomputes qv (unless saved) and each row block (module docstring)."""

    @staticmethod
    def forward(ctx, p_hat, w_qv, w_child, w_head, mask, layout, shape, scale, mask_value, block, save_qv):
        bsz, length, n = p_hat.shape
        qv = _project(p_hat, w_qv, shape)
        q, v = _split(qv)
        w_c, w_h = w_child.to(q.dtype), w_head.to(q.dtype)
        fk, nk = layout.far_ks, layout.near_ks
        v_far = v[:, fk]                                                             # (B, nF, C, L, r)
        out_c = p_hat.new_empty(bsz, length, n)
        ctx_h = torch.zeros_like(q)                                                  # (B, K, C, L, r)
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            j0, j1 = layout.window(i0, i1)
            c_blk, h_blk = _block(q[..., i0:i1, :], v_far, v[:, nk, :, j0:j1], mask, layout, i0, i1, scale,
                                  mask_value)
            out_c[:, i0:i1] = (_flat(c_blk) @ w_c).view(bsz, i1 - i0, n)
            ctx_h += h_blk
        out_h = (_flat(ctx_h) @ w_h).view(bsz, length, n)
        ctx.save_for_backward(p_hat, w_qv, w_child, w_head, mask, qv if save_qv else None)
        ctx.args = (layout, shape, scale, mask_value, block)
        return out_c, out_h

    @staticmethod
    def backward(ctx, g_c, g_h):
        p_hat, w_qv, w_child, w_head, mask, qv = ctx.saved_tensors
        layout, shape, scale, mask_value, block = ctx.args
        bsz, length, n = p_hat.shape
        if qv is None:
            qv = _project(p_hat, w_qv, shape)                                        # recomputed (B, L, K, C, 2r)
        q, v = _split(qv)
        dt = q.dtype
        w_c, w_h = w_child.to(dt), w_head.to(dt)
        g_c, g_h = g_c.to(dt), g_h.to(dt)
        fk, nk = layout.far_ks, layout.near_ks
        gctx_h = (g_h.reshape(-1, n) @ w_h.t()).view(bsz, length, *q.shape[1:3], -1).permute(0, 2, 3, 1, 4)
        g_qv = torch.zeros_like(qv)                                                  # (B, L, K, C, 2r)
        gq, gv = _split(g_qv)                                                        # views (B, K, C, L, r)
        ctx_h = torch.zeros_like(q)                                                  # recomputed, for dW_head
        gw_c = torch.zeros_like(w_c)
        v_far_d = v[:, fk].detach().requires_grad_()
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            j0, j1 = layout.window(i0, i1)
            gc_blk = g_c[:, i0:i1].reshape(-1, n)                                     # (B*b, N)
            gctx_c = (gc_blk @ w_c.t()).view(bsz, i1 - i0, *q.shape[1:3], -1).permute(0, 2, 3, 1, 4)
            with torch.enable_grad():
                q_blk = q[..., i0:i1, :].detach().requires_grad_()
                v_win = v[:, nk, :, j0:j1].detach().requires_grad_()
                c_blk, h_blk = _block(q_blk, v_far_d, v_win, mask, layout, i0, i1, scale, mask_value)
                leaves = (q_blk, v_far_d, v_win) if len(nk) else (q_blk, v_far_d)
                grads = torch.autograd.grad((c_blk, h_blk), leaves, (gctx_c, gctx_h), allow_unused=True)
            gq[..., i0:i1, :] += grads[0]
            if grads[1] is not None:
                gv.index_add_(1, fk, grads[1])
            if len(nk) and grads[2] is not None:
                gv[..., j0:j1, :].index_add_(1, nk, grads[2])
            ctx_h += h_blk.detach()
            gw_c += _flat(c_blk.detach()).t() @ gc_blk
        gw_h = _flat(ctx_h).t() @ g_h.reshape(-1, n)
        g_flat = g_qv.view(bsz * length, -1)                                         # (B*L, K*C*2r)
        g_p = (g_flat @ w_qv.to(dt).t()).view_as(p_hat)
        g_wqv = p_hat.reshape(bsz * length, n).t() @ g_flat
        return (g_p.to(p_hat.dtype), g_wqv.to(w_qv.dtype), gw_c.to(w_child.dtype), gw_h.to(w_head.dtype),
                None, None, None, None, None, None, None)


def blockwise_messages(p_hat: torch.Tensor, weights: dict, shape: tuple[int, int, int], mask: torch.Tensor,
                       classes, scale: float, mask_value: float, block: int = BLOCK_ROWS,
                       save_qv: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Child- and head-side Z messages (B, L, N) from P^ (B, L, N) without the (L x L) tensors.

    weights: ``ProbabilisticTransformer.flat_weights()`` (qv (N, K*C*2r), child / head (K*C*r, N)); shape: (K, C, r);
    mask: (B, L) bool, True on real tokens (pairs with a pad and j = i get ``mask_value``, as ``mask_logits``);
    scale = w_attn * s_H; classes: the model's DistanceClass list; save_qv: keep q, v for backward instead of
    recomputing them (faster, 2*K*C*r floats more per token and iteration)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    layout = ClassLayout(classes, p_hat.shape[1], p_hat.device)
    return _BlockwiseMessages.apply(p_hat, weights["qv"], weights["child"], weights["head"], mask, layout,
                                    tuple(shape), float(scale), float(mask_value), block, save_qv)
