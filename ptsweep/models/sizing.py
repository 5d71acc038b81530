"""Model sizes: closed-form parameter counts, analytic FLOPs per token, head rule and width matching (spec §9, §11).

Parameter counts (unique parameters; the tied decoder counted once; V = vocab, d = width, P = max_positions,
L = n_layers). Derived from Hugging Face's BERT modules as used in :mod:`ptsweep.models.bert`:

    embeddings  V d + P d + 2 d (token types) + 2 d (embedding LN)
    one layer   12 d^2 + 13 d   (Q, K, V, O: 4(d^2 + d); FFN: 8 d^2 + 5 d; two LNs: 4 d)
    MLM head    d^2 + 3 d (dense + LN) + V (decoder bias; decoder weight tied to the word table)

    P_BERT = (V + P + 2) d + 2 d + L (12 d^2 + 13 d) + d^2 + 3 d + V
    P_UT   = (V + P + 2) d + 2 d + (12 d^2 + 13 d) + L d (timestep table) + d^2 + 3 d + V
    P_PT   = 2 V N + V + N + 2 K C r N + M N                (``ptsweep.models.pt.pt_param_count``)

"non_embedding" removes the lookup tables: for BERT/UT the word, position and token-type tables ((V + P + 2) d);
for PT the terms of S, W_out and b_out (2 V N + V).

FLOPs per token (training = forward + backward = 3 x forward; a matmul of m x k by k x n counts 2 m k n):

    forward/token = L (24 d^2 + 4 S d) + mask_prob (2 d^2 + 2 d V)

24 d^2 = Q, K, V, O projections (8 d^2) + FFN (16 d^2); 4 S d = attention scores + weighted values over S = seq_len
keys (no padding assumed); the MLM head (transform + decoder) runs only at the masked fraction of positions. UT has
the same FLOPs as BERT with the same d and L (weights are shared, compute is not). Excluded (all O(d) or O(S) per
token): embedding lookups and sums, LayerNorm, GELU, softmax, biases, residual adds, dropout, the loss.

Head rule (:func:`default_heads`): head_dim = the smallest divisor of d that is >= min(64, d); heads = d / head_dim.
So multiples of 64 get head dim 64 (BERT's), d < 64 gets one head, and e.g. d = 360 gets 5 heads of 72.

Width matching (:func:`match_width`): d ranges over the multiples of 8 (WIDTH_STEP); the d whose total parameter
count is closest to PT's is chosen (ties -> smaller d), and it must lie within 5% (MATCH_TOLERANCE) or ValueError.
"""

from __future__ import annotations

from ptsweep.config import BertConfig, PTConfig, UTConfig

WIDTH_STEP = 8
"""Baseline widths considered by :func:`match_width`: the multiples of this step."""
MATCH_TOLERANCE = 0.05
"""Largest allowed |P_baseline / P_PT - 1| for a matched width."""
MAX_WIDTH = 32768
"""Upper end of the width search."""
TYPE_VOCAB_SIZE = 2
"""Token-type rows of BERT's embedding (mirrors ``ptsweep.models.bert.TYPE_VOCAB_SIZE``)."""


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


def param_count(model_cfg, vocab_size: int) -> dict[str, int]:
    """Closed-form ``{"total", "non_embedding"}`` parameter counts of a PT / BERT / UT config (module docstring)."""
    if isinstance(model_cfg, PTConfig):
        from ptsweep.models.pt import pt_param_count

        return pt_param_count(model_cfg, vocab_size)
    if isinstance(model_cfg, BertConfig):  # UTConfig is a BertConfig subclass
        return _baseline_counts(model_cfg.width, model_cfg.n_layers, vocab_size, model_cfg.max_positions,
                                shared=isinstance(model_cfg, UTConfig))
    raise TypeError(f"no parameter count for config of type {type(model_cfg).__name__}")


