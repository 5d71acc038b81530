"""Where a sweep's trials run: the GPUs each asks Ray for, and inside its worker the device and the memory share
that follow from what Ray assigned.

- Request (driver): ``ray.gpus_per_trial``, or ``ray.pack_gpus_per_trial`` for a trial of ``model.width <=
  ray.pack_width``: small widths leave a GPU mostly idle (launch-bound), so several share one.
- Device (worker): Ray sets ``CUDA_VISIBLE_DEVICES`` for a trial that was given GPUs; one given none still sees
  every GPU of its node, and ``train.device=auto`` would put it on ``cuda:0`` beside another trial: it runs on the
  CPU instead.
- Memory (worker): a fractional share caps the process's CUDA memory at that fraction
  (``torch.cuda.set_per_process_memory_fraction``), so a trial that outgrows its share fails alone with an
  out-of-memory error instead of its neighbours, and ``train.micro_batch_size=auto`` probes within its share.
"""

from __future__ import annotations

from ptsweep.config import RunConfig
from ptsweep.errors import ConfigError


def gpus_for_width(cfg: RunConfig, width: int) -> float:
    """GPUs a trial of ``width`` asks for (module docstring)."""
    if cfg.ray.pack_width and width <= cfg.ray.pack_width:
        return cfg.ray.pack_gpus_per_trial
    return cfg.ray.gpus_per_trial


def trial_device(setting: str, gpus: float) -> str:
    """``train.device`` of a trial that Ray gave ``gpus`` GPUs: 'auto' without a GPU is 'cpu'; a CUDA device
    without a GPU is a ConfigError (it would use a GPU that another trial holds)."""
    if gpus > 0:
        return setting
    if setting == "auto":
        return "cpu"
    if setting.startswith("cuda"):
        raise ConfigError(f"train.device={setting}: this trial was given no GPU (ray.gpus_per_trial / "
                          f"ray.pack_gpus_per_trial = 0); set train.device=auto or request GPUs")
    return setting


def assigned_gpus() -> float:
    """GPUs Ray assigned to the calling trial's worker (0 outside Ray)."""
    import ray

    if not ray.is_initialized():
        return 0.0
    return float(ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0))


def cap_gpu_memory(gpus: float) -> float | None:
    """With a fractional share (0 < gpus < 1) and CUDA, cap this process's memory on its GPU at ``gpus`` of it;
    returns the cap (None: none set)."""
    import torch

    if not 0 < gpus < 1 or not torch.cuda.is_available():
        return None
    torch.cuda.set_per_process_memory_fraction(gpus, torch.cuda.current_device())
    return gpus
