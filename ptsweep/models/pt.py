"""The Probabilistic Transformer (PT) encoder + MLM head, in SP and muP form ([PT] Wu & Tu 2023; [S] Kuang et al.).

PT is a CRF over per-token labels Z_i in {1..N}, head selections H_i^(c) in {positions != i} for C channels and topic
labels G_i in {1..M}; its mean-field variational inference (MFVI) is the "encoder". Spec references are to
``shared/design/pt-mup-spec.md``; equation names to [S] (the scaling paper).

One iteration t (async order, spec §6.3: H and G from the same Q_z, then Z):

    P      = m * softmax(l^(t-1))                       (B, L, N)   pads zeroed        [spec §3.2 step 1]
    P^     = a_Z * P                                                        (N*Q_z under muP, [S] eq. 7)
    q, v   = U_{k,c}^T P^_i, V_{k,c}^T P^_j             (B, K, C, L, r)                 [spec §6.3 step 2]
    A      = w_attn * s_H * <q_i^{k(i,j),c}, v_j^{k(i,j),c}>   (B, C, L, L)  F_c/r under muP [S] eq. 7
    Q_h    = softmax_j(A masked on j = i and pads)                                       [step 3-4]
    E      = w_topic_g * s_G * B P^_i                   (B, L, M)                          [step 5]
    Q_g    = softmax(E); G^ = a_G * Q_g
    l^(t)  = w_unary S_w + w_child sum_c,j Q_h[c,i,j] U v_j + w_head sum_c,j Q_h[c,j,i] V q_j + w_topic_z B^T G^

The constants (a_Z, a_G, s_H, s_G) switch between SP (original PT: 1, 1, N, N) and muP ([S] + spec §6.2:
N, M, 1/r, M/N). Distance classes k(i,j) (spec §4): for offset d = j - i, cut points (2, 3, 4) give classes
{1},{2},{3},{>=4} per direction, K = 8; the diagonal belongs to no class. Steps 2-4 and the ternary messages run
dense (``pt_dense``) or blockwise (``pt_attention``): ``model.attention_impl``.
Damping, step size and dropout are off by default (spec §3.2). The MLM head is ``W_out RMSNorm_gamma(h) + b_out``
with h = l^(T) (spec §5), evaluated only where a label exists.

Hook points, where a variant of PT (``ptsweep.variants``) changes the update; each is the identity here:

    score_transform(F, valid) -> F'   the pair scores on the logits' scale in place of s_H F:  A = w_attn * F'
    feature_transform(P^) -> P^'      the Z features (every iteration's and the head's; not the topic features)
    z_factor                          a factor on the weighted sum of the messages into Z (before damping)
    topic_factor                      a factor on the topic logits E
    aux_losses[name](iterates, mask)  an auxiliary training loss from the (Q_z^(t), l^(t)) of t = 1..T
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ptsweep.config import PTConfig
from ptsweep.models import pt_attention, pt_dense
from ptsweep.models.pt_constants import MFVIConstants
from ptsweep.parametrization import Role, declare, init_parameters


@dataclass(frozen=True)
class DistanceClass:
    """One relative-distance class: offsets d = j - i with sign ``direction`` and lo <= |d| < hi (hi=None: no bound)."""

    direction: int
    lo: int
    hi: int | None

    @property
    def offsets(self) -> list[int] | None:
        """Signed offsets of a bounded class; None for an unbounded (dense) class."""
        return None if self.hi is None else [self.direction * d for d in range(self.lo, self.hi)]

    def contains(self, offset: torch.Tensor) -> torch.Tensor:
        """Boolean mask of ``offset`` (any shape) falling into this class."""
        mag = offset.abs()
        inside = (torch.sign(offset) == self.direction) & (mag >= self.lo)
        return inside if self.hi is None else inside & (mag < self.hi)


def distance_classes(dists: tuple[int, ...]) -> list[DistanceClass]:
    """Classes [1,d1),[d1,d2),...,[dm,inf) for d > 0 (k = 0..m) then the same for d < 0 (k = m+1..2m+1) (spec §4)."""
    edges = [1, *dists]
    bands = [(edges[i], edges[i + 1]) for i in range(len(dists))] + [(edges[-1], None)]
    return [DistanceClass(s, lo, hi) for s in (+1, -1) for lo, hi in bands]


def class_index(length: int, dists: tuple[int, ...]) -> torch.Tensor:
    """kappa (L, L): class k(i, j) of the pair (child i, head j); -1 on the diagonal (brute force, for tests)."""
    offset = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (L, L): j - i
    kappa = torch.full((length, length), -1, dtype=torch.long)
    for k, cls in enumerate(distance_classes(dists)):
        kappa[cls.contains(offset)] = k
    return kappa


def pt_param_count(cfg: PTConfig, vocab_size: int) -> dict[str, int]:
    """P(N) = 2VN + V + N + 2KCrN + MN (spec §9): S and W_out; b_out; gamma; U and V; B.

    non_embedding drops the vocabulary-sized tensors S, W_out and b_out."""
    n, k, c, r, m = cfg.width, cfg.n_classes, cfg.channels, cfg.rank, cfg.topics
    non_embedding = n + 2 * k * c * r * n + m * n
    return {"total": 2 * vocab_size * n + vocab_size + non_embedding, "non_embedding": non_embedding}


def pt_flops_per_token(cfg: PTConfig, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> float:
    """Analytic forward+backward FLOPs per input token (backward = 2x forward; 1 multiply-add = 2 FLOPs).

    Per MFVI iteration and token (multiply-adds): projections q, v for all K classes 2KCNr; projecting the two
    message contexts back through U and V 2KCrN; attention scores + child and head messages 3CLr (each pair uses
    one class); topic logits and topic message 2MN. Head: the decoder VN at the masked fraction only. Softmaxes,
    norms and elementwise work are excluded."""
    n, k, c, r, m = cfg.width, cfg.n_classes, cfg.channels, cfg.rank, cfg.topics
    per_iter = 4 * k * c * n * r + 3 * c * seq_len * r + 2 * m * n
    forward_macs = cfg.n_iters * per_iter + mask_prob * vocab_size * n
    return 3.0 * 2.0 * forward_macs


def _softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis; in float32 for half-precision inputs (spec §12.1), else in x's own dtype."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return torch.softmax(x.float(), dim=-1).to(x.dtype)
    return torch.softmax(x, dim=-1)


def _mix(prev: torch.Tensor | None, new: torch.Tensor, w_prev: float, w_new: float) -> torch.Tensor:
    """w_prev * prev + w_new * new (damping of logits, step size of distributions, spec §3.2); ``new`` when there is
    no ``prev`` yet or w_prev = 0."""
    return new if prev is None or w_prev == 0 else w_prev * prev + w_new * new


def _sp_normal(std: float):
    return lambda p: nn.init.normal_(p, 0.0, std)


def _sp_uniform(bound: float):
    return lambda p: nn.init.uniform_(p, -bound, bound)


class ProbabilisticTransformer(nn.Module):
    """PT encoder (MFVI over Z, H, G) + RMSNorm/decoder MLM head. See the module docstring for the update."""

    def __init__(self, cfg: PTConfig, vocab_size: int):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.width = cfg.width
        self.parametrization = cfg.parametrization
        self.vocab_size = vocab_size
        n, k, c, r, m, v = cfg.width, cfg.n_classes, cfg.channels, cfg.rank, cfg.topics, vocab_size
        self.classes = distance_classes(cfg.dists)
        self.const = MFVIConstants.of(cfg, vocab_size)
        self.score_transform = self.feature_transform = None  # hook points (module docstring)
        self.z_factor = self.topic_factor = 1.0
        self.aux_losses: dict = {}

        # Roles ([S] Table 1), the original PT's SP init (spec §3.4, §8 last bullet) and the muP base-shape constants
        # of init and LR (MFVIConstants) are declared at creation.
        const = self.const
        self.unary = declare(nn.Parameter(torch.empty(v, n)), Role.INPUT,
                             _sp_uniform(math.sqrt(6.0 / (v + n))), const.init_s, const.lr_s)  # S: xavier (SP)
        self.U = declare(nn.Parameter(torch.empty(k, c, n, r)), Role.HIDDEN, _sp_normal(1 / math.sqrt(r)), const.init_u,
                         const.lr_uv)
        self.V = declare(nn.Parameter(torch.empty(k, c, n, r)), Role.HIDDEN, _sp_normal(1 / math.sqrt(r)), const.init_v,
                         const.lr_uv)
        self.B = declare(nn.Parameter(torch.empty(m, n)), Role.HIDDEN, _sp_normal(1 / math.sqrt(n)), const.init_b,
                         const.lr_b)
        self.head_gain = declare(nn.Parameter(torch.empty(n)), Role.GAIN, nn.init.ones_)
        self.head_weight = declare(nn.Parameter(torch.empty(v, n)), Role.OUTPUT, _sp_uniform(1 / math.sqrt(n)),
                                   const.init_out, const.lr_out)
        self.head_bias = declare(nn.Parameter(torch.empty(v)), Role.BIAS, _sp_uniform(1 / math.sqrt(n)))
        init_parameters(self, n, cfg.parametrization)

    # ------------------------------------------------------------------ single updates (pure in their inputs)
    def features(self, q_z: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        """P^ = a_Z * Q_z - center * sum(Q_z) (B, L, N): distributions as features ([S] eq. 7: N Q_z under muP).
        center = 1 ('mup') is the CRF with double-centred factors T~ = P T P (P = I - 11^T/N). ``scale``: another
        multiplier than a_Z (then no ``feature_transform``)."""
        p_hat = (self.const.a_z if scale is None else scale) * q_z
        if self.const.center:
            p_hat = p_hat - self.const.center * q_z.sum(-1, keepdim=True)
        return self.feature_transform(p_hat) if scale is None and self.feature_transform is not None else p_hat

    def topic_features(self, q_g: torch.Tensor) -> torch.Tensor:
        """G^ = a_G * Q_g - center * sum(Q_g) (B, L, M): the topic distribution as a feature (M Q_g under muP)."""
        return self.features(q_g, self.const.a_g)

    def flat_weights(self, layout_order: bool = False) -> dict[str, torch.Tensor]:
        """U, V laid out for flat matmuls, once per forward: ``q`` / ``v`` (N, K*C*r) and ``child`` / ``head``
        (K*C*r, N). ``layout_order``: the blockwise path's, classes far-first and one ``qv`` (N, K*C*2r)."""
        k, c, n, r = self.U.shape
        u, v = self.U, self.V
        if layout_order:
            order = torch.tensor(pt_attention.layout_order(self.classes), device=u.device)
            u, v = u[order], v[order]
        out = {"child": u.transpose(-1, -2).reshape(-1, n),   # (K, C, r, N) -> (K*C*r, N)
               "head": v.transpose(-1, -2).reshape(-1, n)}
        if layout_order:
            out["qv"] = torch.cat([u, v], dim=-1).permute(2, 0, 1, 3).reshape(n, k * c * 2 * r)
        else:
            out["q"], out["v"] = (x.permute(2, 0, 1, 3).reshape(n, k * c * r) for x in (u, v))
        return out

    def projections(self, p_hat: torch.Tensor, weights: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """q = U^T P^, v = V^T P^ for every class and channel: each (B, K, C, L, r), views of two flat (B*L, N) x
        (N, K*C*r) matmuls. ``weights``: ``flat_weights()`` (built here when None)."""
        bsz, length, n = p_hat.shape
        k, c, _, r = self.U.shape
        weights = weights or self.flat_weights()
        flat = p_hat.reshape(bsz * length, n)
        return tuple((flat @ weights[key]).view(bsz, length, k, c, r).permute(0, 2, 3, 1, 4) for key in ("q", "v"))

    def _layout(self, length: int, device) -> pt_dense.DenseLayout:
        return pt_dense.dense_layout(tuple(self.classes), length, torch.device(device))

    def valid_pairs(self, mask: torch.Tensor) -> torch.Tensor:
        """(B, 1, L, L) True where child i and head j are both real tokens and j != i."""
        length = mask.shape[1]
        eye = torch.eye(length, dtype=torch.bool, device=mask.device)
        return (mask[:, :, None] & mask[:, None, :] & ~eye)[:, None]

    def attention_scale(self) -> float:
        """The factor on the pair scores F: w_attn * s_H, or w_attn alone with a ``score_transform``."""
        return self.cfg.w_attn * (1.0 if self.score_transform is not None else self.const.s_h)

    def attention_logits(self, q: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """A = w_attn * s_H * F (B, C, L, L) before masking (spec §6.3 step 3), F[b,c,i,j] = <q_i^{k(i,j),c},
        v_j^{k(i,j),c}>; with a ``score_transform``, A = w_attn * score_transform(F, valid pairs of ``mask``)."""
        scores = pt_dense.pair_scores(q, v, self._layout(q.shape[-2], q.device))
        if self.score_transform is not None:
            if mask is None:
                raise ValueError("attention_logits: a score transform needs the attention mask")
            scores = self.score_transform(scores, self.valid_pairs(mask.bool()))
        return self.attention_scale() * scores

    def mask_logits(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Forbid j = i and any pair with a pad, with a large finite negative (never -inf: spec §12.1)."""
        return torch.where(self.valid_pairs(mask), logits, torch.full_like(logits, self.cfg.mask_value))

    def topic_logits(self, p_hat: torch.Tensor) -> torch.Tensor:
        """E = w_topic_g * s_G * B P^ (B, L, M): the binary message to G (spec §6.3 step 5), times ``topic_factor``."""
        scale = self.cfg.w_topic_g * self.const.s_g
        return (scale if self.topic_factor == 1.0 else scale * self.topic_factor) * (p_hat @ self.B.t())

    def z_messages(self, input_ids: torch.Tensor, mask: torch.Tensor, q: torch.Tensor, v: torch.Tensor,
                   q_h: torch.Tensor | None, g_hat: torch.Tensor, weights: dict | None = None,
                   p_hat: torch.Tensor | None = None, unary: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The four messages into Z (each (B, L, N), unweighted; spec §6.3 step 6): unary S_w; child side
        sum_c,j Q_h[c,i,j] U_{k(i,j),c} v_j; head side sum_c,j Q_h[c,j,i] V_{k(j,i),c} q_j; topic B^T G^_i.
        ``q_h=None``: the blockwise path, from ``p_hat``."""
        weights = weights or self.flat_weights(layout_order=q_h is None)
        unary = self.unary_message(input_ids, mask) if unary is None else unary    # (B, L, N)
        topic = g_hat @ self.B                                                       # (B, L, N)
        k, c, n, r = self.U.shape
        scale = self.attention_scale()
        if q_h is None:
            child, head = pt_attention.blockwise_messages(p_hat, weights, (k, c, r), mask.bool(), self.classes,
                                                          scale, self.cfg.mask_value,
                                                          score_transform=self.score_transform)
        else:
            bsz, length = q.shape[0], q.shape[3]
            ctx_child, ctx_head = pt_dense.contexts(q_h, q, v, self._layout(length, q.device))  # (B*L, K*C*r) each
            child = (ctx_child @ weights["child"]).view(bsz, length, n)                 # (B, L, N)
            head = (ctx_head @ weights["head"]).view(bsz, length, n)
        return {"unary": unary, "child": child, "head": head, "topic": topic}

    def unary_message(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """m * S_w (B, L, N): the unary message into Z, zero on pads."""
        return F.embedding(input_ids, self.unary) * mask[..., None].to(self.unary.dtype)

    def message_weights(self) -> dict[str, float]:
        """The information weight of each message path into Z that is on (``model.messages_off`` left out)."""
        c = self.cfg
        weights = {"unary": c.w_unary, "child": c.w_child, "head": c.w_head, "topic": c.w_topic_z}
        return {name: w for name, w in weights.items() if name not in c.messages_off}

    def combine_z(self, msgs: dict[str, torch.Tensor]) -> torch.Tensor:
        """New Z logits (B, L, N): the information-weighted sum of the messages, times ``z_factor``."""
        total = sum(w * msgs[name] for name, w in self.message_weights().items())
        return total if self.z_factor == 1.0 else self.z_factor * total

    # ------------------------------------------------------------------ full inference
    def initial_logits(self, input_ids: torch.Tensor, maskf: torch.Tensor) -> torch.Tensor:
        """l^(0) = m * S_w (B, L, N) (spec §3.2; [PT] eq. 7). ``F.embedding``, not indexing: the indexing's backward
        sums repeated tokens in a different order on every call with 2+ CPU threads; the embedding's repeats."""
        return F.embedding(input_ids, self.unary) * maskf

    def mfvi(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             trace: list[dict] | None = None, aux: dict | None = None) -> torch.Tensor:
        """Run ``n_iters`` async MFVI iterations; return the final Z logits l^(T) (B, L, N). ``trace``: a list that
        gets one dict of distributions and intermediates per iteration; ``aux``: a dict for the auxiliary losses."""
        c = self.cfg
        mask = attention_mask.bool()
        maskf = mask[..., None].to(self.unary.dtype)
        logits = self.initial_logits(input_ids, maskf)       # l^(0) = S_w (B, L, N)
        attn = topic = None                                  # damping memory (initial H/G logits: constant -> 0)
        q_z = q_h = q_g = None                               # step-size memory
        blockwise = trace is None and c.use_blockwise(input_ids.device.type)
        weights = self.flat_weights(blockwise)               # once per forward, shared by all iterations
        unary = self.unary_message(input_ids, mask)          # likewise (one embedding gather and scatter per step)
        iterates = [] if aux is not None and self.aux_losses else None   # (Q_z^(t), l^(t)) for the aux losses
        for _ in range(c.n_iters):
            # 1. normalise Z (fp32 softmax for half precision only), optional step size, zero the pads
            q_z = _mix(q_z, _softmax(logits), 1 - c.stepsize_z, c.stepsize_z) * maskf
            p_hat = self.features(q_z)
            # blockwise: q, v and Q_h are computed (and recomputed for backward) inside z_messages, block by block
            q, v = (None, None) if blockwise else self.projections(p_hat, weights)
            # 2-4. H: attention logits, damping, masks, softmax over heads j, step size, dropout
            if not blockwise:
                attn = _mix(attn, self.attention_logits(q, v, mask), c.damping_h, 1 - c.damping_h)
                q_h = _mix(q_h, _softmax(self.mask_logits(attn, mask)), 1 - c.stepsize_h, c.stepsize_h)
                q_h = F.dropout(q_h, c.dropout, self.training)
            # 5. G: topic logits from the same Q_z
            topic = _mix(topic, self.topic_logits(p_hat), c.damping_h, 1 - c.damping_h)
            q_g = _mix(q_g, _softmax(topic), 1 - c.stepsize_h, c.stepsize_h)
            q_g = F.dropout(q_g, c.dropout, self.training)
            # 6. Z: weighted messages, damping, dropout on the logits
            msgs = self.z_messages(input_ids, mask, q, v, q_h, self.topic_features(q_g), weights, p_hat=p_hat,
                                   unary=unary)
            logits = _mix(logits, self.combine_z(msgs), c.z_damping, 1 - c.z_damping)
            logits = F.dropout(logits, c.dropout, self.training)
            if iterates is not None:
                iterates.append((q_z, logits))
            if trace is not None:
                trace.append({"q_z": q_z, "q_h": q_h, "q_g": q_g, "p_hat": p_hat, "q": q, "v": v,
                              "attn_logits": attn, "topic_logits": topic, "z_logits": logits,
                              **{f"msg_{name}": m for name, m in msgs.items()}})
        if iterates:
            aux.update({name: loss(iterates, mask) for name, loss in self.aux_losses.items()})
        return logits

    # ------------------------------------------------------------------ MLM interface
    @property
    def loss_terms(self) -> tuple[str, ...]:
        """Names of the auxiliary loss terms a forward with ``aux`` adds (none without MFVI iterations)."""
        return tuple(self.aux_losses) if self.cfg.n_iters else ()

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               trace: list[dict] | None = None, aux: dict | None = None) -> torch.Tensor:
        """Encoder output h (B, L, N): l^(T) (default) or a_Z * softmax(l^(T)) (``head_input='probs'``)."""
        logits = self.mfvi(input_ids, attention_mask, trace, aux)
        if self.cfg.head_input == "probs":
            return self.features(_softmax(logits))
        return logits

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """logits = W_out RMSNorm_gamma(h) + b_out (spec §5), for the selected positions only: (n, N) -> (n, V)."""
        h = hidden.float() if hidden.dtype in (torch.float16, torch.bfloat16) else hidden  # float64 stays float64
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.rms_eps)
        h = (h * self.head_gain).to(hidden.dtype)
        return F.linear(h, self.head_weight, self.head_bias)

    @torch.no_grad()
    def inspect(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> list[dict]:
        """Notebook API: per-iteration Q_z (B,L,N), Q_h (B,C,L,L), Q_g (B,L,M) and intermediates, in eval mode."""
        was_training = self.training
        self.eval()
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        trace: list[dict] = []
        try:
            self.mfvi(input_ids, attention_mask, trace)
        finally:
            self.train(was_training)
        return trace
