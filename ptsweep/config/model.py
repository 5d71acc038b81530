"""Model schemas: PTConfig, BertConfig, UTConfig, ModernBertConfig (``model.name`` picks one), each with its value
checks.

Defaults follow ``pt-mup-spec.md`` ("Decisions already taken"). A field with a fixed set of values is a ``str``
checked in ``validate`` (``one_of``): OmegaConf does not support ``Literal``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ptsweep.config.checks import one_of, require

MESSAGE_PATHS = ("child", "head", "topic")
"""Message paths into Z that ``model.messages_off`` can switch off (the unary is always on)."""

# The seven transferable hyperparameters ([S] §3.1, spec §7/§10): base LR + six information weights.
INFO_WEIGHTS = ("w_unary", "w_child", "w_head", "w_topic_z", "w_attn", "w_topic_g")
TRANSFER_KEYS = ("optim.lr",) + tuple(f"model.{w}" for w in INFO_WEIGHTS)

PARAMETRIZATIONS = ("mup", "mup_sp", "mup_paper", "sp")
"""PT parametrizations (``model.parametrization``, ``sweep.*.parametrizations``)."""
MUP_CONSTANTS = ("init_unary", "init_u", "init_v", "init_topic", "center_features", "lr_unary", "lr_ternary",
                 "lr_topic", "lr_output")
"""The base-shape constants that only 'mup' reads ('mup_sp' derives its own from SP at ``base_width``)."""
SCALINGS = ("channels", "rank")
"""Width-scaling paradigms of PT (``model.scaling``, ``sweep.lr_transfer.scaling``)."""


def default_z_damping(parametrization: str) -> float:
    """beta_Z of a parametrization when ``model.damping_z`` is None: 0.5 under 'mup_sp' and 'mup', else 0."""
    return 0.5 if parametrization in ("mup_sp", "mup") else 0.0


@dataclass
class PTConfig:
    """Probabilistic Transformer encoder + MLM head (spec §3-§9)."""

    name: str = "pt"
    width: int = 256
    """N = dim_z, the number of labels of each Z_i: the model width."""
    scaling: str = "channels"
    """Width-scaling paradigm ([S] §2.2): 'channels' grows C with N (r fixed), 'rank' grows r with N (C fixed)."""
    parametrization: str = "mup_sp"
    """'mup_sp': muP exponents of N, constants chosen so that at N = ``base_width`` the model is SP but for the
    attention constant (``MFVIConstants.sp_anchored``). 'mup': the same exponents with the constants below.
    'mup_paper': [S]'s literal init (every constant 1). 'sp': original PT (spec §6.3 table)."""
    base_width: int = 256
    """N0: the width at which the base shape (C0, r0) holds (and where 'mup_sp' equals SP: its tuning width)."""
    base_channels: int = 4
    """C0: channels at N0 (spec decision: base model C = 4)."""
    base_rank: int = 64
    """r0: rank of each ternary factor at N0."""
    attn_base_rank: int = 8
    """r_A, read by 'mup_sp' only: the attention-logit scale s_H = r_A / r (muP's 1/r, [S] eq. 7)."""
    topic_ratio: int = 4
    """M / N: number of topic labels per Z label (M = 4N by default)."""
    dists: tuple[int, ...] = (2, 3, 4)
    """Distance cut points (spec §4): classes [1,d1),[d1,d2),...,[dm,inf) per direction -> K = 2(m+1) = 8."""
    n_iters: int = 4
    """T: number of asynchronous MFVI iterations (0: no inference, h = S_w - the no-context control)."""
    messages_off: tuple[str, ...] = ()
    """Message paths into Z switched off (controls; spec §6.3 step 6): any of 'child', 'head', 'topic'."""
    center_features: bool = True
    """'mup' only: features N Q_z - 1 and M Q_g - 1 (a potential shift, T~ = P T P: the same CRF)."""
    init_unary: float = 0.125
    """'mup' only: std of the unary S at init (input group, N^0; 'mup_paper': 1)."""
    init_u: float = 0.5
    """'mup' only: U ~ N(0, init_u^2 / N) (hidden group; 'mup_paper': 1)."""
    init_v: float = 0.5
    """'mup' only: V ~ N(0, init_v^2 / N) (hidden group; 'mup_paper': 1)."""
    init_topic: float = 0.03
    """'mup' only: B ~ N(0, init_topic^2 / N) (hidden group; 'mup_paper': 1)."""
    lr_unary: float = 1.0
    """'mup' only: constant on the LR of S (input group: eta * lr_unary); sets the input:hidden LR ratio."""
    lr_ternary: float = 4.0
    """'mup' only: constant on the LR of U, V (hidden group: eta * lr_ternary / N)."""
    lr_topic: float = 0.15
    """'mup' only: constant on the LR of B (hidden group: eta * lr_topic / N)."""
    lr_output: float = 1.0
    """'mup' only: constant on the LR of the decoder W_out (output group: eta * lr_output / N)."""
    w_unary: float = 1.0
    """Information weight on the unary message S_w -> Z (spec §7, omega_S)."""
    w_child: float = 1.0
    """Information weight on the ternary child-side message (i picks j) -> Z (omega->)."""
    w_head: float = 1.0
    """Information weight on the ternary head-side (transposed) message -> Z (omega<-)."""
    w_topic_z: float = 1.0
    """Information weight on the binary message G -> Z (omega_GZ)."""
    w_attn: float = 1.0
    """Information weight on the attention logits Z -> H (omega_ZH)."""
    w_topic_g: float = 1.0
    """Information weight on the topic logits Z -> G (omega_ZG)."""
    damping_h: float = 0.0
    """beta_H: damping of H and G logits (0 = none, spec §3.2 step 3)."""
    damping_z: float | None = None
    """beta_Z: damping of Z logits (spec §3.2 step 6). None = the parametrization's default (:attr:`z_damping`);
    identities hash the value in effect."""
    stepsize_h: float = 1.0
    """alpha_H: step size mixing new H/G distributions with the previous ones (1 = plain update)."""
    stepsize_z: float = 1.0
    """alpha_Z: step size mixing new Q_z with the previous one (1 = plain update)."""
    dropout: float = 0.0
    """Dropout on H/G probabilities and on Z logits (spec §3.2 steps 4, 6); 0 for one-epoch pre-training."""
    head_input: str = "logits"
    """What feeds the MLM head: final Z logits l^(T) (default) or a_Z * softmax(l^(T))."""
    rms_eps: float = 1e-6
    """epsilon of the head's RMSNorm."""
    mask_value: float = -1e9
    """Finite logit for forbidden heads (diagonal, pads); never -inf (spec §12.1)."""
    attention_impl: str = "auto"
    """H softmax + ternary Z messages: 'dense' keeps (B,C,L,L) tensors (the reference; 'auto' = dense); 'blockwise'
    recomputes in backward, memory linear in L (no dropout/damping/step size on Q_h). Traces always use the dense
    path."""
    variants: list[dict[str, Any]] = field(default_factory=list)
    """Variants of PT at the model's hook points (``ptsweep.variants``), each ``{name: ..., <setting>: ...}``."""

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuples stay tuples
        self.dists, self.messages_off = tuple(self.dists), tuple(self.messages_off)

    def use_blockwise(self, device_type: str) -> bool:
        """Whether a training forward on ``device_type`` takes the blockwise path ('auto' is dense everywhere)."""
        return self.attention_impl == "blockwise"

    @property
    def n_classes(self) -> int:
        """K: number of relative-distance classes."""
        return 2 * (len(self.dists) + 1)

    @property
    def z_damping(self) -> float:
        """beta_Z in effect: ``damping_z``, or when it is None :func:`default_z_damping` of the parametrization."""
        return default_z_damping(self.parametrization) if self.damping_z is None else float(self.damping_z)

    @property
    def channels(self) -> int:
        """C at this width."""
        return self.base_channels * self.width // self.base_width if self.scaling == "channels" else self.base_channels

    @property
    def rank(self) -> int:
        """r at this width."""
        return self.base_rank * self.width // self.base_width if self.scaling == "rank" else self.base_rank

    @property
    def topics(self) -> int:
        """M = topic_ratio * N."""
        return self.topic_ratio * self.width

    def anchor_overrides(self) -> dict[str, int]:
        """Overrides that move the base shape (N0, C0, r0) to this width and shape: every width keeps its (C, r)
        under the paradigm, and 'mup_sp' is SP at this width (the tuning width)."""
        return {"model.base_width": self.width, "model.base_channels": self.channels, "model.base_rank": self.rank}

    def validate(self) -> None:
        one_of(self.scaling, SCALINGS, "model.scaling")
        one_of(self.parametrization, PARAMETRIZATIONS, "model.parametrization")
        one_of(self.head_input, ("logits", "probs"), "model.head_input")
        require(self.attention_impl != "fused", "model.attention_impl", "'fused' was retired (slower than dense on "
                "the CPU, more memory than blockwise, no CUDA kernels; bench/README.md); use dense, auto or blockwise")
        one_of(self.attention_impl, ("auto", "dense", "blockwise"), "model.attention_impl")
        require(self.width > 0, "model.width", f"must be positive, got {self.width}")
        require(self.base_width > 0 and self.base_channels > 0 and self.base_rank > 0, "model.base_width",
                 "base_width, base_channels and base_rank must be positive")
        what, base = (("channel count C", self.base_channels) if self.scaling == "channels"
                      else ("rank r", self.base_rank))
        require((base * self.width) % self.base_width == 0, "model.width",
                f"{self.width} gives a fractional {what} = {base}*{self.width}/{self.base_width}; "
                f"use a multiple of {self.base_width // math.gcd(self.base_width, base)}")
        require(self.channels >= 1 and self.rank >= 1, "model.width",
                f"{self.width} gives C={self.channels}, r={self.rank}")
        require(self.topic_ratio >= 1, "model.topic_ratio", "must be >= 1")
        require(list(self.dists) == sorted(set(self.dists)) and all(d >= 2 for d in self.dists), "model.dists",
                 f"must be strictly increasing integers >= 2, got {list(self.dists)}")
        require(self.n_iters >= 0, "model.n_iters", "must be >= 0 (0 = no inference: the unary feeds the head)")
        for key in ("init_unary", "init_u", "init_v", "init_topic"):
            v = getattr(self, key)
            require(math.isfinite(v) and v >= 0, f"model.{key}", f"init scales must be >= 0, got {v}")
        for key in ("lr_unary", "lr_ternary", "lr_topic", "lr_output"):
            v = getattr(self, key)
            require(math.isfinite(v) and v > 0, f"model.{key}", f"LR constants must be positive, got {v}")
        if self.parametrization == "mup_sp":
            changed = [k for k in MUP_CONSTANTS if getattr(self, k) != getattr(PTConfig, k)]
            require(not changed, f"model.{changed[0] if changed else ''}", "is a 'mup' constant; under 'mup_sp' every "
                    "base-shape constant is SP's at model.base_width (set model.base_width instead)")
        require(self.attn_base_rank >= 1, "model.attn_base_rank", f"must be >= 1, got {self.attn_base_rank}")
        bad = sorted(set(self.messages_off) - set(MESSAGE_PATHS))
        require(not bad, "model.messages_off", f"unknown message path(s) {bad}; choose from {list(MESSAGE_PATHS)}")
        require(self.init_unary > 0 and self.init_topic > 0 and self.init_u + self.init_v > 0, "model.init_unary",
                 "S and B need a random init (symmetry breaking), and U, V not both zero")
        for w in INFO_WEIGHTS:
            v = getattr(self, w)
            require(math.isfinite(v) and v > 0, f"model.{w}", f"information weights must be positive, got {v}")
        require(0.0 <= self.damping_h < 1.0, "model.damping_h", "must be in [0, 1)")
        require(0.0 <= self.z_damping < 1.0, "model.damping_z", "must be in [0, 1) (or null: the default)")
        require(0.0 < self.stepsize_h <= 1.0, "model.stepsize_h", "must be in (0, 1]")
        require(0.0 < self.stepsize_z <= 1.0, "model.stepsize_z", "must be in (0, 1]")
        require(0.0 <= self.dropout < 1.0, "model.dropout", "must be in [0, 1)")
        require(self.attention_impl != "blockwise" or (self.dropout == 0 and self.damping_h == 0
                                                      and self.stepsize_h == 1.0),
                "model.attention_impl", "blockwise does not support dropout, damping_h or stepsize_h on Q_h; use "
                "dense or auto")
        from ptsweep.variants import normalize

        self.variants = normalize(self)


