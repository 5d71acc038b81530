"""dict <-> RunConfig: OmegaConf type-checks a mapping against the schemas (the model schema ``model.name`` names),
then the value checks run; plain dicts and dotted keys back out. OmegaConf's errors become one line naming the
dotted key (:func:`config_error`, with "did you mean ..." for a near miss).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import enum
from typing import Any

from ptsweep.config.model import MODEL_SCHEMAS
from ptsweep.config.run import RunConfig
from ptsweep.config.sweep import RENAMED_KEYS
from ptsweep.errors import ConfigError


RETIRED_KEYS: dict[str, tuple] = {
    **{f"model.{k}": (v,) for k, v in (("z_loss", 0.0), ("z_loss_iters", "final"), ("qz_entropy_floor", 0.0),
                                       ("qz_entropy_weight", 1.0), ("attn_score_norm", "none"),
                                       ("z_scale_rule", "none"), ("topic_scale_rule", "none"),
                                       ("unary_lr_scale", 1.0), ("unary_lr_rule", "const"), ("unary_lr_cap", 0.0))},
    "train.message_stats": (False, True),
}
"""Keys of earlier schemas and the values at which each changed no number: identities read a config carrying one at
such a value as the config without it (``identity``)."""


def model_schema(name: Any) -> type:
    """The model schema ``model.name`` selects (pt, bert, ut, modernbert)."""
    if name not in MODEL_SCHEMAS:
        raise ConfigError(f"model.name: unknown model {name!r} (choose from {', '.join(MODEL_SCHEMAS)})")
    return MODEL_SCHEMAS[name]


def config_error(exc: Exception) -> ConfigError:
    """One-line ConfigError naming the dotted key of an OmegaConf error (unknown key or impossible type)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    key = getattr(exc, "full_key", None) or "<config>"
    msg = (getattr(exc, "msg", None) or str(exc)).splitlines()[0]
    if isinstance(exc, (ConfigAttributeError, ConfigKeyError)) and " not in " in msg:
        return ConfigError(unknown_key(key, getattr(exc, "object_type", None)))
    return ConfigError(f"{key}: {msg}")


@contextlib.contextmanager
def omegaconf_errors():
    """Re-raise an OmegaConf exception inside the block as :func:`config_error`'s one-line ConfigError."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        yield
    except OmegaConfBaseException as e:
        raise config_error(e) from None


def unknown_key(key: str, schema: Any) -> str:
    """The message for an unknown ``key``: where a renamed or retired key went, else a near miss or the valid keys
    of ``schema``."""
    if key in RENAMED_KEYS:
        return f"{key}: renamed to {RENAMED_KEYS[key]}"
    if key in RETIRED_KEYS:
        return f"{key}: retired; PT's variants are set in model.variants (ptsweep.variants), probes in train.probes"
    prefix, _, leaf = key.rpartition(".")
    valid = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else []
    near = difflib.get_close_matches(leaf, valid, n=1)
    if near:
        return f"{key}: unknown config key (did you mean {prefix + '.' if prefix else ''}{near[0]}?)"
    return f"{key}: unknown config key" + (f" (valid keys: {', '.join(sorted(valid))})" if valid else "")


def instantiate(node) -> RunConfig:
    """The validated RunConfig of a typed OmegaConf node (its dataclasses built, their value checks run)."""
    from omegaconf import OmegaConf

    with omegaconf_errors():
        cfg = OmegaConf.to_object(node)
    cfg.validate()
    return cfg


def from_dict(data) -> RunConfig:
    """Type-check and validate a mapping (plain dict or OmegaConf node) into a :class:`RunConfig`; keys it leaves
    out keep their defaults."""
    from omegaconf import OmegaConf

    schema = model_schema((data.get("model") or {}).get("name", "pt"))
    with omegaconf_errors():
        node = OmegaConf.merge(OmegaConf.structured(RunConfig(model=schema())), data)
    return instantiate(node)


def with_overrides(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """A copy of ``cfg`` with dotted-key overrides applied (``{'model.width': 512, 'optim.lr': 3e-3}``), re-validated.

    Changing ``model.name`` switches the model schema: the new model keeps only the model keys overridden here."""
    from omegaconf import OmegaConf

    with omegaconf_errors():
        node = OmegaConf.structured(cfg)
        if "model.name" in overrides:
            node.model = OmegaConf.structured(model_schema(overrides["model.name"]))
        for key, value in overrides.items():
            OmegaConf.update(node, key, value, merge=False)
    return instantiate(node)


def anchor_at(cfg: RunConfig, width: int, shape: dict[str, Any] | None = None) -> dict[str, int]:
    """Overrides that put PT's base shape at ``width`` (the paradigm in ``shape`` or ``cfg``;
    ``PTConfig.anchor_overrides``); {} for the baselines."""
    if cfg.model.name != "pt":
        return {}
    return with_overrides(cfg, {**(shape or {}), "model.width": int(width)}).model.anchor_overrides()


def to_dict(cfg) -> dict:
    """Plain nested dict of a config dataclass (tuples become lists, Enums their values)."""

    def conv(v):
        if isinstance(v, enum.Enum):
            return v.value
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

