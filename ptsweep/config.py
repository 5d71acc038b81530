"""Typed configuration schemas for ptsweep.

Every hyperparameter has exactly one name: its dotted path here (``model.w_attn``, ``optim.lr``) is also the Hydra
override, the Optuna parameter name, the Ray ``param_space`` key, the W&B config key and the results column.

Hydra (in ``cli.py`` only) composes YAML from ``conf/``; :func:`from_dict` turns the composed dict into these
dataclasses. Unknown keys and impossible values raise :class:`ConfigError` with a one-line message naming the key.
Defaults follow ``pt-mup-spec.md`` ("Decisions already taken").
"""

from __future__ import annotations

import dataclasses
import math
import types
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

# The seven transferable hyperparameters ([S] §3.1, spec §7/§10): base LR + six information weights.
MESSAGE_PATHS = ("child", "head", "topic")
"""Message paths into Z that ``model.messages_off`` can switch off (the unary is always on)."""

INFO_WEIGHTS = ("w_unary", "w_child", "w_head", "w_topic_z", "w_attn", "w_topic_g")
TRANSFER_KEYS = ("optim.lr",) + tuple(f"model.{w}" for w in INFO_WEIGHTS)


class ConfigError(ValueError):
    """A config key is unknown or has an impossible value. The message names the dotted key."""


