"""Every muP rule in one place: parameter roles -> init std and LR multiplier ([S] Tables 1-2, spec §8).

A parameter gets its role where it is created (:func:`declare`), never from its name. The table below is the whole
rule set; `build_optimizer` makes one AdamW group per (role, multiplier) and the LR schedule multiplies each group's
``lr_mult`` (it never sets absolute LRs, which would silently undo muP).

| role   | tensors in PT                   | muP init        | muP LR  | SP (original PT)                |
|--------|---------------------------------|-----------------|---------|---------------------------------|
| input  | unary S (V x N)                 | N(0, 1)         | eta     | declared ``sp_init``; LR eta    |
| gain   | RMSNorm gamma of the MLM head   | 1               | eta     | 1; LR eta                       |
| bias   | decoder bias b_out, all biases  | 0               | eta     | declared ``sp_init``; LR eta    |
| hidden | U, V (K x C x N x r); B (M x N) | N(0, 1/N)       | eta / N | declared ``sp_init``; LR eta    |
| output | decoder W_out (V x N)           | N(0, 1/N^2)     | eta / N | declared ``sp_init``; LR eta    |

N is the model width (dim_z). "Output LR eta/N" follows [S] Table 2 (App. C's multiplier 1 is wrong without a 1/N
forward multiplier; spec §8).

'mup_paper' uses the table literally; 'mup' and 'mup_sp' multiply the init std and the LR of some tensors by
base-shape constants declared with the parameter (``mup_init_mult``, ``mup_lr_mult``: same exponent of N;
``models.pt_constants.MFVIConstants``), 'mup_sp' so that at the base width every init and AdamW update is SP's.

A variant of a model that trains one tensor at another LR says so here, through :func:`lr_rule` (a factor on the
declared constant and an absolute cap on the peak LR, under muP only): the one hook for per-tensor LR rules; one that
decays a tensor by a set amount per step whatever its LR, through :func:`wd_rule`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from enum import Enum
from typing import NamedTuple

import torch
from torch import nn


class Role(str, Enum):
    """muP parameter group ([S] Table 1)."""

    INPUT = "input"
    GAIN = "gain"
    BIAS = "bias"
    HIDDEN = "hidden"
    OUTPUT = "output"


_DECLARED_ATTR = "_ptsweep_declared"
"""The parameter attribute where :func:`declare` keeps its :class:`Declared`."""
_LR_RULE_ATTR = "_ptsweep_lr_rule"
"""The parameter attribute where :func:`lr_rule` keeps (factor, cap)."""
_WD_RULE_ATTR = "_ptsweep_wd_rule"
"""The parameter attribute where :func:`wd_rule` keeps the decay per step."""


class Declared(NamedTuple):
    """What :func:`declare` records on a parameter."""

    role: Role
    sp_init: Callable[[torch.Tensor], None] | None
    mup_init_mult: float
    mup_lr_mult: float


MUP_VARIANTS = ("mup_sp", "mup", "mup_paper")
"""Parametrizations that follow the muP init/LR table (they differ only in declared init multipliers)."""


def is_mup(parametrization: str) -> bool:
    """True for the muP family (:data:`MUP_VARIANTS`); False for 'sp'; raises on anything else."""
    if parametrization == "sp":
        return False
    if parametrization not in MUP_VARIANTS:
        raise ValueError(f"unknown parametrization {parametrization!r} ({' | '.join(MUP_VARIANTS)} | sp)")
    return True


def declare(param: nn.Parameter, role: Role, sp_init: Callable[[torch.Tensor], None] | None = None,
            mup_init_mult: float = 1.0, mup_lr_mult: float = 1.0) -> nn.Parameter:
    """Tag ``param`` with its muP ``role``, the in-place init used under SP, and two base-shape constants: one
    multiplying the role's muP init std, one its muP LR (1 = [S] Table 2; same exponent of N, another constant).
    Returns the parameter."""
    setattr(param, _DECLARED_ATTR, Declared(Role(role), sp_init, float(mup_init_mult), float(mup_lr_mult)))
    return param


def lr_rule(param: nn.Parameter, factor: float = 1.0, cap: float = math.inf) -> None:
    """A variant's LR rule for one declared tensor: under muP its LR constant times ``factor`` and its peak LR at
    most ``cap`` (an absolute LR; inf = none). SP's groups keep eta."""
    role_of(param)  # declared first
    setattr(param, _LR_RULE_ATTR, (float(factor), float(cap)))


def wd_rule(param: nn.Parameter, per_step: float) -> None:
    """A variant's weight-decay rule for one declared tensor: it shrinks by ``per_step`` x the schedule factor per
    step, whatever eta and its LR multiplier (in place of ``optim.weight_decay``). torch's AdamW shrinks by
    lr_t x weight_decay, so :func:`build_optimizer` sets its group's weight_decay to ``per_step`` / its peak LR."""
    role_of(param)  # declared first
    setattr(param, _WD_RULE_ATTR, float(per_step))


def role_of(param: nn.Parameter) -> Role:
    """The role declared for ``param``; raises if it was never declared (every parameter must have one)."""
    if not hasattr(param, _DECLARED_ATTR):
        raise ValueError(f"parameter of shape {tuple(param.shape)} has no declared muP role")
    return getattr(param, _DECLARED_ATTR).role


