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


def _block(q, v, q_blk, mask, layout: ClassLayout, i0: int, i1: int, scale: float, mask_value: float):
    """Contexts of child rows [i0, i1): child (B, K, C, b, r) and this block's head-side partial (B, K, C, L, r).

    q, v: (B, K, C, L, r); q_blk = q[..., i0:i1, :]; mask: (B, L) bool, True on real tokens."""
    bsz, n_cls, chans, length, rank = q.shape
    b = i1 - i0
    not_diag = layout.offset[i0:i1] != 0                                             # (b, L)
    valid_blk = (mask[:, i0:i1, None] & mask[:, None, :] & not_diag)[:, None]        # (B, 1, b, L)
    scores = q.new_zeros(bsz, chans, b, length)
    if layout.far_member is not None:
        fk = layout.far_ks
        mem_far = layout.far_member[:, i0:i1]                                        # (nF, b, L)
        s_far = q_blk[:, fk] @ v[:, fk].transpose(-1, -2)                            # (B, nF, C, b, L)
        scores = scores + torch.where(mem_far[None, :, None], s_far, 0.0).sum(1)
    j0, j1 = layout.window(i0, i1)
    if len(layout.near_ks):
        nk = layout.near_ks
        mem_near = layout.near_member(i0, i1)                                        # (nN, b, W)
        v_win = v[:, nk, :, j0:j1]                                                   # (B, nN, C, W, r)
        s_near = torch.where(mem_near[None, :, None], q_blk[:, nk] @ v_win.transpose(-1, -2), 0.0).sum(1)
        scores = scores + torch.nn.functional.pad(s_near, (j0, length - j1))         # (B, C, b, L)
    logits = torch.where(valid_blk, scale * scores, mask_value)
    r_blk = torch.softmax(logits.float(), dim=-1).to(q.dtype)                      # (B, C, b, L): Q_h rows
    parts_c, parts_h = [], []
    if layout.far_member is not None:
        r_far = torch.where(mem_far[None, :, None], r_blk[:, None], 0.0)             # (B, nF, C, b, L)
        parts_c.append(r_far @ v[:, fk])                                             # (B, nF, C, b, r)
        parts_h.append(r_far.transpose(-1, -2) @ q_blk[:, fk])                       # (B, nF, C, L, r)
    if len(layout.near_ks):
        r_near = torch.where(mem_near[None, :, None], r_blk[:, None, :, :, j0:j1], 0.0)  # (B, nN, C, b, W)
        parts_c.append(r_near @ v_win)                                               # (B, nN, C, b, r)
        h_near = r_near.transpose(-1, -2) @ q_blk[:, nk]                             # (B, nN, C, W, r)
        parts_h.append(torch.nn.functional.pad(h_near, (0, 0, j0, length - j1)))     # (B, nN, C, L, r)
    order = torch.cat([layout.far_ks, layout.near_ks]).argsort()                     # back to class order k
    child = torch.cat(parts_c, 1)[:, order]                                          # (B, K, C, b, r)
    head = torch.cat(parts_h, 1)[:, order]                                           # (B, K, C, L, r)
    return child, head


def _flat(ctx: torch.Tensor) -> torch.Tensor:
    """(B, K, C, L, r) -> (B*L, K*C*r), the layout of the flat back-projection weights."""
    bsz, _, _, length, _ = ctx.shape
    return ctx.permute(0, 3, 1, 2, 4).reshape(bsz * length, -1)


def _unflat(g: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of ``_flat`` for a gradient: (B*L, K*C*r) -> (B, K, C, L, r)."""
    bsz, n_cls, chans, length, rank = like.shape
    return g.view(bsz, length, n_cls, chans, rank).permute(0, 2, 3, 1, 4)


class _BlockwiseMessages(torch.autograd.Function):
    """(q, v, W_child, W_head) -> (msg_child, msg_head), each (B, L, N); saves q, v only (module docstring)."""

    @staticmethod
    def forward(ctx, q, v, w_child, w_head, mask, layout, scale, mask_value, block):
        bsz, _, _, length, _ = q.shape
        ctx_c, ctx_h = torch.empty_like(q), torch.zeros_like(q)                      # (B, K, C, L, r)
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            c_blk, h_blk = _block(q, v, q[..., i0:i1, :], mask, layout, i0, i1, scale, mask_value)
            ctx_c[..., i0:i1, :] = c_blk
            ctx_h += h_blk
        ctx.save_for_backward(q, v, w_child, w_head, mask)
        ctx.args = (layout, scale, mask_value, block)
        n = w_child.shape[-1]
        out_c = (_flat(ctx_c) @ w_child.to(q.dtype)).view(bsz, length, n)
        out_h = (_flat(ctx_h) @ w_head.to(q.dtype)).view(bsz, length, n)
        return out_c, out_h

    @staticmethod
    def backward(ctx, g_c, g_h):
        q, v, w_child, w_head, mask = ctx.saved_tensors
        layout, scale, mask_value, block = ctx.args
        length = q.shape[-2]
        g_c = g_c.reshape(-1, g_c.shape[-1]).to(q.dtype)                             # (B*L, N)
        g_h = g_h.reshape(-1, g_h.shape[-1]).to(q.dtype)
        gctx_c = _unflat(g_c @ w_child.to(q.dtype).t(), q)                           # (B, K, C, L, r)
        gctx_h = _unflat(g_h @ w_head.to(q.dtype).t(), q)
        ctx_c, ctx_h = torch.empty_like(q), torch.zeros_like(q)                      # recomputed, for dW
        gq, gv = torch.zeros_like(q), torch.zeros_like(v)
        for i0 in range(0, length, block):
            i1 = min(length, i0 + block)
            with torch.enable_grad():
                qd, vd = q.detach().requires_grad_(), v.detach().requires_grad_()
                c_blk, h_blk = _block(qd, vd, qd[..., i0:i1, :], mask, layout, i0, i1, scale,
                                      mask_value)
                dq, dv = torch.autograd.grad((c_blk, h_blk), (qd, vd), (gctx_c[..., i0:i1, :], gctx_h))
            gq += dq
            gv += dv
            ctx_c[..., i0:i1, :] = c_blk.detach()
            ctx_h += h_blk.detach()
        gw_c = (_flat(ctx_c).t() @ g_c).to(w_child.dtype)                            # (K*C*r, N)
        gw_h = (_flat(ctx_h).t() @ g_h).to(w_head.dtype)
        return gq, gv, gw_c, gw_h, None, None, None, None, None


def blockwise_messages(q: torch.Tensor, v: torch.Tensor, w_child: torch.Tensor, w_head: torch.Tensor,
                       mask: torch.Tensor, classes, scale: float, mask_value: float,
                       block: int = BLOCK_ROWS) -> tuple[torch.Tensor, torch.Tensor]:
    """Child- and head-side Z messages (B, L, N) from q, v (B, K, C, L, r) without the (L x L) tensors.

    w_child / w_head: U / V as flat back-projections (K*C*r, N); mask: (B, L) bool, True on real tokens (pairs with
    a pad and j = i get ``mask_value``, as ``mask_logits``); scale = w_attn * s_H; classes: the model's DistanceClass list."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    layout = ClassLayout(classes, q.shape[-2], q.device)
    return _BlockwiseMessages.apply(q, v, w_child, w_head, mask, layout, float(scale), float(mask_value), block)
