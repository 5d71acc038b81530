"""Schemas of one run besides the model (data, optimiser, training loop, tracker, Ray) and RunConfig, which
gathers them with the model schema ``model.name`` picks."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from ptsweep.config.checks import one_of, require
from ptsweep.config.model import PTConfig
from ptsweep.config.sweep import SweepConfig

PROBES = ("update_sizes", "message_stats")
"""The training probes ``train.probes`` can choose (``train.monitor.build_probes``)."""

COMPILE_MODES = ("none", "default", "reduce-overhead")


@dataclass
class DataConfig:
    """Corpus, tokenizer, packing and MLM masking (``ptsweep.data``)."""

    name: str = "shakespeare"
    """Corpus: 'shakespeare' (the embedded plays), 'minipile' (from the HF Hub) or 'local' (the user's own files)."""
    files: list[str] = field(default_factory=list)
    """data=local: text (.txt), .jsonl/.json or .parquet files; globs allowed."""
    val_files: list[str] = field(default_factory=list)
    """data=local: optional validation files; if empty, ``val_fraction`` of the documents are held out."""
    build_command: str = ""
    """data=local: the command that builds ``files`` and ``val_files`` (named by the missing-file error)."""
    text_field: str = "text"
    """Column holding the text in json/parquet files."""
    hf_dataset: str = "JeanKaddour/minipile"
    """data=minipile: the HF dataset id."""
    tokenizer: str = "bert-base-uncased"
    """HF tokenizer name or local path; 'wordpiece' = always train the cached WordPiece of ``vocab_size``."""
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
    """Held-out TEST blocks after the validation blocks (0 = none); every run reports ``test_loss`` on them."""
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
    token_cache: str = ""
    """A prepared token-cache folder to open as is (set by sweep drivers; '' = find or build it)."""

    @property
    def label(self) -> str:
        """The corpus in words: its name, or for local files the folder of the first training file."""
        if self.name != "local" or not self.files:
            return self.name
        first = PurePath(self.files[0])
        return f"{first.parent.name or first.name} (local files)"

    def validate(self) -> None:
        one_of(self.name, ("shakespeare", "minipile", "local"), "data.name")
        require(self.seq_len >= 8, "data.seq_len", f"must be >= 8, got {self.seq_len}")
        require(0.0 < self.val_fraction < 1.0, "data.val_fraction", "must be in (0, 1)")
        require(0.0 < self.mask_prob < 1.0, "data.mask_prob", "must be in (0, 1)")
        require(0.0 <= self.mask_replace_prob and 0.0 <= self.random_replace_prob
                 and self.mask_replace_prob + self.random_replace_prob <= 1.0, "data.mask_replace_prob",
                 "mask_replace_prob + random_replace_prob must be within [0, 1]")
        require(self.vocab_size >= 128, "data.vocab_size", f"must be >= 128, got {self.vocab_size}")
        require(self.max_train_tokens >= 0, "data.max_train_tokens", "must be >= 0")
        require(self.max_val_blocks >= 1, "data.max_val_blocks", "must be >= 1")
        require(self.max_test_blocks >= 0, "data.max_test_blocks", "must be >= 0")
        if self.name == "local":
            require(len(self.files) > 0, "data.files", "data=local needs data.files=[path,...]")


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
    warmup_frac: float = 0.25
    """Fraction of the token budget spent in linear warm-up (BERT / UT: searched, ``sweep.baseline.warmup_range``)."""
    schedule: str = "linear"
    """Decay after warm-up ('linear' | 'cosine' | 'constant') to ``min_lr_frac`` of the peak at the budget's end."""
    min_lr_frac: float = 0.1

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuple stays a tuple
        self.betas = tuple(self.betas)

    def validate(self) -> None:
        one_of(self.schedule, ("linear", "cosine", "constant"), "optim.schedule")
        require(math.isfinite(self.lr) and self.lr > 0, "optim.lr", f"must be positive, got {self.lr}")
        require(self.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        require(self.grad_clip >= 0, "optim.grad_clip", "must be >= 0")
        require(0.0 <= self.warmup_frac < 1.0, "optim.warmup_frac", "must be in [0, 1)")
        require(0.0 <= self.min_lr_frac <= 1.0, "optim.min_lr_frac", "must be in [0, 1]")
        require(all(0 <= b < 1 for b in self.betas), "optim.betas", "must be in [0, 1)")


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
    precision: str = "auto"
    """'auto' (bf16 autocast on CUDA, fp32 on CPU) | 'fp32' | 'bf16'."""
    compile: bool | str = False
    """torch.compile the model's encoder: 'none' | 'default' | 'reduce-overhead' (CUDA graphs, CUDA only); false =
    'none', true = 'default'."""
    tf32: bool = True
    """On CUDA, fp32 matmuls may use TF32 tensor cores (under bf16 autocast only the few fp32 ones are affected)."""
    prefetch: bool = True
    """Build each training batch one step ahead on a background thread (``train.prefetch``; same batches)."""
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
    probes: list[str] = field(default_factory=lambda: ["update_sizes"])
    """Measurements the run logs without changing its numbers (``train.monitor``): 'update_sizes' (each muP role's
    update and parameter RMS), 'message_stats' (PT only: the MFVI message sizes at every evaluation)."""
    micro_batch_size: int | str = 0
    """Blocks per forward/backward, gradients accumulated to one update per batch_size. 0 = the full batch; 'auto' =
    the full batch on the CPU, the largest that fits on CUDA."""

    @property
    def compile_mode(self) -> str:
        """``compile`` as a torch.compile mode name, or 'none'."""
        if isinstance(self.compile, bool):
            return "default" if self.compile else "none"
        return self.compile

    def validate(self) -> None:
        one_of(self.precision, ("auto", "fp32", "bf16"), "train.precision")
        one_of(self.compile_mode, COMPILE_MODES, "train.compile")
        require(math.isfinite(self.tokens) and self.tokens > 0, "train.tokens", f"must be positive, got {self.tokens}")
        require(self.batch_size >= 1, "train.batch_size", "must be >= 1")
        require(self.eval_every >= 0, "train.eval_every", "must be >= 0")
        require(self.eval_batches >= 0, "train.eval_batches", "must be >= 0")
        require(self.log_every >= 1, "train.log_every", "must be >= 1")
        require(self.checkpoint_every_s >= 0, "train.checkpoint_every_s", "must be >= 0")
        require(self.stop_after_steps >= 0, "train.stop_after_steps", "must be >= 0")
        mb = self.micro_batch_size
        require(mb == "auto" or (isinstance(mb, int) and not isinstance(mb, bool) and mb >= 0),
                 "train.micro_batch_size", f"must be 'auto' or an integer >= 0, got {mb!r}")


@dataclass
class TrackerConfig:
    """Where runs are recorded: always local files under ``out_dir``; W&B offline/online/disabled."""

    mode: str = "offline"
    """W&B mode: 'offline' | 'online' (needs WANDB_API_KEY in the environment) | 'disabled'."""
    project: str = "ptsweep"
    entity: str = ""
    group: str = ""
    """W&B group (sweeps set it to the study name)."""
    tags: list[str] = field(default_factory=list)
    system_metrics: bool = True
    """W&B's system metrics (GPU, CPU, disk, network) of training runs."""

    def validate(self) -> None:
        one_of(self.mode, ("offline", "online", "disabled"), "tracker.mode")


@dataclass
class RayConfig:
    """How sweeps use Ray Tune. Local by default (127.0.0.1, no dashboard); RAY_ADDRESS or ``address`` joins a
    cluster."""

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
    pack_width: int = 0
    """Trials of model.width <= pack_width ask for ``pack_gpus_per_trial`` GPUs instead (0 = off)."""
    pack_gpus_per_trial: float = 0.25
    """GPUs of a trial at or below ``pack_width`` (0.25: four per GPU)."""
    max_failures: int = 2
    """Times Ray Tune restarts a trial whose worker died; the restart resumes from the trial's checkpoint."""

    def validate(self) -> None:
        require(self.cpus_per_trial > 0, "ray.cpus_per_trial", "must be > 0")
        require(self.gpus_per_trial >= 0, "ray.gpus_per_trial", "must be >= 0")
        require(self.pack_width >= 0, "ray.pack_width", "must be >= 0")
        require(0 < self.pack_gpus_per_trial <= 1, "ray.pack_gpus_per_trial", "must be in (0, 1]")
        require(self.max_failures >= 0, "ray.max_failures", "must be >= 0")


@dataclass
class RunConfig:
    """One training run: what ``train.run`` receives."""

    model: Any = field(default_factory=PTConfig)
    """A PTConfig, BertConfig, UTConfig or ModernBertConfig, chosen by ``model.name``."""
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
        for probe in self.train.probes:
            one_of(probe, PROBES, "train.probes")
        if self.sweep.lr_horizon.anchor and self.model.name == "pt":  # PT's base width; a baseline trial has none
            require(self.model.parametrization == "mup_sp", "sweep.lr_horizon.anchor",
                    f"anchors 'mup_sp' only; model.parametrization is '{self.model.parametrization}' "
                    f"(leave the anchor at 0)")
        if "message_stats" in self.train.probes:  # PT's MFVI iterations: none without PT or without inference
            require(self.model.name == "pt", "train.probes",
                    f"message_stats measures PT's messages; model is {self.model.name}")
            require(self.model.n_iters >= 1, "train.probes",
                    "message_stats needs model.n_iters >= 1 (no messages at 0)")