def init_std(role: Role, width: int) -> float:
    """muP init std for a role at width N ([S] Table 2). Gain (=1) and bias (=0) are constants, std 0."""
    return {Role.INPUT: 1.0, Role.HIDDEN: 1.0 / math.sqrt(width), Role.OUTPUT: 1.0 / width,
            Role.GAIN: 0.0, Role.BIAS: 0.0}[Role(role)]


def lr_multiplier(role: Role, width: int, parametrization: str) -> float:
    """LR multiplier of a role: muP gives hidden and output eta/N, the rest eta ([S] Table 2); SP gives 1 to all."""
    return 1.0 / width if is_mup(parametrization) and Role(role) in (Role.HIDDEN, Role.OUTPUT) else 1.0


@torch.no_grad()
def init_parameters(module: nn.Module, width: int, parametrization: str,
                    generator: torch.Generator | None = None) -> None:
    """(Re-)initialise every parameter of ``module`` by its role (muP: role std x declared ``mup_init_mult``) or its
    declared SP init."""
    mup = is_mup(parametrization)
    for name, p in module.named_parameters():
        role = role_of(p)
        declared = getattr(p, _DECLARED_ATTR)
        if not mup:
            if declared.sp_init is None:
                raise ValueError(f"{name}: no SP init declared")
            declared.sp_init(p)
            continue
        if role is Role.GAIN:
            p.fill_(1.0)
        elif role is Role.BIAS:
            p.zero_()
        else:
            p.normal_(0.0, init_std(role, width) * declared.mup_init_mult, generator=generator)


def param_groups(module: nn.Module, width: int, parametrization: str, weight_decay: float = 0.0) -> list[dict]:
    """One optimizer group per (role, LR constant, cap, decay rule), in :class:`Role` order, each carrying
    ``lr_mult`` = the role's multiplier x the declared constant (x an :func:`lr_rule`'s factor) under muP (SP: 1),
    ``role`` for logging and, where an :func:`lr_rule` caps it under muP, ``lr_cap``; where a :func:`wd_rule` set
    one, ``wd_per_step``. Weight decay applies to matrices (input/hidden/output) but not to gains and biases."""
    mup = is_mup(parametrization)
    by_key: dict[tuple[Role, float, float, float | None], list[nn.Parameter]] = {}
    for p in module.parameters():
        if p.requires_grad:
            factor, cap = getattr(p, _LR_RULE_ATTR, (1.0, math.inf))
            const = getattr(p, _DECLARED_ATTR).mup_lr_mult * factor if mup else 1.0
            key = (role_of(p), const, cap if mup else math.inf, getattr(p, _WD_RULE_ATTR, None))
            by_key.setdefault(key, []).append(p)
    return [{"params": params, "role": role.value, "lr_mult": lr_multiplier(role, width, parametrization) * const,
             "weight_decay": 0.0 if role in (Role.GAIN, Role.BIAS) else weight_decay,
             **({"lr_cap": cap} if cap < math.inf else {}), **({"wd_per_step": wd} if wd is not None else {})}
            for (role, const, cap, wd), params in sorted(by_key.items(), key=lambda kv: list(Role).index(kv[0][0]))]


def group_lr(group: dict, base_lr: float, schedule_factor: float = 1.0) -> float:
    """A group's LR: ``schedule_factor * min(base_lr * lr_mult, lr_cap)`` (no ``lr_cap``: uncapped)."""
    return schedule_factor * min(base_lr * group["lr_mult"], group.get("lr_cap", math.inf))


def build_optimizer(module: nn.Module, width: int, parametrization: str, lr: float,
                    betas: Iterable[float] = (0.9, 0.98), eps: float = 1e-8,
                    weight_decay: float = 0.0, device_type: str | None = None) -> torch.optim.AdamW:
    """AdamW with one group per role; each group's LR is :func:`group_lr` at ``lr`` (see :func:`set_lr`), its weight
    decay ``weight_decay`` or a :func:`wd_rule`'s ``wd_per_step`` / that LR.
    ``device_type`` 'cuda': the fused kernel (one launch per step instead of several per tensor); 'cpu': the
    multi-tensor (foreach) path; None: torch's default."""
    groups = [{**g, "lr": group_lr(g, lr)} for g in param_groups(module, width, parametrization, weight_decay)]
    for g in groups:  # a wd_rule's decay per step: torch decays by lr_t x weight_decay, lr_t = factor x peak LR
        if "wd_per_step" in g:
            g["weight_decay"] = g["wd_per_step"] / g["lr"] if g["lr"] > 0 else 0.0
    impl = {"cuda": {"fused": True}, "cpu": {"foreach": True}, None: {}}
    if device_type not in impl:
        raise ValueError(f"build_optimizer: device_type must be 'cuda', 'cpu' or None, got {device_type!r}")
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                             **impl[device_type])


def set_lr(optimizer: torch.optim.Optimizer, base_lr: float, schedule_factor: float) -> None:
    """Apply a schedule: every group gets :func:`group_lr` (never an absolute LR but an :func:`lr_rule`'s cap)."""
    for g in optimizer.param_groups:
        g["lr"] = group_lr(g, base_lr, schedule_factor)
