"""What a run logs besides its losses: the probes ``train.probes`` chooses, peak GPU memory and model FLOP
utilisation.

A probe measures without changing the run's numbers; the step loop calls ``before_logged_step()`` before the
optimizer step of a log step, ``on_logged_step()`` after it and ``on_evaluation()`` after an evaluation, the last two
returning metrics for that row (:func:`build_probes`; an experiment adds its own through ``train.run(...,
probes=[factory])``).

- ``update_rms/<role>`` and ``param_rms/<role>``: RMS of one optimizer step's change, and of the value, of the first
  tensor of each muP role's optimizer groups; muP keeps them of the same order at every width (Tensor Programs V).
- ``gpu_peak_mem_gib``: ``torch.cuda.max_memory_allocated`` since training started (CUDA only).
- ``mfu``: flops_per_token x tokens/s / the device's dense peak FLOP/s at the run's matmul precision
  (:data:`PEAK_TFLOPS`; None elsewhere).
"""

from __future__ import annotations

import re

import torch

PEAK_TFLOPS = (
    (r"H100.*PCIe", {"bf16": 756.0, "tf32": 378.0}),
    (r"H100.*NVL", {}),  # not listed: its datasheet quotes two-GPU numbers
    (r"H100|H200", {"bf16": 989.4, "tf32": 494.7}),  # SXM; the H200 has the H100's compute
    (r"A100", {"bf16": 312.0, "tf32": 156.0}),
    (r"L40S", {"bf16": 362.05, "tf32": 183.0}),
    (r"\bL4\b", {"bf16": 121.0, "tf32": 60.0}),
)
"""Dense peak TFLOP/s by device-name pattern (first match wins) and matmul precision (vendor datasheets)."""


def matmul_precision(device: torch.device, autocast_bf16: bool) -> str | None:
    """The precision the run's matmuls execute in: 'bf16' (autocast), 'tf32' (fp32 with TF32 allowed) or None."""
    if device.type != "cuda":
        return None
    if autocast_bf16:
        return "bf16"
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else None


def peak_flops(device_name: str, precision: str | None) -> float | None:
    """Dense peak FLOP/s of ``device_name`` at ``precision`` (:data:`PEAK_TFLOPS`), None when not listed."""
    if precision is None:
        return None
    for pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, device_name):
            return peaks[precision] * 1e12 if precision in peaks else None
    return None


def mfu(flops_per_token: float, tokens_per_s: float, peak: float | None) -> float | None:
    """Model FLOP utilisation (module docstring); None without a known peak."""
    return None if peak is None else flops_per_token * tokens_per_s / peak


class UpdateSizes:
    """The probe 'update_sizes': the RMS of one step's change of the tracked tensors of each role."""

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.tracked: dict[str, list[torch.Tensor]] = {}
        self.before: dict | None = None
        for group in optimizer.param_groups:
            if group["params"]:
                self.tracked.setdefault(group.get("role", "group"), []).append(group["params"][0])

    def before_logged_step(self) -> None:
        self.before = self.snapshot()

    def on_logged_step(self) -> dict[str, float]:
        return self.sizes(self.before)

    def on_evaluation(self) -> dict:
        return {}

    def snapshot(self) -> dict[str, list[torch.Tensor]]:
        """Copies of the tracked tensors (before the optimizer step)."""
        return {role: [p.detach().clone() for p in ps] for role, ps in self.tracked.items()}

    def sizes(self, before: dict[str, list[torch.Tensor]]) -> dict[str, float]:
        """``update_rms/<role>`` and ``param_rms/<role>`` over the role's tracked tensors (after the step)."""
        out = {}
        for role, ps in self.tracked.items():
            n = sum(p.numel() for p in ps)
            du = sum(float((p.detach().float() - b.float()).pow(2).sum()) for p, b in zip(ps, before[role]))
            sq = sum(float(p.detach().float().pow(2).sum()) for p in ps)
            out[f"update_rms/{role}"] = (du / n) ** 0.5
            out[f"param_rms/{role}"] = (sq / n) ** 0.5
        return out


def peak_memory_gib(device: torch.device) -> float | None:
    """``torch.cuda.max_memory_allocated`` in GiB (since the last reset), None off CUDA."""
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def build_probes(names, model: torch.nn.Module, optimizer: torch.optim.Optimizer, val: list,
                 device: torch.device, factories=()) -> list:
    """The probes ``names`` chose, then those of ``factories`` (each called as ``factory(model, optimizer, val,
    device)``); ``val``: the validation batches."""
    probes = []
    for name in names:
        if name == "update_sizes":
            probes.append(UpdateSizes(optimizer))
        elif name == "message_stats":
            from ptsweep.train.message_stats import MessageStats

            probes.append(MessageStats(model, val[0], device))
        else:
            raise ValueError(f"unknown probe {name!r}")
    return probes + [factory(model, optimizer, val, device) for factory in factories]