def check_layers(cfg) -> None:
    """The checks of a baseline's layer stack: width, layers, heads dividing the width, dropout, positions."""
    require(cfg.width > 0, "model.width", f"must be positive, got {cfg.width}")
    require(cfg.n_layers >= 1, "model.n_layers", "must be >= 1")
    require(cfg.n_heads >= 0, "model.n_heads", "must be >= 0")
    require(not cfg.n_heads or cfg.width % cfg.n_heads == 0, "model.n_heads",
            f"{cfg.n_heads} does not divide width {cfg.width}")
    require(0.0 <= cfg.dropout < 1.0, "model.dropout", "must be in [0, 1)")
    require(cfg.max_positions >= 1, "model.max_positions", "must be >= 1")


@dataclass
class BertConfig:
    """BERT baseline (Hugging Face BertModel; spec §11): post-LN, GELU, d_ff = 4d, learned absolute positions."""

    name: str = "bert"
    width: int = 256
    """Hidden size d (scaling runs: ``models.sizing.match_shape``)."""
    n_layers: int = 4
    """Number of (unshared) post-LN Transformer layers."""
    n_heads: int = 0
    """Attention heads; 0 = the sizing rule (``models.sizing.default_heads``)."""
    max_positions: int = 512
    """Size of the learned absolute position table."""
    dropout: float = 0.0
    """Hidden and attention dropout (0 for one-epoch pre-training)."""
    parametrization: str = "sp"
    """Baselines are tuned per scale in SP; 'mup' exists for the coordinate check."""

    def validate(self) -> None:
        one_of(self.parametrization, ("sp", "mup"), "model.parametrization")
        check_layers(self)


