"""Hydra composition: ``compose(["preset=smoke", "model.width=128"]) -> RunConfig`` from the YAML under ``conf/``.

``RunConfig`` is the first entry of ``conf/config.yaml``'s defaults list (``run_schema`` in Hydra's ConfigStore), so a
group file holds only what differs from the schema. ``model`` stays an open mapping during composition (its schema
depends on ``model.name``) and is checked once composed.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ptsweep.config.convert import config_error, instantiate, model_schema, omegaconf_errors
from ptsweep.config.run import RunConfig
from ptsweep.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
"""The shipped Hydra config tree (<repo>/conf)."""

SCHEMA_NAME = "run_schema"
"""Name of the root schema in Hydra's ConfigStore (first entry of conf/config.yaml's defaults list)."""


@functools.cache
def register_schema() -> None:
    """Store RunConfig in Hydra's ConfigStore as :data:`SCHEMA_NAME` (once per process), ``model`` an open mapping."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    root = OmegaConf.structured(RunConfig)
    root.model = {}
    _open_maps(root)
    ConfigStore.instance().store(name=SCHEMA_NAME, node=root)


def _open_maps(node) -> None:
    """Let the plain mappings of a schema node (``model`` during composition, ``sweep.weight_ranges`` ...) take new
    keys from an override; the schema's ``validate`` checks them."""
    from omegaconf import DictConfig, OmegaConf

    for key in node:
        child = node[key]
        if isinstance(child, DictConfig):
            if OmegaConf.get_type(child) is dict:
                OmegaConf.set_struct(child, False)
            else:
                _open_maps(child)


def compose(overrides: list[str]) -> RunConfig:
    """Compose ``conf/config.yaml`` with Hydra ``overrides`` (``["preset=smoke", "model.width=128"]``), type-check
    and validate: the :class:`RunConfig` every command runs."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    register_schema()
    GlobalHydra.instance().clear()  # a caller (notebook, test) may have left Hydra initialised
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        try:
            node = hydra_compose(config_name="config", overrides=list(overrides))
        except (HydraException, OmegaConfBaseException) as e:
            raise composition_error(e) from None
    values = node.model  # the open mapping, merged onto the schema model.name names (errors name model.<key>)
    with omegaconf_errors():
        node.model = OmegaConf.structured(model_schema(values.get("name", "pt")))
        node.merge_with({"model": values})
    return instantiate(node)


def composition_error(exc: Exception) -> ConfigError:
    """One line for a Hydra composition error: the OmegaConf cause naming the key, a missing group option with the
    options there are, or Hydra's message."""
    from omegaconf.errors import OmegaConfBaseException

    for cause in (exc, exc.__cause__):
        if isinstance(cause, OmegaConfBaseException):
            return config_error(cause)
    msg = str(exc).split("Config search path:")[0]
    m = re.search(r"Could not find '([^'/]+)/([^']+)'", msg)
    if m and "Available options" in msg:
        options = [o.strip() for o in msg.split("Available options", 1)[1].splitlines()[1:] if o.strip()]
        return ConfigError(f"{m.group(1)}={m.group(2)}: no such config (choose from {', '.join(options)})")
    return ConfigError(one_line(msg))


def one_line(msg: str) -> str:
    """A multi-line message collapsed into one line ("unknown error" when blank)."""
    return "; ".join(p.strip() for p in str(msg).splitlines() if p.strip()) or "unknown error"
