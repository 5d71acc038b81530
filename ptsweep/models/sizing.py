"""Model sizes: closed-form parameter counts, analytic FLOPs per token, head rule and width matching (spec §9, §11).

Parameter counts (unique parameters, the tied decoder once; V = vocab, d = width, P = max_positions, L = n_layers,
f = ModernBERT's GeGLU inner width): word + position + token-type tables and embedding LN; per layer Q, K, V, O
(4 d^2 + 4 d), FFN (8 d^2 + 5 d) and two LNs; MLM head dense + LN + decoder bias (ModernBERT: no biases, no
position table, no attention LN in its first layer, a final LN):

    P_BERT = (V + P + 2) d + 2 d + L (12 d^2 + 13 d) + d^2 + 3 d + V
    P_UT   = (V + P + 2) d + 2 d + (12 d^2 + 13 d) + L d (timestep table) + d^2 + 3 d + V
    P_MB   = V d + L (4 d^2 + 3 d f + 2 d) + d^2 + 2 d + V

"non_embedding" removes the word, position and token-type tables ((V + P + 2) d; ModernBERT: V d).

FLOPs per token (training = 3 x forward; a matmul of m x k by k x n counts 2 m k n), S = seq_len:

    BERT / UT    forward/token = L (24 d^2 + 4 S d) + mask_prob (2 d^2 + 2 d V)
    ModernBERT   forward/token = L (8 d^2 + 6 d f + 4 S d) + mask_prob (2 d^2 + 2 d V)

24 d^2 = Q, K, V, O (8 d^2) + FFN (16 d^2); 8 d^2 + 6 d f = Wqkv, Wo + GeGLU; 4 S d = scores + weighted values; the
MLM head runs only at the masked positions. O(d) and O(S) work per token (LayerNorm, softmax, biases ...) is left out.

Matching a baseline to PT (``sweep.match``: total | non_embedding | flops): :func:`match_shape` (docs/baselines.md
"Baseline shapes"; beyond MAX_MISMATCH a ValueError), at fixed depth :func:`match_width`.
"""

from __future__ import annotations

import math

from ptsweep.config import BertConfig, ModernBertConfig, PTConfig, UTConfig

WIDTH_STEP = 8
"""Baseline widths considered by :func:`match_width`: the multiples of this step."""
MATCH_TOLERANCE = 0.05
"""Largest allowed |P_baseline / P_PT - 1| for a matched width."""
MAX_WIDTH = 32768
"""Upper end of the width search."""
HEAD_DIM = 64
"""Head dimension of the baseline families (BERT's)."""
MAX_HEADS = 256
"""Largest head count :func:`match_shape` considers (d <= 16384)."""
MAX_MISMATCH = 0.5
"""Largest allowed |log(count / PT's count)| of a rule shape, as a ratio - 1 (beyond: ValueError)."""
MATCH_KEYS = ("total", "non_embedding", "flops")
SCHEMAS = {"bert": BertConfig, "ut": UTConfig, "modernbert": ModernBertConfig}
"""The baseline config of each kind."""
TYPE_VOCAB_SIZE = 2
"""Token-type (segment) table rows, as in BERT; only row 0 is ever used (single-segment MLM)."""


def _check_kind(kind: str) -> None:
    if kind not in SCHEMAS:
        raise ValueError(f"kind must be one of {', '.join(SCHEMAS)}, got {kind!r}")


def default_heads(d: int) -> int:
    """Number of attention heads for width ``d``: head_dim = smallest divisor of d that is >= min(64, d)."""
    if d <= 0:
        raise ValueError(f"width must be positive, got {d}")
    target = min(64, d)
    head_dim = next(k for k in range(target, d + 1) if d % k == 0)
    return d // head_dim


def _baseline_counts(d: int, n_layers: int, vocab_size: int, max_positions: int, shared: bool) -> dict[str, int]:
    embedding = (vocab_size + max_positions + TYPE_VOCAB_SIZE) * d  # word + position + token-type tables
    emb_ln = 2 * d
    layer = 12 * d * d + 13 * d
    layers = layer + n_layers * d if shared else n_layers * layer  # UT: one layer + timestep table
    head = d * d + 3 * d + vocab_size  # dense + LN + decoder bias
    total = embedding + emb_ln + layers + head
    return {"total": total, "non_embedding": total - embedding}