def _require(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


# --------------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------------
@dataclass
class PTConfig:
    """Probabilistic Transformer encoder + MLM head (spec §3-§9)."""

    name: Literal["pt"] = "pt"
    width: int = 256
    """N = dim_z, the number of labels of each Z_i: the model width."""
    scaling: Literal["channels", "rank"] = "channels"
    """Width-scaling paradigm ([S] §2.2): 'channels' grows C with N (r fixed), 'rank' grows r with N (C fixed)."""
    parametrization: Literal["mup", "mup_paper", "sp"] = "mup"
    """'mup': [S] potentials/temperatures and Table-2 init/LR rules with the width-stable init constants below
    (experiments/coord-check/README.md derives them); 'mup_paper': the same with [S]'s literal init (every constant
    1), which is not width-stable at T >= 2 (kept to reproduce the failure); 'sp': original PT (spec §6.3 table)."""
    base_width: int = 256
    """N0: the width at which the base shape (C0, r0) holds."""
    base_channels: int = 4
    """C0: channels at N0 (spec decision: base model C = 4)."""
    base_rank: int = 64
    """r0: rank of each ternary factor at N0."""
    topic_ratio: int = 4
    """M / N: number of topic labels per Z label (M = 4N by default)."""
    dists: tuple[int, ...] = (2, 3, 4)
    """Distance cut points (spec §4): classes [1,d1),[d1,d2),...,[dm,inf) per direction -> K = 2(m+1) = 8."""
    n_iters: int = 4
    """T: number of asynchronous MFVI iterations (0: no inference, h = S_w - the no-context control)."""
    messages_off: tuple[str, ...] = ()
    """Message paths into Z switched off (controls; spec §6.3 step 6): any of 'child', 'head', 'topic'."""
    center_features: bool = True
    """'mup' only: use N Q_z - 1 and M Q_g - 1 as features (a potential shift: the ternary and binary factors
    double-centred, T~ = P T P; the CRF reading is kept). Removes the component shared by all tokens (U^T 1, B 1)
    from q, v, the topic logits and the messages ('mup_paper' and 'sp': off)."""
    init_unary: float = 0.5
    """'mup' only: std of the unary S at init, a base-shape constant (input group, N^0; [S] Table 2 and 'mup_paper':
    1). Keeps the spread of the Z logits, hence the tail of N*Q_z, small (coord-check README, derivation)."""
    init_u: float = 0.5
    """'mup' only: U ~ N(0, init_u^2 / N) (hidden group; 'mup_paper': 1). The ternary round trip i -> j -> i
    through the random init has gain ~ (init_u * init_v)^2 w_child w_head, while the coherent (p_hat-side) update of
    q = U^T p_hat is driven by a gradient ~ init_u * init_v: 0.5 * 0.5 trades the two (coord-check README)."""
    init_v: float = 0.5
    """'mup' only: V ~ N(0, init_v^2 / N) (hidden group; 'mup_paper': 1)."""
    init_topic: float = 0.02
    """'mup' only: B ~ N(0, init_topic^2 / N) (hidden group; 'mup_paper': 1). The topic round trip Z -> G -> Z feeds
    each label's own N*Q_z back with gain (M/N)^2 * init_topic^2 * w_topic_g * w_topic_z (16 with 'mup_paper')."""
    lr_unary: float = 1.0
    """'mup' only: base-shape constant on the LR of S (input group: LR eta * lr_unary). Not tuned: it sets the
    input:hidden LR ratio that none of the 7 transferred hyperparameters can change (issue 16)."""
    lr_ternary: float = 4.0
    """'mup' only: constant on the LR of U, V (hidden group: eta * lr_ternary / N). 4 (issue 16,
    experiments/context): at 1 the attention stays uniform in a few hundred steps and the model learns almost no
    context; 4 lets it learn context, with the muP damping of Z (``damping_z``) keeping Q_z soft at larger widths."""
    lr_topic: float = 1.0
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
    """beta_Z: damping of Z logits (0 = none, spec §3.2 step 6; [PT] App. B.2: same CRF and fixed points, a slower
    iteration). None = the parametrization's default (:attr:`z_damping`): 0.5 under 'mup' - under muP the Z update
    has a_Z = N, so a confident Q_z on k labels feeds itself back with gain ~N/k and collapses to one-hot during
    training at larger widths (experiments/context, "Mechanism"); 0 under 'sp' (the original PT) and 'mup_paper'
    ([S] literally)."""
    stepsize_h: float = 1.0
    """alpha_H: step size mixing new H/G distributions with the previous ones (1 = plain update)."""
    stepsize_z: float = 1.0
    """alpha_Z: step size mixing new Q_z with the previous one (1 = plain update)."""
    dropout: float = 0.0
    """Dropout on H/G probabilities and on Z logits (spec §3.2 steps 4, 6); 0 for one-epoch pre-training."""
    head_input: Literal["logits", "probs"] = "logits"
    """What feeds the MLM head: final Z logits l^(T) (default) or a_Z * softmax(l^(T))."""
    rms_eps: float = 1e-6
    """epsilon of the head's RMSNorm."""
    mask_value: float = -1e9
    """Finite logit for forbidden heads (diagonal, pads); never -inf (spec §12.1)."""
    attention_impl: Literal["auto", "dense", "blockwise"] = "auto"
    """H softmax + ternary Z messages: 'dense' keeps (B,C,L,L) tensors (the reference); 'blockwise' recomputes
    in backward, memory linear in L (models/pt_attention.py), and cannot apply dropout/damping/step size to Q_h;
    'auto' = blockwise on CUDA unless one of those is on, dense on the CPU (measured ~1.4x faster there, bench/).
    Traces (inspect, coord-check) always use the dense path."""

    def use_blockwise(self, device_type: str) -> bool:
        """Whether a training forward on ``device_type`` ('cpu', 'cuda', ...) takes the blockwise path."""
        plain_h = self.dropout == 0 and self.damping_h == 0 and self.stepsize_h == 1.0
        auto = self.attention_impl == "auto" and plain_h and device_type != "cpu"
        return self.attention_impl == "blockwise" or auto

    def attention_note(self, device_type: str) -> str | None:
        """One line when 'auto' keeps the dense path on an accelerator (O(L^2) memory) only because dropout, damping
        or a step size on H is on: the choice is then not the one a user of 'auto' expects, so it is said."""
        if self.attention_impl != "auto" or device_type == "cpu" or self.use_blockwise(device_type):
            return None
        on = [f"{k}={getattr(self, k)}" for k, off in (("dropout", 0), ("damping_h", 0), ("stepsize_h", 1.0))
              if getattr(self, k) != off]
        return (f"note: model.attention_impl=auto uses the dense H path on {device_type} (memory O(L^2) per sequence) "
                f"because {', '.join(on)}; the blockwise path supports none of these")

    @property
    def n_classes(self) -> int:
        """K: number of relative-distance classes."""
        return 2 * (len(self.dists) + 1)

    @property
    def z_damping(self) -> float:
        """beta_Z in effect: ``damping_z``, or when it is None 0.5 under 'mup' and 0 otherwise (see ``damping_z``)."""
        if self.damping_z is not None:
            return float(self.damping_z)
        return 0.5 if self.parametrization == "mup" else 0.0

    @property
    def channels(self) -> int:
        """C at this width."""
        if self.scaling == "channels":
            return self.base_channels * self.width // self.base_width
        return self.base_channels

    @property
    def rank(self) -> int:
        """r at this width."""
        if self.scaling == "rank":
            return self.base_rank * self.width // self.base_width
        return self.base_rank

    @property
    def topics(self) -> int:
        """M = topic_ratio * N."""
        return self.topic_ratio * self.width

    def validate(self) -> None:
        _require(self.width > 0, "model.width", f"must be positive, got {self.width}")
        _require(self.base_width > 0 and self.base_channels > 0 and self.base_rank > 0, "model.base_width",
                 "base_width, base_channels and base_rank must be positive")
        if self.scaling == "channels":
            _require((self.base_channels * self.width) % self.base_width == 0, "model.width",
                     f"{self.width} gives a fractional channel count C = {self.base_channels}*{self.width}/"
                     f"{self.base_width}; use a multiple of {self.base_width // math.gcd(self.base_width, self.base_channels)}")
        else:
            _require((self.base_rank * self.width) % self.base_width == 0, "model.width",
                     f"{self.width} gives a fractional rank r = {self.base_rank}*{self.width}/{self.base_width}; "
                     f"use a multiple of {self.base_width // math.gcd(self.base_width, self.base_rank)}")
        _require(self.channels >= 1 and self.rank >= 1, "model.width", f"{self.width} gives C={self.channels}, r={self.rank}")
        _require(self.topic_ratio >= 1, "model.topic_ratio", "must be >= 1")
        _require(list(self.dists) == sorted(set(self.dists)) and all(d >= 2 for d in self.dists), "model.dists",
                 f"must be strictly increasing integers >= 2, got {list(self.dists)}")
        _require(self.n_iters >= 0, "model.n_iters", "must be >= 0 (0 = no inference: the unary feeds the head)")
        for key in ("init_unary", "init_u", "init_v", "init_topic"):
            v = getattr(self, key)
            _require(math.isfinite(v) and v >= 0, f"model.{key}", f"init scales must be >= 0, got {v}")
        for key in ("lr_unary", "lr_ternary", "lr_topic", "lr_output"):
            v = getattr(self, key)
            _require(math.isfinite(v) and v > 0, f"model.{key}", f"LR constants must be positive, got {v}")
        bad = sorted(set(self.messages_off) - set(MESSAGE_PATHS))
        _require(not bad, "model.messages_off", f"unknown message path(s) {bad}; choose from {list(MESSAGE_PATHS)}")
        _require(self.init_unary > 0 and self.init_topic > 0 and self.init_u + self.init_v > 0, "model.init_unary",
                 "S and B need a random init (symmetry breaking), and U, V not both zero")
        for w in INFO_WEIGHTS:
            v = getattr(self, w)
            _require(math.isfinite(v) and v > 0, f"model.{w}", f"information weights must be positive, got {v}")
        _require(0.0 <= self.damping_h < 1.0, "model.damping_h", "must be in [0, 1)")
        _require(0.0 <= self.z_damping < 1.0, "model.damping_z", "must be in [0, 1) (or null: the default)")
        _require(0.0 < self.stepsize_h <= 1.0, "model.stepsize_h", "must be in (0, 1]")
        _require(0.0 < self.stepsize_z <= 1.0, "model.stepsize_z", "must be in (0, 1]")
        _require(0.0 <= self.dropout < 1.0, "model.dropout", "must be in [0, 1)")
        _require(self.attention_impl != "blockwise" or (self.dropout == 0 and self.damping_h == 0
                                                         and self.stepsize_h == 1.0), "model.attention_impl",
                 "blockwise does not support dropout, damping_h or stepsize_h on Q_h; use dense or auto")


@dataclass
class BertConfig:
    """BERT baseline (Hugging Face BertModel; spec §11): post-LN, GELU, d_ff = 4d, learned absolute positions."""

    name: Literal["bert"] = "bert"
    width: int = 256
    """Hidden size d. For scaling runs the shape (width, n_layers, n_heads) comes from ``models.sizing.match_shape``."""
    n_layers: int = 4
    """Number of (unshared) post-LN Transformer layers."""
    n_heads: int = 0
    """Attention heads; 0 = the sizing rule (``models.sizing.default_heads``)."""
    max_positions: int = 512
    """Size of the learned absolute position table."""
    dropout: float = 0.0
    """Hidden and attention dropout (0 for one-epoch pre-training)."""
    parametrization: Literal["sp", "mup"] = "sp"
    """Baselines are tuned per scale in SP; 'mup' exists for the coordinate check."""

    def validate(self) -> None:
        _require(self.width > 0, "model.width", f"must be positive, got {self.width}")
        _require(self.n_layers >= 1, "model.n_layers", "must be >= 1")
        _require(self.n_heads >= 0, "model.n_heads", "must be >= 0")
        if self.n_heads:
            _require(self.width % self.n_heads == 0, "model.n_heads", f"{self.n_heads} does not divide width {self.width}")
        _require(0.0 <= self.dropout < 1.0, "model.dropout", "must be in [0, 1)")
        _require(self.max_positions >= 1, "model.max_positions", "must be >= 1")


@dataclass
class UTConfig(BertConfig):
    """Universal Transformer baseline: ONE shared post-LN BERT layer applied ``n_layers`` times, with a learned
    timestep embedding added before each step; no ACT (spec §11)."""

    name: Literal["ut"] = "ut"  # type: ignore[assignment]


MODEL_SCHEMAS: dict[str, type] = {"pt": PTConfig, "bert": BertConfig, "ut": UTConfig}
ModelConfig = Union[PTConfig, BertConfig, UTConfig]


# --------------------------------------------------------------------------------------------------------------
# Data, optimisation, training, tracking
# --------------------------------------------------------------------------------------------------------------
@dataclass
class DataConfig:
    """Corpus, tokenizer, packing and MLM masking (``ptsweep.data``)."""

    name: Literal["shakespeare", "minipile", "local"] = "shakespeare"
    """Corpus: embedded Shakespeare plays, MiniPile from the HF Hub, or the user's own files."""
    files: list[str] = field(default_factory=list)
    """data=local: text (.txt), .jsonl/.json or .parquet files; globs allowed."""
    val_files: list[str] = field(default_factory=list)
    """data=local: optional validation files; if empty, ``val_fraction`` of the documents are held out."""
    text_field: str = "text"
    """Column holding the text in json/parquet files."""
    hf_dataset: str = "JeanKaddour/minipile"
    """data=minipile: the HF dataset id."""
    tokenizer: str = "bert-base-uncased"
    """HF tokenizer name or local path ('wordpiece' = always train the cached WordPiece of ``vocab_size``); if the
    name is unreachable, fall back to training that WordPiece (see ``tokenizer_fallback``; logged, never silent)."""
    tokenizer_fallback: bool = True
    """Train a BERT-style lowercase WordPiece on the training split when ``tokenizer`` cannot be loaded."""
    vocab_size: int = 30522
    """Vocabulary size of the fallback WordPiece."""
    seq_len: int = 128
    """Tokens per packed block."""
    val_fraction: float = 0.05
    """Fraction of documents held out for validation when the corpus has no validation split."""
    max_train_tokens: int = 0
    """Cap on tokenised training tokens (0 = all); keeps toy runs cheap."""
    max_val_blocks: int = 512
    """Number of validation blocks (each with FIXED masks) used for evaluation."""
    max_test_blocks: int = 0
    """Held-out TEST blocks (fixed masks) taken from the held-out text after the validation blocks (0 = no test
    split). Searches choose on validation; every run also reports ``test_loss`` on these blocks at its end."""
    mask_prob: float = 0.15
    """Fraction of tokens selected for MLM prediction."""
    mask_replace_prob: float = 0.8
    """Of the selected tokens: fraction replaced by [MASK]."""
    random_replace_prob: float = 0.1
    """Of the selected tokens: fraction replaced by a random token (the rest stay unchanged)."""
    val_mask_seed: int = 1234
    """Seed of the fixed validation masks: identical for every run and model."""
    num_proc: int = 0
    """Tokenisation processes (0 = min(8, cpu count))."""
    cache_dir: str = "runs/cache"
    """Where tokenizers and memory-mapped token arrays are cached (keyed by corpus and settings)."""

    def validate(self) -> None:
        _require(self.seq_len >= 8, "data.seq_len", f"must be >= 8, got {self.seq_len}")
        _require(0.0 < self.val_fraction < 1.0, "data.val_fraction", "must be in (0, 1)")
        _require(0.0 < self.mask_prob < 1.0, "data.mask_prob", "must be in (0, 1)")
        _require(0.0 <= self.mask_replace_prob and 0.0 <= self.random_replace_prob
                 and self.mask_replace_prob + self.random_replace_prob <= 1.0, "data.mask_replace_prob",
                 "mask_replace_prob + random_replace_prob must be within [0, 1]")
        _require(self.vocab_size >= 128, "data.vocab_size", f"must be >= 128, got {self.vocab_size}")
        _require(self.max_train_tokens >= 0, "data.max_train_tokens", "must be >= 0")
        _require(self.max_val_blocks >= 1, "data.max_val_blocks", "must be >= 1")
        _require(self.max_test_blocks >= 0, "data.max_test_blocks", "must be >= 0")
        if self.name == "local":
            _require(len(self.files) > 0, "data.files", "data=local needs data.files=[path,...]")


@dataclass
class OptimConfig:
    """AdamW with one parameter group per muP role; the schedule multiplies each group's own LR multiplier."""

    lr: float = 1e-2
    """Base learning rate eta (one of the 7 transferred hyperparameters). Group LRs are eta * multiplier."""
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    """Decoupled weight decay (torch AdamW: lr * wd per step, so it follows each group's LR)."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (0 = off)."""
    warmup_frac: float = 0.05
    """Fraction of the token budget spent in linear warm-up."""
    schedule: Literal["linear", "cosine", "constant"] = "linear"
    """Decay after warm-up, down to ``min_lr_frac`` of the peak at the end of the budget."""
    min_lr_frac: float = 0.1

    def validate(self) -> None:
        _require(math.isfinite(self.lr) and self.lr > 0, "optim.lr", f"must be positive, got {self.lr}")
        _require(self.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        _require(self.grad_clip >= 0, "optim.grad_clip", "must be >= 0")
        _require(0.0 <= self.warmup_frac < 1.0, "optim.warmup_frac", "must be in [0, 1)")
        _require(0.0 <= self.min_lr_frac <= 1.0, "optim.min_lr_frac", "must be in [0, 1]")
        _require(all(0 <= b < 1 for b in self.betas), "optim.betas", "must be in [0, 1)")


@dataclass
class TrainConfig:
    """Training loop (``ptsweep.train.run``)."""

    tokens: float = 2e6
    """Token budget (input tokens, i.e. steps * batch_size * seq_len)."""
    batch_size: int = 16
    eval_every: int = 0
    """Evaluate every this many steps (0 = 10 evaluations over the run)."""
    eval_batches: int = 0
    """Validation batches per evaluation (0 = all fixed validation blocks)."""
    log_every: int = 10
    """Steps between metric logs."""
    device: str = "auto"
    """'auto' (cuda if available), 'cpu' or 'cuda[:i]'."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """'auto' = bf16 autocast on CUDA, fp32 on CPU."""
    compile: bool = False
    """torch.compile the model (off by default; 10-30 s compile on CPU)."""
    threads: int = 0
    """torch CPU threads (0 = leave torch's default)."""
    checkpoint_every_s: float = 300.0
    """Seconds between checkpoints (0 = only at the end)."""
    resume: bool = False
    """Continue from the run directory's last checkpoint (same data order)."""
    progress: bool = True
    """Show a tqdm progress bar."""
    checkpoint: bool = True
    """Write <run_dir>/checkpoint.pt (periodically and at the end); sweeps may turn it off to save disk."""
    stop_after_steps: int = 0
    """Stop (with a checkpoint) after this many optimizer steps of the run (0 = off): for interruption/resume tests."""
    micro_batch_size: int | str = 0
    """Blocks per forward/backward; gradients are accumulated to one update per batch_size (exact). 0 = the full
    batch; 'auto' = the full batch on the CPU, the largest that fits on CUDA (probe steps, ptsweep.train)."""

    def validate(self) -> None:
        _require(math.isfinite(self.tokens) and self.tokens > 0, "train.tokens", f"must be positive, got {self.tokens}")
        _require(self.batch_size >= 1, "train.batch_size", "must be >= 1")
        _require(self.eval_every >= 0, "train.eval_every", "must be >= 0")
        _require(self.eval_batches >= 0, "train.eval_batches", "must be >= 0")
        _require(self.log_every >= 1, "train.log_every", "must be >= 1")
        _require(self.checkpoint_every_s >= 0, "train.checkpoint_every_s", "must be >= 0")
        _require(self.stop_after_steps >= 0, "train.stop_after_steps", "must be >= 0")
        mb = self.micro_batch_size
        _require(mb == "auto" or (isinstance(mb, int) and not isinstance(mb, bool) and mb >= 0),
                 "train.micro_batch_size", f"must be 'auto' or an integer >= 0, got {mb!r}")


@dataclass
class TrackerConfig:
    """Where runs are recorded: always local files under ``out_dir``; W&B offline/online/disabled."""

    mode: Literal["offline", "online", "disabled"] = "offline"
    """W&B mode. 'online' needs WANDB_API_KEY in the environment (never written to any file)."""
    project: str = "ptsweep"
    entity: str = ""
    group: str = ""
    """W&B group (sweeps set it to the study name)."""
    tags: list[str] = field(default_factory=list)

    def validate(self) -> None:
        pass


@dataclass
class RayConfig:
    """How sweeps use Ray Tune. Local by default (127.0.0.1, no dashboard); RAY_ADDRESS or ``address`` joins a cluster."""

    address: str = ""
    """'' = start a local Ray on 127.0.0.1 (or use RAY_ADDRESS if set); 'auto' or host:port = existing cluster."""
    num_cpus: int = 0
    """CPUs for a local Ray (0 = all)."""
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    """GPU fraction per trial (e.g. 0.25 packs four small trials on one GPU)."""
    max_concurrent: int = 0
    """Trials running at once (0 = as many as resources allow)."""
    object_store_memory: int = 256 * 1024**2
    """Object store bytes for a local Ray."""
    storage_path: str = ""
    """Ray results storage ('' = <sweep dir>/ray); on a multi-node cluster a shared path (NFS, s3://...)."""

    def validate(self) -> None:
        _require(self.cpus_per_trial > 0, "ray.cpus_per_trial", "must be > 0")
        _require(self.gpus_per_trial >= 0, "ray.gpus_per_trial", "must be >= 0")


@dataclass
class SweepConfig:
    """Settings of the three sweeps and the muP studies (each field says which sweep reads it)."""

    study: str = ""
    """Study name: output folder runs/<study> and W&B group ('' = the sweep's default name)."""
    # tune-small
    num_samples: int = 32
    """tune-small: trials Optuna proposes (also the default budget of each baseline search, ``baseline_samples``)."""
    search_seed: int = 0
    """Seed of the Optuna TPE sampler and of the perturbations."""
    lr_range: tuple[float, float] = (1e-3, 1e-1)
    """Log-uniform range of optim.lr for PT."""
    weight_range: tuple[float, float] = (0.5, 1.5)
    """Log-uniform range of each information weight (PT 'mup': the loop-gain region that stays width-stable,
    experiments/coord-check/README.md)."""
    weight_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per-weight log-uniform ranges that replace ``weight_range`` for the weights named (keys: w_unary, w_child,
    w_head, w_topic_z, w_attn, w_topic_g)."""
    asha_grace_frac: float = 0.25
    """ASHA: minimum fraction of the budget before a trial can be stopped."""
    asha_reduction: int = 3
    """ASHA reduction factor (1 disables early stopping)."""
    # verify-transfer
    transfer_file: str = ""
    """verify-transfer / scaling-curves: path to transfer.yaml ('' = runs/<tune study>/transfer.yaml)."""
    width: int = 1536
    """verify-transfer: the width the transferred config is checked at."""
    alpha: float = 0.05
    """verify-transfer: significance level."""
    p: float = 0.05
    """verify-transfer: top fraction the base point must lie in."""
    n: int = 0
    """verify-transfer: perturbed points to run (0 = n_required; may exceed it, e.g. the paper's 62)."""
    perturb: float = 0.2
    """verify-transfer: each coordinate is drawn uniformly in [(1-perturb) S_i, (1+perturb) S_i]."""
    seeds: int = 3
    """verify-transfer: seeds of the base point; scaling-curves: seeds of every point (seed = cfg.seed + i)."""
    perturbed_seeds: int = 0
    """verify-transfer: seeds of each perturbed point, paired with the base's (point j at base seeds (j + r) mod
    seeds, r < perturbed_seeds; 0 = all base seeds, the complete paired design)."""
    test_alpha: float = 0.05
    """verify-transfer: level of the noise-aware tests of the verdict (family-wise over the perturbed points)."""
    equivalence_margin: float = 0.01
    """verify-transfer: relative margin within which a neighbourhood counts as "flat" (equivalent to the base)."""
    regret_tolerance: float = 0.004
    """verify-transfer: relative regret the user accepts (0.004 = 0.4 %, the gap [S] §3.1 called noise): the
    regret verdict passes when the upper bound of (L(S) - min over the box) / L(S) is below it, fails when the
    lower bound is above it (analysis.regret)."""
    allow_transfer_mismatch: bool = False
    """verify-transfer / scaling-curves: proceed although transfer.yaml was tuned under other settings (the
    summary records the mismatched keys)."""
    # scaling-curves
    scales: list[int] = field(default_factory=lambda: [256, 512, 768, 1024])
    """scaling-curves: PT widths; BERT/UT widths are matched by parameter count."""
    models: list[str] = field(default_factory=lambda: ["pt", "bert", "ut"])
    """scaling-curves: models to compare."""
    scaling: Literal["channels", "rank", "both"] = "channels"
    """scaling-curves: PT scaling paradigm(s)."""
    match: Literal["total", "non_embedding", "flops"] = "total"
    """scaling-curves / size --table: the count BERT/UT are matched to PT by (``models.sizing.match_shape``): total
    parameters ([S]'s framing), non-embedding parameters, or training FLOPs per token."""
    baseline_samples: int = 0
    """scaling-curves: Optuna trials of each baseline's search at each scale (0 = sweep.num_samples, the budget of
    PT's tune-small: equal tuning effort). Searched: optim.lr and optim.warmup_frac, with tune-small's ASHA."""
    baseline_lr_samples: int = 0
    """Deprecated (before issue 19: LR-only trials per baseline scale); ignored - the summary notes a value > 0.
    The budget is ``baseline_samples``."""
    baseline_lr_range: tuple[float, float] = (1e-4, 3e-3)
    """scaling-curves: log-uniform LR range for BERT/UT."""
    baseline_warmup_range: tuple[float, float] = (0.01, 0.2)
    """scaling-curves: log-uniform range of optim.warmup_frac for BERT/UT (widened past an edge up to 0.5)."""
    baseline_search_frac: float = 1.0
    """scaling-curves: fraction of the token budget used by each baseline LR-search trial."""
    baseline_lr_widen: int = 1
    """scaling-curves: times a baseline LR search whose best LR sits on an edge of its range (lowest / highest
    sixth in log space) is repeated on a range shifted one range-width past that edge (0 = only flag it)."""
    bootstrap: int = 1000
    """scaling-curves: bootstrap resamples (over seeds) of the fits and of the PT - baseline differences."""
    # coord-check (ptsweep.sweeps.coord_check)
    coord_widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512, 1024])
    """coord-check: widths to compare (PT with scaling=channels needs multiples of base_width / base_channels)."""
    coord_seeds: int = 3
    """coord-check: seeds per (parametrization, width); the statistic is averaged over them before fitting."""
    coord_steps: int = 4
    """coord-check: optimizer steps after init; sizes are measured at t = 0 (init) .. coord_steps."""
    coord_lr: float = 3e-2
    """coord-check: constant base LR of the steps (no warm-up, no clipping): large, so that mistakes show early."""
    coord_batch_size: int = 0
    """coord-check: blocks per training and measurement batch (0 = train.batch_size)."""
    coord_scaling: str = ""
    """coord-check: PT's scaling paradigm in the check ('channels' | 'rank'; '' = model.scaling)."""
    coord_schedule: str = "constant"
    """coord-check: 'constant' (coord_lr at every step, no clipping: mistakes show early) or 'train' (the run's
    warm-up and decay over coord_steps and its gradient clipping: the check of a real training run at the tuned
    eta = coord_lr)."""
    coord_measure_steps: list[int] = field(default_factory=list)
    """coord-check: steps at which sizes are measured and checked (besides init); empty = every step."""
    coord_tolerance: float = 0.25
    """coord-check: muP passes when every checked log-log slope (size vs width) is within +-tolerance of 0."""
    coord_parametrizations: list[str] = field(default_factory=lambda: ["mup", "sp"])
    """coord-check: parametrizations measured side by side; the verdict is about 'mup'."""
    strict: bool = False
    """coord-check: exit with status 1 when the muP verdict fails (for CI / make)."""
    # lr-transfer (ptsweep.sweeps.lr_transfer)
    lr_widths: list[int] = field(default_factory=lambda: [128, 256, 512, 1024])
    """lr-transfer: PT widths (smallest and largest define the drift)."""
    lr_grid_range: tuple[float, float] = (1e-3, 1e-1)
    """lr-transfer: lowest and highest base LR of the log-spaced grid."""
    lr_grid_points: int = 9
    """lr-transfer: number of LR grid points (log-spaced, both ends included)."""
    lr_sp_grid_range: list[float] = field(default_factory=list)
    """lr-transfer: [low, high] of the SP LR grid ([] = lr_grid_range). muP's eta multiplies the hidden LR by 1/N,
    SP's does not, so the two optima can sit decades apart."""
    lr_seeds: int = 3
    """lr-transfer: seeds at each of the ``lr_refine_top`` best values per (parametrization, width); stage 1 runs the
    whole grid with seed ``seed``, stage 2 adds seeds ``seed+1 .. seed+lr_seeds-1`` near the optimum."""
    lr_refine_top: int = 3
    """lr-transfer: grid values per (parametrization, width) that get the extra seeds, chosen from stage 1's losses
    (0 = every grid value: the full grid with every seed)."""
    lr_parametrizations: list[str] = field(default_factory=lambda: ["mup", "sp"])
    """lr-transfer: parametrizations compared."""
    lr_weight_grid: list[float] = field(default_factory=lambda: [0.25, 0.5, 1.0, 2.0, 4.0])
    """lr-transfer: grid of the information weight ``lr_weight_key`` (muP only) for the weight study ([] = skip it)."""
    lr_control: dict[str, Any] = field(default_factory=dict)
    """lr-transfer: overrides of a control model run over muP's LR grid beside PT (e.g. {"model.n_iters": 0}: PT
    without inference, the head reads the unary alone); empty = no control. Reported as study "control"."""
    lr_weight_key: str = "model.w_attn"
    """lr-transfer: the information weight of the weight study (one of model.w_unary ... model.w_topic_g)."""
    lr_weight_lr: float = 0.0
    """lr-transfer: base LR of the weight study (0 = optim.lr)."""
    lr_weight_widths: list[int] = field(default_factory=list)
    """lr-transfer: widths of the weight study ([] = lr_widths)."""
    lr_scaling: Literal["channels", "rank"] = "channels"
    """lr-transfer: PT width-scaling paradigm of the study (model.scaling of every trial)."""
    lr_tokens: float = 0.0
    """lr-transfer: token budget of every trial (0 = train.tokens)."""
    keep_checkpoints: bool = False
    """all sweeps: keep each finished trial's checkpoint.pt (off: deleted once the trial's ledger record is written)."""

    def validate(self) -> None:
        _require(self.num_samples >= 1, "sweep.num_samples", "must be >= 1")
        _require(0 < self.lr_range[0] < self.lr_range[1], "sweep.lr_range", "must be 0 < low < high")
        _require(0 < self.weight_range[0] < self.weight_range[1], "sweep.weight_range", "must be 0 < low < high")
        _require(isinstance(self.weight_ranges, dict) and set(self.weight_ranges) <= set(INFO_WEIGHTS),
                 "sweep.weight_ranges", f"keys must be information weights {list(INFO_WEIGHTS)}, got "
                                        f"{list(self.weight_ranges) if isinstance(self.weight_ranges, dict) else self.weight_ranges}")
        for key, rng in self.weight_ranges.items():
            _require(isinstance(rng, (list, tuple)) and len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng)
                     and 0 < rng[0] < rng[1], f"sweep.weight_ranges.{key}", f"must be [low, high] with 0 < low < high, got {rng}")
        _require(0 < self.alpha < 1, "sweep.alpha", "must be in (0, 1)")
        _require(0 < self.p < 1, "sweep.p", "must be in (0, 1)")
        _require(self.n >= 0, "sweep.n", "must be >= 0")
        _require(0 < self.perturb < 1, "sweep.perturb", "must be in (0, 1)")
        _require(self.seeds >= 1, "sweep.seeds", "must be >= 1")
        _require(0 <= self.perturbed_seeds <= self.seeds, "sweep.perturbed_seeds", "must be in [0, sweep.seeds]")
        _require(0.0 < self.test_alpha < 1.0, "sweep.test_alpha", "must be in (0, 1)")
        _require(self.equivalence_margin > 0.0, "sweep.equivalence_margin", "must be > 0")
        _require(0.0 < self.regret_tolerance < 1.0, "sweep.regret_tolerance", "must be in (0, 1) (relative regret)")
        _require(self.baseline_lr_widen >= 0, "sweep.baseline_lr_widen", "must be >= 0")
        _require(self.bootstrap >= 0, "sweep.bootstrap", "must be >= 0")
        _require(len(self.scales) >= 1 and all(s > 0 for s in self.scales), "sweep.scales", "must be positive widths")
        _require(set(self.models) <= set(MODEL_SCHEMAS) and len(self.models) >= 1, "sweep.models",
                 f"must be a subset of {sorted(MODEL_SCHEMAS)}, got {self.models}")
        _require(self.baseline_samples >= 0, "sweep.baseline_samples", "must be >= 0 (0 = sweep.num_samples)")
        _require(self.baseline_lr_samples >= 0, "sweep.baseline_lr_samples", "must be >= 0 (deprecated, ignored)")
        _require(0 < self.baseline_lr_range[0] < self.baseline_lr_range[1], "sweep.baseline_lr_range",
                 "must be 0 < low < high")
        _require(0 < self.baseline_warmup_range[0] < self.baseline_warmup_range[1] <= 0.5,
                 "sweep.baseline_warmup_range", "must be 0 < low < high <= 0.5")
        _require(0 < self.baseline_search_frac <= 1, "sweep.baseline_search_frac", "must be in (0, 1]")
        _require(len(self.coord_widths) >= 2 and all(w > 0 for w in self.coord_widths)
                 and len(set(self.coord_widths)) == len(self.coord_widths), "sweep.coord_widths",
                 f"need >= 2 distinct positive widths to fit a slope, got {self.coord_widths}")
        _require(self.coord_seeds >= 1, "sweep.coord_seeds", "must be >= 1")
        _require(self.coord_steps >= 0, "sweep.coord_steps", "must be >= 0")
        _require(math.isfinite(self.coord_lr) and self.coord_lr > 0, "sweep.coord_lr", "must be positive")
        _require(self.coord_batch_size >= 0, "sweep.coord_batch_size", "must be >= 0")
        _require(self.coord_scaling in ("", "channels", "rank"), "sweep.coord_scaling",
                 f"must be '', 'channels' or 'rank', got {self.coord_scaling!r}")
        _require(self.coord_schedule in ("constant", "train"), "sweep.coord_schedule",
                 f"must be 'constant' or 'train', got {self.coord_schedule!r}")
        _require(all(0 < t <= self.coord_steps for t in self.coord_measure_steps), "sweep.coord_measure_steps",
                 f"steps must lie in 1..coord_steps={self.coord_steps}, got {self.coord_measure_steps}")
        _require(0 < self.coord_tolerance < 1, "sweep.coord_tolerance", "must be in (0, 1)")
        for key, pars in (("sweep.coord_parametrizations", self.coord_parametrizations),
                          ("sweep.lr_parametrizations", self.lr_parametrizations)):
            _require(len(pars) >= 1 and set(pars) <= {"mup", "mup_paper", "sp"} and len(set(pars)) == len(pars), key,
                     f"must be distinct values of mup | mup_paper | sp, got {pars}")
        _require(len(self.lr_widths) >= 2 and all(w > 0 for w in self.lr_widths)
                 and len(set(self.lr_widths)) == len(self.lr_widths), "sweep.lr_widths",
                 f"need >= 2 distinct positive widths, got {self.lr_widths}")
        _require(0 < self.lr_grid_range[0] < self.lr_grid_range[1], "sweep.lr_grid_range", "must be 0 < low < high")
        _require(self.lr_grid_points >= 2, "sweep.lr_grid_points", "must be >= 2")
        _require(not self.lr_sp_grid_range or (len(self.lr_sp_grid_range) == 2
                                                and 0 < self.lr_sp_grid_range[0] < self.lr_sp_grid_range[1]),
                 "sweep.lr_sp_grid_range", f"must be [] or [low, high] with 0 < low < high, got {self.lr_sp_grid_range}")
        _require(self.lr_seeds >= 1, "sweep.lr_seeds", "must be >= 1")
        _require(self.lr_refine_top >= 0, "sweep.lr_refine_top", "must be >= 0 (0 = every grid value)")
        _require(self.lr_weight_key in {f"model.{w}" for w in INFO_WEIGHTS}, "sweep.lr_weight_key",
                 f"must be one of {', '.join('model.' + w for w in INFO_WEIGHTS)}, got {self.lr_weight_key!r}")
        _require(math.isfinite(self.lr_weight_lr) and self.lr_weight_lr >= 0, "sweep.lr_weight_lr", "must be >= 0")
        _require(all(w > 0 for w in self.lr_weight_widths) and len(set(self.lr_weight_widths)) == len(self.lr_weight_widths),
                 "sweep.lr_weight_widths", f"must be distinct positive widths, got {self.lr_weight_widths}")
        _require(math.isfinite(self.lr_tokens) and self.lr_tokens >= 0, "sweep.lr_tokens", "must be >= 0")
        _require(all(math.isfinite(w) and w > 0 for w in self.lr_weight_grid), "sweep.lr_weight_grid",
                 f"information weights must be positive, got {self.lr_weight_grid}")


@dataclass
class RunConfig:
    """One training run: what ``train.run`` receives."""

    model: Any = field(default_factory=PTConfig)
    """A PTConfig, BertConfig or UTConfig, chosen by ``model.name``."""
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    seed: int = 0
    """Seed of init, data order and training masks."""
    out_dir: str = "runs"
    """Root of all outputs."""
    run_name: str = ""
    """Run folder <out_dir>/train/<run_name>-<config hash> ('' = <model>-w<width>-s<seed>; train.run_dir)."""
    preset: str = ""
    """Name of the preset that was applied (informational)."""

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if hasattr(v, "validate"):
                v.validate()


# --------------------------------------------------------------------------------------------------------------
# dict <-> dataclass
# --------------------------------------------------------------------------------------------------------------
def _build(cls: type, data: dict, prefix: str):
    """Instantiate dataclass ``cls`` from ``data``, rejecting unknown keys and coercing simple types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or '<root>'}: expected a mapping, got {type(data).__name__}")
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            raise ConfigError(f"{prefix}{key}: unknown config key (valid keys: {', '.join(sorted(names))})")
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _coerce(hints[key], value, f"{prefix}{key}")
    return cls(**kwargs)


def _coerce(tp, value, key: str):
    origin = get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key + ".")
    if origin in (Union, types.UnionType) and type(None) in get_args(tp):  # X | None
        inner = [a for a in get_args(tp) if a is not type(None)]
        return None if value is None else _coerce(inner[0], value, key)
    if origin is Literal:
        _require(value in get_args(tp), key, f"must be one of {list(get_args(tp))}, got {value!r}")
        return value
    if origin in (list, tuple):
        _require(isinstance(value, (list, tuple)), key, f"expected a list, got {value!r}")
        args = get_args(tp)
        inner = args[0] if args else Any
        items = [_coerce(inner, v, key) for v in value]
        if origin is tuple and len(args) == 2 and args[1] is not Ellipsis:
            items = [_coerce(a, v, key) for a, v in zip(args, value)]
            _require(len(value) == len(args), key, f"expected {len(args)} values, got {len(value)}")
        return tuple(items) if origin is tuple else items
    if tp is bool:
        _require(isinstance(value, bool), key, f"expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        _require(isinstance(value, int) and not isinstance(value, bool), key, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{key}: expected a number, got {value!r}") from None
        _require(isinstance(value, (int, float)) and not isinstance(value, bool), key, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        _require(isinstance(value, str), key, f"expected a string, got {value!r}")
        return value
    return value


def from_dict(data: dict) -> RunConfig:
    """Build and validate a :class:`RunConfig` from a plain (Hydra-composed) dict.

    The model section is parsed with the schema named by ``model.name`` (pt, bert, ut)."""
    data = dict(data)
    model = dict(data.pop("model", {}) or {})
    name = model.get("name", "pt")
    if name not in MODEL_SCHEMAS:
        raise ConfigError(f"model.name: unknown model {name!r} (choose from {', '.join(MODEL_SCHEMAS)})")
    cfg = _build(RunConfig, data, "")
    cfg.model = _build(MODEL_SCHEMAS[name], model, "model.")
    cfg.validate()
    return cfg


def to_dict(cfg) -> dict:
    """Plain nested dict of a config dataclass (tuples become lists), for YAML/W&B/results tables."""

    def conv(v):
        if dataclasses.is_dataclass(v):
            return {f.name: conv(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    return conv(cfg)


def flatten(d: dict, prefix: str = "") -> dict:
    """{'model': {'width': 64}} -> {'model.width': 64}: the one-name-per-hyperparameter view."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def with_overrides(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """A copy of ``cfg`` with dotted-key overrides applied (``{'model.width': 512, 'optim.lr': 3e-3}``), re-validated.

    Changing ``model.name`` switches the model schema; the other model keys must then exist in the new schema."""
    data = to_dict(cfg)
    for key, value in overrides.items():
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            if p not in node or not isinstance(node[p], dict):
                raise ConfigError(f"{key}: unknown config key")
            node = node[p]
        node[parts[-1]] = value
    if "model.name" in overrides:
        schema = MODEL_SCHEMAS.get(data["model"]["name"])
        if schema is not None:
            valid = {f.name for f in dataclasses.fields(schema)}
            data["model"] = {k: v for k, v in data["model"].items()
                             if k in valid and (k in {o.split('.', 1)[1] for o in overrides if o.startswith('model.')} or k in ("name",))}
    return from_dict(data)
