"""Typed configuration of ptsweep: the schemas, declared once, and how a config is composed, checked and changed.

Every hyperparameter has exactly one name: its dotted path (``model.w_attn``, ``optim.lr``) is also the Hydra
override, the Optuna parameter name, the Ray ``param_space`` key, the W&B config key and the results column.
Schemas: model.py, run.py, sweep.py (value checks: checks.py); dict <-> config: convert.py; Hydra: composition.py.
Unknown keys, values of the wrong type and impossible values raise :class:`ptsweep.errors.ConfigError` with a
one-line message naming the dotted key.
"""

from ptsweep.config.composition import CONF_DIR, compose
from ptsweep.config.convert import anchor_at, flatten, from_dict, to_dict, with_overrides
from ptsweep.config.model import (INFO_WEIGHTS, MODEL_SCHEMAS, TRANSFER_KEYS, BertConfig, ModernBertConfig, PTConfig,
                                  UTConfig)
from ptsweep.config.run import DataConfig, OptimConfig, RayConfig, RunConfig, TrackerConfig, TrainConfig
from ptsweep.config.sweep import SweepConfig

__all__ = ["CONF_DIR", "INFO_WEIGHTS", "MODEL_SCHEMAS", "TRANSFER_KEYS", "BertConfig", "DataConfig",
           "ModernBertConfig", "OptimConfig", "PTConfig", "RayConfig", "RunConfig", "SweepConfig", "TrackerConfig",
           "TrainConfig", "UTConfig", "anchor_at", "compose", "flatten", "from_dict", "to_dict", "with_overrides"]
