"""Variants of PT: changes to its MFVI, its training loss, its LR or its weight decay that an experiment selects, each
in a file of its own and attached to the paper's model (``models/pt.py``, which knows none of them) at its hook
points.

A config selects them with one entry, ``model.variants``: a list of ``{name: <variant>, <setting>: <value>, ...}``
(``model.variants=[{name:z_loss,coef:1e-4},{name:attn_row_rms}]``; [] = the paper's model, hashed as a config
without the key). ``models.build_model`` attaches them (:func:`attach`) before the optimizer is built.

| name             | hook point                        | settings            | file                |
|------------------|-----------------------------------|---------------------|---------------------|
| z_loss           | auxiliary loss                    | coef, iters         | z_loss.py           |
| qz_entropy_floor | auxiliary loss                    | floor, weight       | qz_entropy_floor.py |
| attn_row_rms     | score transform                   |                     | attn_row_rms.py     |
| z_scale          | factor on the Z messages          |                     | z_scale.py          |
| topic_scale      | factor on the topic logits        |                     | topic_scale.py      |
| unary_lr         | per-tensor LR rule (S)            | scale, rule, cap    | unary_lr.py         |
| feature_cap      | the Z features P^ (``features``)  | cap                 | feature_cap.py      |
| independent_wd   | per-tensor weight-decay rule      | decay               | independent_wd.py   |
"""

from __future__ import annotations

import dataclasses

from ptsweep.errors import ConfigError
from ptsweep.variants.attn_row_rms import AttnRowRms
from ptsweep.variants.base import Variant
from ptsweep.variants.feature_cap import FeatureCap
from ptsweep.variants.independent_wd import IndependentWD
from ptsweep.variants.qz_entropy_floor import EntropyFloor
from ptsweep.variants.topic_scale import TopicScale
from ptsweep.variants.unary_lr import UnaryLR
from ptsweep.variants.z_loss import ZLoss
from ptsweep.variants.z_scale import ZScale

VARIANTS: dict[str, type[Variant]] = {v.name: v for v in (ZLoss, EntropyFloor, AttnRowRms, ZScale, TopicScale,
                                                          UnaryLR, FeatureCap, IndependentWD)}
"""``name`` -> its variant."""


def parse(cfg) -> list[Variant]:
    """The checked variants of the PT config ``cfg`` (``cfg.variants``), in order; one-line ConfigErrors."""
    out = []
    for entry in cfg.variants:
        settings = dict(entry)
        name = settings.pop("name", None)
        if name not in VARIANTS:
            raise ConfigError(f"model.variants: unknown variant {name!r} (choose from {', '.join(VARIANTS)})")
        if name in {v.name for v in out}:
            raise ConfigError(f"model.variants: {name} is listed twice")
        fields = [f.name for f in dataclasses.fields(VARIANTS[name])]
        try:
            variant = VARIANTS[name](**settings)
        except TypeError:
            raise ConfigError(f"model.variants: {name}: settings {sorted(settings)} do not fit its settings "
                              f"{fields}") from None
        variant.check(cfg)
        out.append(variant)
    return out


def normalize(cfg) -> list[dict]:
    """``cfg.variants`` checked, each entry with every setting (defaults filled in): what run identities hash."""
    return [{"name": v.name, **dataclasses.asdict(v)} for v in parse(cfg)]


def attach(model, cfg):
    """``model`` (a ProbabilisticTransformer of ``cfg``) with the hooks of ``cfg.variants`` set; returned."""
    for variant in parse(cfg):
        variant.attach(model)
    return model
