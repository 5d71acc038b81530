"""Run and trial identity: which config keys change a result, and the hashes that name run folders and trials.

Every identity starts from :func:`result_config`: the flat config (dotted keys) minus the result-neutral keys.
:func:`config_hash` (8 hex digits) names a run folder ``<out_dir>/train/<label>-<hash>`` and is the resume check;
:func:`trial_key` (``[label-]`` + 10 hex digits) names a sweep trial's ledger folder ``<study>/trials/<key>/``.

A key added to the schema later is hashed only where it changes the computation (:data:`LEGACY_EQUIVALENT`), a
retired key only where it did (``config.convert.RETIRED_KEYS``); unset ``model.damping_z`` is hashed as its value in
effect. The two digests write floats differently (``config_hash`` by repr at the top level only, trial keys also
inside lists); both stay as they are, since existing run folders and ledgers are found by them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from ptsweep.config import flatten, to_dict
from ptsweep.config.convert import RETIRED_KEYS
from ptsweep.config.model import default_z_damping

__all__ = ["RESULT_NEUTRAL_PREFIXES", "RESULT_NEUTRAL_KEYS", "result_config", "config_hash", "trial_config",
           "trial_key"]

# Keys that do not change what a run computes: left out of every identity.
RESULT_NEUTRAL_PREFIXES = ("tracker.", "ray.", "sweep.")
RESULT_NEUTRAL_KEYS = {"out_dir", "run_name", "preset", "data.cache_dir", "data.num_proc", "train.progress",
                       "train.threads", "train.resume", "train.checkpoint", "train.checkpoint_every_s", "train.device",
                       "train.stop_after_steps", "train.log_every", "train.prefetch", "train.tf32",
                       "data.token_cache", "train.probes", "data.build_command"}


# key -> when its value computes what a config without the key computed.
LEGACY_EQUIVALENT = {
    "model.attn_base_rank": lambda flat: (flat.get("model.parametrization") != "mup_sp"
                                          or flat["model.attn_base_rank"] == flat.get("model.base_rank")),
    "model.variants": lambda flat: not flat["model.variants"],
}


def _without_neutral(flat: Mapping[str, Any]) -> dict:
    """``flat`` (dotted keys) sorted, minus the result-neutral keys, keys at a legacy-equivalent value and retired
    keys at a value that computed nothing; unset damping as the value in effect."""
    if flat.get("model.damping_z", 0.0) is None:
        flat = {**flat, "model.damping_z": default_z_damping(flat["model.parametrization"])}
    return {k: v for k, v in sorted(flat.items())
            if k not in RESULT_NEUTRAL_KEYS and not k.startswith(RESULT_NEUTRAL_PREFIXES)
            and not (k in LEGACY_EQUIVALENT and LEGACY_EQUIVALENT[k](flat))
            and not (k in RETIRED_KEYS and v in RETIRED_KEYS[k])}


def result_config(cfg_or_dict) -> dict:
    """The flat config (dotted keys) minus the result-neutral keys: what defines a run's numbers."""
    d = cfg_or_dict if isinstance(cfg_or_dict, dict) else to_dict(cfg_or_dict)
    return _without_neutral(flatten(d))


def _norm(v: Any, deep: bool = True) -> Any:
    """Floats by repr (exact on every platform); with ``deep`` also inside lists and their mappings."""
    if isinstance(v, float):
        return repr(v)
    if deep and isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if deep and isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _digest(obj: Any, n: int) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def config_hash(cfg) -> str:
    """8 hex digits of sha1 over :func:`result_config` (floats by repr): same numbers, same hash."""
    return _digest({k: _norm(v, deep=False) for k, v in result_config(cfg).items()}, 8)


def trial_config(base: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict:
    """What a trial key hashes: the base config (nested or flat) with the dotted ``overrides`` applied, minus the
    result-neutral keys, floats by repr."""
    overrides = overrides or {}
    flat = flatten(dict(base))
    flat.update(overrides)
    if "model.name" in overrides:  # switching models drops the other model's keys (as with_overrides does)
        flat = {k: v for k, v in flat.items() if not k.startswith("model.") or k in overrides or k == "model.name"}
    return {k: _norm(v) for k, v in _without_neutral(flat).items()}


def trial_key(base: Mapping[str, Any], overrides: Mapping[str, Any], label: str = "") -> str:
    """Stable key of a trial: ``[label-]`` + sha1 of :func:`trial_config` (10 hex digits)."""
    digest = _digest(trial_config(base, overrides), 10)
    return f"{label}-{digest}" if label else digest
