"""The trial keys and run-folder hashes of the configurations without a variant of PT stay what they were.

Finished records (sweep ledgers ``<study>/trials/<key>/``, run folders ``train/<label>-<hash>``) are found by these
values, so a change of the schema or of the identity rules must leave them as written here: the default PT, SP, each
baseline, each preset, the no-inference control and trials of the kinds a sweep writes (the trained-budget
scaling-curves study's PT grid trial and finals, a BERT final). The literals were computed by the code before PT's
variants moved out of the model.
"""

from __future__ import annotations

import pytest

from ptsweep.config import compose, to_dict
from ptsweep.identity import config_hash, trial_key

CONFIGS = {  # name: (compose overrides, trial key of the composed config, its config hash)
    "default": ([], "e2018f3705", "8bd91a3f"),
    "sp": (["model.parametrization=sp"], "1a966ea4d3", "cc9ea93e"),
    "bert": (["model=bert"], "0d2832e9f4", "e1dae7a4"),
    "ut": (["model=ut"], "d97b22e847", "2d09486c"),
    "modernbert": (["model=modernbert"], "0c6dd9b0de", "a877266f"),
    "no_inference": (["model=pt_no_inference"], "a7a07af2cb", "872112bf"),
    "smoke": (["preset=smoke"], "80e07cc247", "9cb55d7b"),
    "demo": (["preset=demo"], "2a11525eb1", "263f743e"),
    "trained": (["preset=trained"], "9390a4a435", "95625f02"),
    "paper": (["preset=paper"], "92f6c2cabf", "d9465a35"),
    "lr_study": (["preset=lr_study"], "da289dde8d", "36a28c8c"),
    "coord_train": (["preset=coord_train"], "ff69258b6c", "ebf2e21d"),
}

WEIGHTS = {f"model.{w}": 1.0 for w in ("w_unary", "w_child", "w_head", "w_topic_z", "w_attn", "w_topic_g")}
TRAINED_TRIALS = [  # (label, overrides on preset=trained, key): as scaling-curves writes them
    ("hp-pt-w32", {"model.width": 32, "model.scaling": "rank", "train.tokens": 33177600.0, "seed": 2,
                   "optim.lr": 0.02}, "hp-pt-w32-88972610f4"),
    ("final-pt-rank-w64-s1", {"optim.lr": 0.01, **WEIGHTS, "model.width": 64, "model.scaling": "rank", "seed": 1},
     "final-pt-rank-w64-s1-3908eaf662"),
    ("final-bert-w64-s0", {"model.name": "bert", "model.width": 128, "model.n_layers": 2, "model.n_heads": 2,
                           "model.max_positions": 512, "optim.lr": 0.002, "seed": 0}, "final-bert-w64-s0-9b74726f4c"),
]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_trial_key_and_config_hash_of_a_config_without_variants_are_pinned(name):
    overrides, key, digest = CONFIGS[name]
    cfg = compose(overrides)
    assert trial_key(to_dict(cfg), {}) == key
    assert config_hash(cfg) == digest


@pytest.mark.parametrize("label,overrides,key", TRAINED_TRIALS, ids=[t[0] for t in TRAINED_TRIALS])
def test_sweep_trial_keys_of_the_trained_budget_study_are_pinned(label, overrides, key):
    assert trial_key(to_dict(compose(["preset=trained"])), overrides, label) == key