def _modernbert_counts(d: int, n_layers: int, d_ff: int, vocab_size: int) -> dict[str, int]:
    embedding = vocab_size * d  # the token table (tied to the decoder)
    layers = n_layers * (4 * d * d + 3 * d * d_ff + 2 * d) - d  # the first layer has no attention LN
    total = embedding + d + layers + d + d * d + d + vocab_size  # + embedding LN, final LN, head dense + LN, bias
    return {"total": total, "non_embedding": total - embedding}


def param_count(model_cfg, vocab_size: int) -> dict[str, int]:
    """Closed-form ``{"total", "non_embedding"}`` parameter counts of a model config (module docstring)."""
    if isinstance(model_cfg, PTConfig):
        from ptsweep.models.pt import pt_param_count

        return pt_param_count(model_cfg, vocab_size)
    if isinstance(model_cfg, ModernBertConfig):
        return _modernbert_counts(model_cfg.width, model_cfg.n_layers, model_cfg.ffn_width, vocab_size)
    return _baseline_counts(model_cfg.width, model_cfg.n_layers, vocab_size, model_cfg.max_positions,
                            shared=isinstance(model_cfg, UTConfig))


def flops_per_token(model_cfg, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> float:
    """Training FLOPs per input token (module docstring; PT: ``pt_flops_per_token``)."""
    if isinstance(model_cfg, PTConfig):
        from ptsweep.models.pt import pt_flops_per_token

        return float(pt_flops_per_token(model_cfg, vocab_size, seq_len, mask_prob))
    d = model_cfg.width
    modern = isinstance(model_cfg, ModernBertConfig)
    layer = 8 * d * d + 6 * d * model_cfg.ffn_width if modern else 24 * d * d  # projections + MLP
    forward = model_cfg.n_layers * (layer + 4 * seq_len * d) + mask_prob * (2 * d * d + 2 * d * vocab_size)
    return 3.0 * float(forward)


def match_width_to_count(kind: str, target: int, vocab_size: int, n_layers: int = 4,
                         max_positions: int = 512):
    """The baseline config of ``kind`` (width a multiple of WIDTH_STEP) whose total count is closest to ``target``."""
    _check_kind(kind)
    best_d, best_err = None, float("inf")
    for d in range(WIDTH_STEP, MAX_WIDTH + 1, WIDTH_STEP):
        shape = SCHEMAS[kind](width=d, n_layers=n_layers, max_positions=max_positions)
        count = param_count(shape, vocab_size)["total"]
        err = abs(count / target - 1.0)
        if err < best_err:
            best_d, best_err = d, err
        if count > target:  # the count grows with d: nothing further can be closer
            break
    if best_d is None or best_err > MATCH_TOLERANCE:
        raise ValueError(f"no {kind} width (multiple of {WIDTH_STEP}) matches {target} parameters within "
                         f"{MATCH_TOLERANCE:.0%} (closest: d={best_d}, off by {best_err:.1%})")
    cfg = SCHEMAS[kind](width=best_d, n_layers=n_layers, n_heads=0, max_positions=max_positions)
    cfg.validate()
    return cfg


def match_width(kind: str, pt_cfg: PTConfig, vocab_size: int, n_layers: int = 4,
                max_positions: int = 512):
    """The baseline config of ``kind`` with ``n_layers`` whose parameter count is closest to ``pt_cfg``'s."""
    return match_width_to_count(kind, param_count(pt_cfg, vocab_size)["total"], vocab_size, n_layers, max_positions)


def describe(model_cfg, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> dict:
    """Shape fields, parameter counts and training FLOPs/token of a config (for ``size`` and results tables)."""
    out: dict = {"model": model_cfg.name, "width": model_cfg.width, "vocab_size": vocab_size, "seq_len": seq_len}
    if isinstance(model_cfg, PTConfig):
        out.update(scaling=model_cfg.scaling, parametrization=model_cfg.parametrization,
                   channels=model_cfg.channels, rank=model_cfg.rank, topics=model_cfg.topics,
                   n_classes=model_cfg.n_classes, n_iters=model_cfg.n_iters)
    else:  # BERT / UT (UTConfig is a BertConfig subclass) / ModernBERT
        heads = model_cfg.n_heads or default_heads(model_cfg.width)
        modern = isinstance(model_cfg, ModernBertConfig)
        out.update(parametrization=model_cfg.parametrization, n_layers=model_cfg.n_layers, n_heads=heads,
                   head_dim=model_cfg.width // heads, d_ff=model_cfg.ffn_width if modern else 4 * model_cfg.width,
                   max_positions=model_cfg.max_positions, shared_layer=isinstance(model_cfg, UTConfig))
    counts = param_count(model_cfg, vocab_size)
    out.update(params=counts["total"], non_embedding_params=counts["non_embedding"],
               flops_per_token=flops_per_token(model_cfg, vocab_size, seq_len, mask_prob))
    return out


def measure(model_cfg, match: str, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> float:
    """The count a baseline is matched by: total or non-embedding parameters, or training FLOPs per token."""
    if match not in MATCH_KEYS:
        raise ValueError(f"match must be one of {', '.join(MATCH_KEYS)}, got {match!r}")
    if match == "flops":
        return flops_per_token(model_cfg, vocab_size, seq_len, mask_prob)
    return float(param_count(model_cfg, vocab_size)[match])


def _closest(kind: str, shapes, target: float, match: str, vocab_size: int, seq_len: int, mask_prob: float,
             max_positions: int):
    """The config among ``shapes`` ((d, L) pairs, in order of preference for ties) closest to ``target`` in log."""
    best, best_err = None, math.inf
    for d, n_layers in shapes:
        cfg = SCHEMAS[kind](width=d, n_layers=n_layers, n_heads=d // HEAD_DIM, max_positions=max_positions)
        err = abs(math.log(measure(cfg, match, vocab_size, seq_len, mask_prob) / target))
        if err < best_err - 1e-12:
            best, best_err = cfg, err
    if best is None or best_err > math.log1p(MAX_MISMATCH):
        raise ValueError(f"no {kind} shape of the sizing rule matches {match} = {target:.4g} within a factor "
                         f"{1 + MAX_MISMATCH:g} (closest: d={best and best.width}, L={best and best.n_layers}, "
                         f"ratio {math.exp(best_err):.3g})")
    return best


def match_shape(kind: str, pt_cfg: PTConfig, vocab_size: int, seq_len: int, mask_prob: float = 0.15,
                match: str = "total", max_positions: int = 512):
    """The baseline of ``kind`` of the sizing rule (d = 64 h, h <= L <= 2h; UT at BERT's depth) whose ``match``
    count is closest to ``pt_cfg``'s; ModernBERT takes BERT's rule with its own counts."""
    _check_kind(kind)
    target = measure(pt_cfg, match, vocab_size, seq_len, mask_prob)
    args = (target, match, vocab_size, seq_len, mask_prob, max_positions)
    rule_shapes = [(HEAD_DIM * h, n) for h in range(1, MAX_HEADS + 1) for n in range(h, 2 * h + 1)]
    if kind == "modernbert":
        return _closest("modernbert", rule_shapes, *args)
    bert = _closest("bert", rule_shapes, *args)
    if kind == "bert":
        return bert
    return _closest("ut", ((HEAD_DIM * h, bert.n_layers) for h in range(1, MAX_HEADS + 1)), *args)


def sizing_table(pt_cfg: PTConfig, scales, vocab_size: int, seq_len: int, mask_prob: float = 0.15,
                 match: str = "total", models=("pt", "bert", "ut"), max_positions: int = 512) -> list[dict]:
    """One row per (PT width in ``scales``, model): shape, counts, FLOPs/token and the ratio of the matched count to
    PT's (``match_ratio``). A baseline the rule cannot match gets ``error`` instead of counts."""
    import dataclasses

    rows = []
    for s in scales:
        pt = dataclasses.replace(pt_cfg, width=int(s))
        pt.validate()
        target = measure(pt, match, vocab_size, seq_len, mask_prob)
        for kind in models:
            row = {"scale": int(s), "model": kind}
            try:
                cfg = pt if kind == "pt" else match_shape(kind, pt, vocab_size, seq_len, mask_prob, match,
                                                          max_positions)
            except ValueError as e:
                rows.append({**row, "error": str(e)})
                continue
            info = describe(cfg, vocab_size, seq_len, mask_prob)
            row.update(width=cfg.width, n_layers=info.get("n_layers", getattr(cfg, "n_iters", 0)),
                       n_heads=info.get("n_heads", getattr(cfg, "channels", 0)), params=info["params"],
                       non_embedding_params=info["non_embedding_params"], flops_per_token=info["flops_per_token"],
                       match_ratio=measure(cfg, match, vocab_size, seq_len, mask_prob) / target)
            rows.append(row)
    return rows
