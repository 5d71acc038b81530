"""Run and trial identity: which config keys change a result, and the hashes that name run folders and trials.

Every identity starts from :func:`result_config`: the flat config (dotted keys) minus the result-neutral keys
(outputs, trackers, Ray, sweep settings, progress, threads, checkpointing, device and its TF32 switch, batch
prefetching, where the token cache lies, the message statistics an evaluation logs, the command that builds a
corpus' files), so two configs that differ only there share it. :func:`config_hash` (8 hex digits) names a run
folder ``<out_dir>/train/<label>-<hash>`` and is the resume check; :func:`trial_key` (``[label-]`` + 10 hex digits)
names a sweep trial's ledger folder ``<study>/trials/<key>/`` and, through :func:`trial_config`, the base config an
Optuna study was created for.

A key added to the schema after results were recorded is hashed only where it changes the computation
(:data:`LEGACY_EQUIVALENT`); an unset key whose value in effect depends on another (``model.damping_z``) is hashed
as that value. The two digests write floats differently (``config_hash`` by repr at the top level only, trial keys
also inside lists); both are kept as they were, since existing run folders and ledgers are found by these values.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from ptsweep.config import flatten, to_dict
from ptsweep.config.model import default_z_damping

__all__ = ["RESULT_NEUTRAL_PREFIXES", "RESULT_NEUTRAL_KEYS", "result_config", "config_hash", "trial_config",
           "trial_key"]

# Keys that do not change what a run computes: left out of the run folder's config hash, of the resume check and of
# the trial keys (so e.g. a different out_dir, W&B mode or Ray setting still finds the finished runs and trials).
RESULT_NEUTRAL_PREFIXES = ("tracker.", "ray.", "sweep.")
RESULT_NEUTRAL_KEYS = {"out_dir", "run_name", "preset", "data.cache_dir", "data.num_proc", "train.progress",
                       "train.threads", "train.resume", "train.checkpoint", "train.checkpoint_every_s", "train.device",
                       "train.stop_after_steps", "train.log_every", "train.prefetch", "train.tf32",
                       "data.token_cache", "train.message_stats", "data.build_command"}


def _at_anchor(flat: Mapping[str, Any]) -> bool:
    """N = N0 (the width rules' factors sqrt(log N / log N0), sqrt(N0 / N) are exactly 1) or no MFVI (T = 0)."""
    return flat.get("model.width") == flat.get("model.base_width") or flat.get("model.n_iters") == 0


def _lever_off(flat: Mapping[str, Any], key: str, off: Any) -> bool:
    """``key`` at its off value, or no MFVI iteration for a lever to act on (T = 0: the no-inference control)."""
    return flat[key] == off or flat.get("model.n_iters") == 0


# key -> when its value computes what a config without the key computed: 'model.attn_base_rank' is read by 'mup_sp'
# only, and at r_A = base_rank its attention scale is the earlier r0 / r. The basin levers (models/pt_levers.py) at
# their off values, a setting of an off lever, the width rules at the anchor width and any lever of the
# no-inference control (T = 0) change nothing.
LEGACY_EQUIVALENT = {
    "model.attn_base_rank": lambda flat: (flat.get("model.parametrization") != "mup_sp"
                                          or flat["model.attn_base_rank"] == flat.get("model.base_rank")),
    "model.z_loss": lambda flat: _lever_off(flat, "model.z_loss", 0),
    "model.z_loss_iters": lambda flat: flat.get("model.z_loss", 0) == 0 or _lever_off(flat, "model.z_loss_iters",
                                                                                      "final"),
    "model.qz_entropy_floor": lambda flat: _lever_off(flat, "model.qz_entropy_floor", 0),
    "model.qz_entropy_weight": lambda flat: (flat.get("model.qz_entropy_floor", 0) == 0
                                             or _lever_off(flat, "model.qz_entropy_weight", 1)),
    "model.attn_score_norm": lambda flat: _lever_off(flat, "model.attn_score_norm", "none"),
    "model.z_scale_rule": lambda flat: flat["model.z_scale_rule"] == "none" or _at_anchor(flat),
    "model.topic_scale_rule": lambda flat: flat["model.topic_scale_rule"] == "none" or _at_anchor(flat),
    "model.unary_lr_scale": lambda flat: flat["model.unary_lr_scale"] == 1.0,  # S trains without inference too
    "model.unary_lr_rule": lambda flat: flat["model.unary_lr_rule"] == "const",
    "model.unary_lr_cap": lambda flat: flat["model.unary_lr_cap"] == 0,  # 0 only under 'const' (config checks)
}


def _without_neutral(flat: Mapping[str, Any]) -> dict:
    """``flat`` (dotted keys) sorted by key, minus the result-neutral keys and the keys at a legacy-equivalent
    value; unset damping as the value in effect."""
    if flat.get("model.damping_z", 0.0) is None:
        flat = {**flat, "model.damping_z": default_z_damping(flat["model.parametrization"])}
    return {k: v for k, v in sorted(flat.items())
            if k not in RESULT_NEUTRAL_KEYS and not k.startswith(RESULT_NEUTRAL_PREFIXES)
            and not (k in LEGACY_EQUIVALENT and LEGACY_EQUIVALENT[k](flat))}


def result_config(cfg_or_dict) -> dict:
    """The flat config (dotted keys) minus the result-neutral keys: what defines a run's numbers."""
    d = cfg_or_dict if isinstance(cfg_or_dict, dict) else to_dict(cfg_or_dict)
    return _without_neutral(flatten(d))


def _norm(v: Any, deep: bool = True) -> Any:
    """Floats by repr (exact, and the same text on every platform); with ``deep`` also inside lists."""
    if isinstance(v, float):
        return repr(v)
    if deep and isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def _digest(obj: Any, n: int) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def config_hash(cfg) -> str:
    """8 hex digits of sha1 over :func:`result_config` (floats by repr): same numbers, same hash."""
    return _digest({k: _norm(v, deep=False) for k, v in result_config(cfg).items()}, 8)


def trial_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict:
    """What a trial key hashes: the base config (nested, from ``to_dict``, or flat) with the dotted ``overrides``
    applied, minus the result-neutral keys, floats by repr (also inside lists)."""
    overrides = overrides or {}
    flat = flatten(dict(base))
    flat.update(overrides)
    if "model.name" in overrides:  # switching models drops the other model's keys (as with_overrides does)
        flat = {k: v for k, v in flat.items() if not k.startswith("model.") or k in overrides or k == "model.name"}
    return {k: _norm(v) for k, v in _without_neutral(flat).items()}


def trial_key(base: Mapping[str, Any], overrides: Mapping[str, Any], label: str = "") -> str:
    """Stable key of a trial: ``[label-]`` + sha1 of :func:`trial_config` (10 hex digits). Same computation, same
    key."""
    digest = _digest(trial_config(base, overrides), 10)
    return f"{label}-{digest}" if label else digest
