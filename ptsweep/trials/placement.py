"""Where a sweep's trials run (docs/running.md, "On a Ray cluster"): the GPUs each asks Ray for, and inside its worker
the device (CPU when Ray gave it no GPU: it would still see every GPU of its node) and the CUDA memory cap of a
fractional share (a trial that outgrows its share fails alone).
"""

from __future__ import annotations

from ptsweep.config import RunConfig
from ptsweep.errors import ConfigError


def gpus_for_width(cfg: RunConfig, width: int) -> float:
    """GPUs a trial of ``width`` asks for: ``ray.pack_gpus_per_trial`` up to ``ray.pack_width``, else
    ``ray.gpus_per_trial``."""
    if cfg.ray.pack_width and width <= cfg.ray.pack_width:
        return cfg.ray.pack_gpus_per_trial
    return cfg.ray.gpus_per_trial


def trial_device(setting: str, gpus: float) -> str:
    """``train.device`` of a trial that Ray gave ``gpus`` GPUs: 'auto' without a GPU is 'cpu', a CUDA device a
    ConfigError."""
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
    """Cap this process's CUDA memory at a fractional share ``gpus`` (0 < gpus < 1); returns the cap or None."""
    import torch

    if not 0 < gpus < 1 or not torch.cuda.is_available():
        return None
    torch.cuda.set_per_process_memory_fraction(gpus, torch.cuda.current_device())
    return gpus
