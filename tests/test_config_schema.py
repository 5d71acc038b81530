"""Configs are declared once: the schemas (ptsweep/config/) hold every key and default, the YAML under conf/ only
what differs from them; unknown keys and wrong types are one line naming the key (with "did you mean" for a near
miss); composed configs keep their identity (the hashes run folders and trial keys are made of)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from ptsweep.config import (CONF_DIR, MODEL_SCHEMAS, DataConfig, OptimConfig, RayConfig, RunConfig, SweepConfig,
                            TrackerConfig, TrainConfig, compose, to_dict, with_overrides)
from ptsweep.errors import ConfigError
from ptsweep.identity import trial_key

SECTIONS = {"data": DataConfig, "optim": OptimConfig, "train": TrainConfig, "tracker": TrackerConfig,
            "ray": RayConfig, "sweep": SweepConfig}
"""Config groups typed by the root schema (RunConfig); ``model`` is typed by the schema ``model.name`` names."""


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def _model_options(conf: Path) -> dict[str, dict]:
    """model option -> its effective values: the schema's defaults overlaid with its base file's and its own keys."""
    out = {}
    for path in sorted((conf / "model").glob("*.yaml")):
        d = _load(path)
        base = _load(conf / "model" / f"{d['defaults'][0]}.yaml") if "defaults" in d else {}
        values = {**base, **{k: v for k, v in d.items() if k != "defaults"}}
        out[path.stem] = {**to_dict(MODEL_SCHEMAS[values.get("name", "pt")]()), **values}
    return out


def _section_options(conf: Path, group: str) -> dict[str, dict]:
    """group option -> its effective values (the section schema's defaults overlaid with the file)."""
    return {p.stem: {**to_dict(SECTIONS[group]()), **_load(p)} for p in sorted((conf / group).glob("*.yaml"))}


def repeated_defaults(conf: Path) -> list[str]:
    """Every ``file: key`` of ``conf`` whose value is what the key has without that line: a schema default repeated
    in a group file (a model variant: its base's value), or a preset value that every option of the group already
    has (a preset may restate a default that some group option changes: paper's tokenizer over data=shakespeare)."""
    found = []
    root = {k: v for k, v in _load(conf / "config.yaml").items() if k != "defaults"}
    defaults = to_dict(RunConfig())
    found += [f"config.yaml: {k}" for k, v in root.items() if defaults.get(k) == v]
    models = _model_options(conf)
    for path in sorted((conf / "model").glob("*.yaml")):
        d = _load(path)
        base = models[d["defaults"][0]] if "defaults" in d else to_dict(MODEL_SCHEMAS[d.get("name", "pt")]())
        # ``name`` picks the schema (pt, bert, ut): it is the choice, not a repeated default
        found += [f"model/{path.name}: {k}" for k, v in d.items() if k not in ("defaults", "name") and base.get(k) == v]
    options = {"model": models, **{g: _section_options(conf, g) for g in SECTIONS}}
    for group in SECTIONS:
        schema = to_dict(SECTIONS[group]())
        for path in sorted((conf / group).glob("*.yaml")):
            found += [f"{group}/{path.name}: {k}" for k, v in _load(path).items() if schema.get(k) == v]
    for path in sorted((conf / "preset").glob("*.yaml")):
        for section, values in _load(path).items():
            if section in options:
                for k, v in values.items():
                    if all(opt.get(k) == v for opt in options[section].values()):
                        found.append(f"preset/{path.name}: {section}.{k}")
            elif section not in ("defaults",) and defaults.get(section) == values:
                found.append(f"preset/{path.name}: {section}")
    return found


def test_every_schema_is_a_valid_structured_config() -> None:
    for schema in [RunConfig, *MODEL_SCHEMAS.values(), *SECTIONS.values()]:
        node = OmegaConf.structured(schema)  # every annotation is one OmegaConf supports
        inst = OmegaConf.to_object(node)
        inst.validate()  # the defaults pass their own checks
        assert to_dict(inst) == to_dict(schema())


def test_no_yaml_repeats_a_schema_default() -> None:
    assert repeated_defaults(CONF_DIR) == []


def test_the_repeat_check_finds_a_default_put_back(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    with open(conf / "optim" / "adamw.yaml", "a") as f:
        f.write("lr: 1.0e-2\n")
    with open(conf / "model" / "pt_no_topic.yaml", "a") as f:
        f.write("width: 256\n")
    with open(conf / "preset" / "smoke.yaml", "a") as f:
        f.write("optim:\n  warmup_frac: 0.25\n")
    assert repeated_defaults(conf) == ["model/pt_no_topic.yaml: width", "optim/adamw.yaml: lr",
                                       "preset/smoke.yaml: optim.warmup_frac"]


def test_every_yaml_key_is_a_schema_key() -> None:
    """A group file sets only keys of its schema (a typo in a YAML would otherwise pass unnoticed until composed)."""
    for group, schema in SECTIONS.items():
        fields = set(to_dict(schema()))
        for path in (CONF_DIR / group).glob("*.yaml"):
            assert set(_load(path)) <= fields, path
    for name, values in _model_options(CONF_DIR).items():
        assert set(values) == set(to_dict(MODEL_SCHEMAS[values["name"]]())), name


@pytest.mark.parametrize("overrides, message", [
    (["model.widht=512"], "model.widht: unknown config key (did you mean model.width?)"),
    (["model=bert", "model.n_layer=2"], "model.n_layer: unknown config key (did you mean model.n_layers?)"),
    (["data.vocab_sise=512"], "data.vocab_sise: unknown config key (did you mean data.vocab_size?)"),
    (["sweep.coord_check.width=[64,128]"],
     "sweep.coord_check.width: unknown config key (did you mean sweep.coord_check.widths?)"),
    (["sed=3"], "sed: unknown config key (did you mean seed?)"),
])
def test_near_miss_key_says_did_you_mean(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        compose(overrides)
    assert str(e.value) == message


@pytest.mark.parametrize("old, new", [("sweep.lr_widths", "sweep.lr_transfer.widths"),
                                      ("sweep.coord_steps", "sweep.coord_check.steps"),
                                      ("sweep.strict", "sweep.coord_check.strict"),
                                      ("sweep.baseline_lr_range", "sweep.baseline.lr_range")])
def test_a_flat_sweep_key_of_earlier_versions_says_what_it_was_renamed_to(old: str, new: str) -> None:
    value, parsed = {"sweep.lr_widths": ("[32,64]", [32, 64]), "sweep.strict": ("true", True),
                     "sweep.baseline_lr_range": ("[1e-4,1e-2]", (1e-4, 1e-2))}.get(old, ("3", 3))
    with pytest.raises(ConfigError) as e:
        compose([f"{old}={value}"])
    assert str(e.value) == f"{old}: renamed to {new}"
    cfg = compose([f"{new}={value}"])  # the new key takes the same value
    section, _, leaf = new.removeprefix("sweep.").partition(".")
    assert getattr(getattr(cfg.sweep, section), leaf) == parsed


def test_closed_sweep_choices_are_enums_that_still_read_as_strings() -> None:
    cfg = compose(["sweep.match=flops", "sweep.scaling=both", "sweep.coord_check.schedule=train"])
    assert (cfg.sweep.match, cfg.sweep.scaling, cfg.sweep.coord_check.schedule) == ("flops", "both", "train")
    assert to_dict(cfg)["sweep"]["match"] == "flops" and type(to_dict(cfg)["sweep"]["match"]) is str
    with pytest.raises(ConfigError, match=r"^sweep.coord_check.schedule: .*constant, train"):
        compose(["sweep.coord_check.schedule=cosine"])


def test_unknown_keys_and_wrong_types_are_one_line_naming_the_key() -> None:
    for overrides, key in ([["model.zzz=1"], "model.zzz"], [["+model.zzz=1"], "model.zzz"],
                           [["optim.lr=abc"], "optim.lr"], [["model.width=abc"], "model.width"],
                           [["train.batch_size=1.5"], "train.batch_size"], [["model.name=gpt"], "model.name"],
                           [["data.name=nope"], "data.name"], [["model=nope"], "model=nope"]):
        with pytest.raises(ConfigError) as e:
            compose(overrides)
        assert "\n" not in str(e.value) and str(e.value).startswith(key), (overrides, str(e.value))
    cfg = compose(["preset=smoke"])
    with pytest.raises(ConfigError, match=r"^optim.lrr: unknown config key \(did you mean optim.lr\?\)$"):
        with_overrides(cfg, {"optim.lrr": 1e-3})
    with pytest.raises(ConfigError, match=r"^model.n_layers: unknown config key"):
        with_overrides(cfg, {"model.n_layers": 2})  # a BERT key on a PT config


def test_types_are_converted_by_the_schema() -> None:
    cfg = compose(["optim.lr=3e-3", "model.dists=[2,4]", "train.micro_batch_size=auto", "model.damping_z=0.3"])
    assert cfg.optim.lr == 3e-3 and isinstance(cfg.optim.lr, float)
    assert cfg.model.dists == (2, 4) and cfg.optim.betas == (0.9, 0.98)  # tuple fields stay tuples
    assert cfg.train.micro_batch_size == "auto" and cfg.model.damping_z == 0.3
    # a map override is merged into the map (Hydra), a new key included; its keys are the schema's validate's to check
    assert compose(["sweep.weight_ranges={w_head:[1,2]}"]).sweep.weight_ranges == {
        "w_attn": [0.5, 4.0], "w_unary": [0.5, 4.0], "w_head": [1, 2], "w_child": [0.5, 4.0]}
    switched = with_overrides(cfg, {"model.name": "ut", "model.width": 128})
    assert type(switched.model) is MODEL_SCHEMAS["ut"] and switched.model.width == 128


def _digest(cfg: RunConfig) -> str:
    """The trial identity of a composed config (``ptsweep.identity.trial_key`` with no overrides): sweep settings,
    trackers, Ray and output paths are left out, so only a change in what a run computes changes it."""
    return trial_key(to_dict(cfg), {})


# Trial keys of composed configs. A change of these digests changes run folders and trial keys (ledgers of running
# studies stop matching), so it must be deliberate: re-pin only when the composed config trains a different model
# (e.g. PT's default parametrization, warm-up or Z damping, or the presets' eta); git log has each re-pin.
PINNED = {
    '': 'e2018f3705',
    'preset=smoke': '80e07cc247',
    'preset=demo': '2a11525eb1',
    'preset=paper model=bert': 'aaa6a141cf',
    'preset=paper data=shakespeare': 'fe0a33eec7',
    'preset=lr_study model=pt_no_inference data=minipile': 'be45f2bcc9',
    'preset=coord_train model=ut': '8def184c32',
    'model=pt_no_topic data=local data.files=[corpus/*.txt]': '861642aaca',
    'tracker=disabled model.width=512 sweep.scales=[64,128]': '9c02285aa4',
}


@pytest.mark.parametrize("overrides", list(PINNED))
def test_composed_configs_keep_their_identity(overrides: str) -> None:
    assert _digest(compose(overrides.split())) == PINNED[overrides]


def test_identity_ignores_sweep_settings_and_follows_the_model() -> None:
    assert _digest(compose(["sweep.num_samples=99", "sweep.weight_ranges={w_unary:[0.5,8]}"])) == PINNED[""]
    assert _digest(compose(["model.w_unary=2.0"])) != PINNED[""]


def test_a_key_added_later_is_hashed_only_where_it_changes_the_computation() -> None:
    """model.attn_base_rank (read by 'mup_sp' only): at r_A = base_rank, or under another parametrization, a run keeps
    the key it had before the field existed (its ledger entry is found); at another r_A it gets a new one."""
    before = {"model": {"name": "pt", "parametrization": "mup_sp", "base_rank": 8, "width": 32}}
    legacy = trial_key(before, {})
    assert trial_key(before, {"model.attn_base_rank": 8}) == legacy
    assert trial_key(before, {"model.attn_base_rank": 4}) != legacy
    mup = {"model": {**before["model"], "parametrization": "mup"}}
    assert trial_key(mup, {"model.attn_base_rank": 4}) == trial_key(mup, {})
    channels = {"model": {**before["model"], "base_rank": 64}}
    assert trial_key(channels, {"model.attn_base_rank": 8}) != trial_key(channels, {})