def baseline_forward_flops_per_token(cfg: BertConfig, vocab_size: int, seq_len: int,
                                     mask_prob: float = 0.15) -> float:
    """Analytic forward matmul FLOPs per input token of BERT/UT: L(24 d^2 + 4 S d) + mask_prob (2 d^2 + 2 d V)."""
    d, n_layers = cfg.width, cfg.n_layers
    return float(n_layers * (24 * d * d + 4 * seq_len * d) + mask_prob * (2 * d * d + 2 * d * vocab_size))


def flops_per_token(model_cfg, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> float:
    """Training (forward + backward = 3 x forward) FLOPs per input token; PT delegates to ``pt_flops_per_token``."""
    if isinstance(model_cfg, PTConfig):
        from ptsweep.models.pt import pt_flops_per_token

        return float(pt_flops_per_token(model_cfg, vocab_size, seq_len, mask_prob))
    if isinstance(model_cfg, BertConfig):
        return 3.0 * baseline_forward_flops_per_token(model_cfg, vocab_size, seq_len, mask_prob)
    raise TypeError(f"no FLOP count for config of type {type(model_cfg).__name__}")


def match_width_to_count(kind: str, target: int, vocab_size: int, n_layers: int = 4,
                         max_positions: int = 512) -> BertConfig | UTConfig:
    """The BERT/UT config (width a multiple of WIDTH_STEP) whose total count is closest to ``target`` (within 5%)."""
    schemas = {"bert": BertConfig, "ut": UTConfig}
    if kind not in schemas:
        raise ValueError(f"kind must be 'bert' or 'ut', got {kind!r}")
    shared = kind == "ut"
    best_d, best_err = None, float("inf")
    for d in range(WIDTH_STEP, MAX_WIDTH + 1, WIDTH_STEP):
        count = _baseline_counts(d, n_layers, vocab_size, max_positions, shared)["total"]
        err = abs(count / target - 1.0)
        if err < best_err:
            best_d, best_err = d, err
        if count > target:  # the count grows with d: nothing further can be closer
            break
    if best_d is None or best_err > MATCH_TOLERANCE:
        raise ValueError(f"no {kind} width (multiple of {WIDTH_STEP}) matches {target} parameters within "
                         f"{MATCH_TOLERANCE:.0%} (closest: d={best_d}, off by {best_err:.1%})")
    cfg = schemas[kind](width=best_d, n_layers=n_layers, n_heads=0, max_positions=max_positions)
    cfg.validate()
    return cfg


def match_width(kind: str, pt_cfg: PTConfig, vocab_size: int, n_layers: int = 4,
                max_positions: int = 512) -> BertConfig | UTConfig:
    """BERT or UT config with ``n_layers`` whose parameter count is closest to ``pt_cfg``'s (within 5%)."""
    return match_width_to_count(kind, param_count(pt_cfg, vocab_size)["total"], vocab_size, n_layers, max_positions)


def describe(model_cfg, vocab_size: int, seq_len: int, mask_prob: float = 0.15) -> dict:
    """Shape fields, parameter counts and training FLOPs/token of a config (for ``size`` and results tables)."""
    out: dict = {"model": model_cfg.name, "width": model_cfg.width, "vocab_size": vocab_size, "seq_len": seq_len}
    if isinstance(model_cfg, PTConfig):
        out.update(scaling=model_cfg.scaling, parametrization=model_cfg.parametrization,
                   channels=model_cfg.channels, rank=model_cfg.rank, topics=model_cfg.topics,
                   n_classes=model_cfg.n_classes, n_iters=model_cfg.n_iters)
    elif isinstance(model_cfg, BertConfig):
        heads = model_cfg.n_heads or default_heads(model_cfg.width)
        out.update(parametrization=model_cfg.parametrization, n_layers=model_cfg.n_layers, n_heads=heads,
                   head_dim=model_cfg.width // heads, d_ff=4 * model_cfg.width,
                   max_positions=model_cfg.max_positions, shared_layer=isinstance(model_cfg, UTConfig))
    else:
        raise TypeError(f"cannot describe config of type {type(model_cfg).__name__}")
    counts = param_count(model_cfg, vocab_size)
    out.update(params=counts["total"], non_embedding_params=counts["non_embedding"],
               flops_per_token=flops_per_token(model_cfg, vocab_size, seq_len, mask_prob))
    return out