@dataclass
class UTConfig(BertConfig):
    """Universal Transformer baseline: ONE shared post-LN BERT layer applied ``n_layers`` times, with a learned
    timestep embedding added before each step; no ACT (spec §11)."""

    name: str = "ut"


@dataclass
class ModernBertConfig:
    """ModernBERT-style baseline (Hugging Face ModernBERT layers; ``models.modernbert``): rotary positions, pre-LN,
    GeGLU MLP, no biases but the decoder's, global attention in every layer."""

    name: str = "modernbert"
    width: int = 256
    """Hidden size d (scaling runs: ``models.sizing.match_shape``)."""
    n_layers: int = 4
    """Number of (unshared) pre-LN Transformer layers."""
    n_heads: int = 0
    """Attention heads; 0 = the sizing rule (``models.sizing.default_heads``)."""
    d_ff: int = 0
    """GeGLU inner width f (the MLP maps d -> 2f -> GELU(a) * b -> d); 0 = 3d/2, ModernBERT-base's ratio."""
    rope_theta: float = 10000.0
    """Rotary base theta (ModernBERT's local layers' value: the blocks here are short)."""
    max_positions: int = 512
    """Longest sequence the model accepts (rotary positions have no table; checked against data.seq_len)."""
    dropout: float = 0.0
    """Embedding, attention and MLP dropout (0 for one-epoch pre-training)."""
    parametrization: str = "sp"
    """Tuned per scale in SP, as the other baselines; no muP variant exists."""

    @property
    def ffn_width(self) -> int:
        """f in effect: ``d_ff``, or 3d/2 when it is 0."""
        return self.d_ff or 3 * self.width // 2

    def validate(self) -> None:
        one_of(self.parametrization, ("sp",), "model.parametrization")
        check_layers(self)
        if self.n_heads:
            require((self.width // self.n_heads) % 2 == 0, "model.n_heads",
                    f"head dim {self.width // self.n_heads} is odd; rotary embeddings rotate pairs of coordinates")
        require(self.d_ff >= 0, "model.d_ff", f"must be >= 0 (0 = 3 * width / 2), got {self.d_ff}")
        require(self.d_ff > 0 or self.width % 2 == 0, "model.width",
                f"{self.width} is odd: model.d_ff=0 means 3 * width / 2; set model.d_ff explicitly")
        require(math.isfinite(self.rope_theta) and self.rope_theta > 1.0, "model.rope_theta",
                f"must be > 1, got {self.rope_theta}")


MODEL_SCHEMAS: dict[str, type] = {"pt": PTConfig, "bert": BertConfig, "ut": UTConfig, "modernbert": ModernBertConfig}
"""``model.name`` -> its schema."""
