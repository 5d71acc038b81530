"""A run's state outside the model math: device and precision, RNG, checkpoints and the resume check, run folders.

Checkpoints (``<run_dir>/checkpoint.pt``): model, optimizer, the loop's ``state``, the RNG states (torch CPU and
CUDA, numpy, random) and the composed config, written via a temporary file + ``os.replace``.
"""

from __future__ import annotations

import glob
import json
import math
import os
import random
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch

from ptsweep.config import RunConfig, to_dict
from ptsweep.errors import ConfigError
from ptsweep.identity import config_hash, result_config
from ptsweep.io import replace_atomically
from ptsweep.tracking import OVERRIDES_ENV

CHECKPOINT = "checkpoint.pt"


def run_label(cfg: RunConfig) -> str:
    return cfg.run_name or f"{cfg.model.name}-w{cfg.model.width}-s{cfg.seed}"


def default_run_dir(cfg: RunConfig) -> Path:
    """<out_dir>/train/<run_name or model-w<width>-s<seed>>-<config hash> (``ptsweep.identity``)."""
    return Path(cfg.out_dir) / "train" / f"{run_label(cfg)}-{config_hash(cfg)}"


def _differing(old: dict, new: dict, limit: int = 6) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    parts = [f"{k}={old.get(k, '<unset>')} (now {new.get(k, '<unset>')})" for k in keys[:limit]]
    return ", ".join(parts) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def check_resume(cfg: RunConfig, run_dir: Path, default_dir: bool) -> None:
    """``train.resume=true``: ConfigError naming the differing keys if the checkpoint to resume was written under
    another config (for a default folder without one: a sibling run of the same name)."""
    if not cfg.train.resume:
        return
    now = result_config(cfg)
    ckpt = run_dir / CHECKPOINT
    candidates = [ckpt] if ckpt.exists() else []
    if not candidates and default_dir:
        candidates = sorted(run_dir.parent.glob(f"{glob.escape(run_label(cfg))}-*/{CHECKPOINT}"))
    best = None
    for path in candidates:
        try:
            old = result_config(torch.load(path, map_location="cpu", weights_only=False).get("config", {}))
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is reported by the load itself
            continue
        diff = _differing(old, now)
        if diff and (best is None or diff.count("(now") < best[1].count("(now")):
            best = (path, diff)
    if best is not None:
        raise ConfigError(f"train.resume: {best[0]} was written under another config: {best[1]} - resume with "
                          f"those values, or drop train.resume to start a new run")


def save_config_dir(run_dir: Path, cfg: RunConfig) -> None:
    """``<run_dir>/.hydra/config.yaml`` (the composed config) and ``overrides.yaml`` (the CLI overrides as typed)."""
    import yaml

    d = run_dir / ".hydra"
    d.mkdir(parents=True, exist_ok=True)
    try:
        overrides = json.loads(os.environ.get(OVERRIDES_ENV, "[]"))
    except json.JSONDecodeError:
        overrides = []
    (d / "config.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(to_dict(cfg), default=str)),
                                                  sort_keys=False))
    (d / "overrides.yaml").write_text(yaml.safe_dump([str(o) for o in overrides], sort_keys=False))


def resolve_device(spec: str) -> torch.device:
    """'auto' -> cuda if available else cpu; a CUDA device always with its index ('cuda' -> the current one, since
    torch's memory getters refuse an index-less device). On the CPU, flush denormal floats to zero (PT's saturated
    softmaxes make them, and they slow CPU matmuls down)."""
    device = with_index(torch.device(("cuda" if torch.cuda.is_available() else "cpu") if spec == "auto" else spec))
    if device.type == "cpu":
        torch.set_flush_denormal(True)
    return device


def with_index(device: torch.device) -> torch.device:
    """``device``, a CUDA one without an index as the current device ('cuda' -> 'cuda:<current>')."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def uses_bf16(device: torch.device, precision: str) -> bool:
    """bf16 autocast on CUDA for precision auto/bf16; bf16 on CPU only when asked explicitly; else fp32."""
    return precision == "bf16" or (precision == "auto" and device.type == "cuda")


def autocast_context(device: torch.device, precision: str):
    """The autocast of :func:`uses_bf16`, or none (fp32)."""
    if uses_bf16(device, precision):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def set_tf32(device: torch.device, allow: bool) -> bool:
    """On CUDA, let fp32 matmuls run on TF32 tensor cores (``train.tf32``; process-wide, so set either way);
    returns whether TF32 is on for this run."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow
    return allow


def compile_encoder(model, mode: str, device: torch.device) -> None:
    """``train.compile``: ``torch.compile`` the model's encoder with ``mode`` ('reduce-overhead': CUDA graphs, CUDA
    only); 'none' leaves it eager."""
    if mode == "none":
        return
    if mode == "reduce-overhead" and device.type != "cuda":
        raise ConfigError(f"train.compile=reduce-overhead needs a CUDA device (CUDA graphs), the run is on "
                          f"{device}; use train.compile=default or none")
    model.encode = torch.compile(model.encode, mode=mode)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save, never a half-written file (:func:`ptsweep.io.replace_atomically`)."""
    replace_atomically(path, lambda tmp: torch.save(payload, tmp))


def write_checkpoint(run_dir: Path, cfg: RunConfig, model, optimizer, state: dict) -> None:
    """``<run_dir>/checkpoint.pt``: model, optimizer, the loop's ``state``, the RNG states and the config."""
    save_checkpoint(run_dir / CHECKPOINT, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                           "state": dict(state), "rng": rng_state(), "config": to_dict(cfg)})


def initial_state(cfg: RunConfig, run_dir: Path, model, optimizer, tracker, device: torch.device) -> dict:
    """The loop's counters and history: fresh, or with ``train.resume`` loaded from the checkpoint in ``run_dir``
    with the model, optimizer and RNG states (the history replayed to the tracker)."""
    ckpt_path = run_dir / CHECKPOINT
    state = {"step": 0, "history": [], "wall_s": 0.0, "val_loss": math.nan, "val_loss_init": math.nan,
             "best_val_loss": math.inf, "train_loss": math.nan, "eval": {}}
    if cfg.train.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state.update(ckpt["state"])
        set_rng_state(ckpt["rng"])
        replay = getattr(tracker, "restore_history", tracker.log)
        for row in state["history"]:
            replay({k: v for k, v in row.items() if k != "step"}, row["step"])
    elif cfg.train.resume:
        print(f"train.resume: no checkpoint in {run_dir}, starting from step 0", file=sys.stderr)
    return state
