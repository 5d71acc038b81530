"""Typed configuration of ptsweep: the schemas, declared once, and how a config is composed, checked and changed.

Every hyperparameter has exactly one name: its dotted path (``model.w_attn``, ``optim.lr``) is also the Hydra
override, the Optuna parameter name, the Ray ``param_space`` key, the W&B config key and the results column.

    model.py        PTConfig, BertConfig, UTConfig (``model.name`` picks one), INFO_WEIGHTS, TRANSFER_KEYS
    run.py          DataConfig, OptimConfig, TrainConfig, TrackerConfig, RayConfig and RunConfig (one run)
    sweep.py        SweepConfig (the sweeps and the muP studies)
    checks.py       the value checks the schemas' ``validate`` methods call
    convert.py      from_dict / with_overrides (OmegaConf type check + validation), to_dict, flatten, schema_keys
    composition.py  compose(overrides): Hydra composes conf/ onto the schema registered in its ConfigStore

Unknown keys, values of the wrong type and impossible values raise :class:`ptsweep.errors.ConfigError` with a
one-line message naming the dotted key.
"""

from ptsweep.config.composition import CONF_DIR, compose
from ptsweep.config.convert import anchor_at, flatten, from_dict, schema_keys, to_dict, with_overrides
from ptsweep.config.model import (INFO_WEIGHTS, MESSAGE_PATHS, MODEL_SCHEMAS, TRANSFER_KEYS, BertConfig,
                                  ModelConfig, PTConfig, UTConfig)
from ptsweep.config.run import DataConfig, OptimConfig, RayConfig, RunConfig, TrackerConfig, TrainConfig
from ptsweep.config.sweep import SweepConfig

__all__ = ["CONF_DIR", "INFO_WEIGHTS", "MESSAGE_PATHS", "MODEL_SCHEMAS", "TRANSFER_KEYS", "BertConfig", "DataConfig",
           "ModelConfig", "OptimConfig", "PTConfig", "RayConfig", "RunConfig", "SweepConfig", "TrackerConfig",
           "TrainConfig", "UTConfig", "anchor_at", "compose", "flatten", "from_dict", "schema_keys", "to_dict",
           "with_overrides"]
