"""The experiment configs (``conf/experiment/*.yaml``, ``+experiment=<name>``) and the commands of experiments/'s
READMEs: every config composes through the CLI (``python -m ptsweep lr-transfer +experiment=<name> --cfg``) under
the preset it names, the same with that preset given on the command line, and through ``make lr-transfer
ARGS="+experiment=<name>"`` (``make -n``); every script, config and ``python -m`` module a README command names
exists; the README blocks written with ``$PY`` run under bash with a stub interpreter, and every call they make
composes; one probe per lever they name trains at smoke size (the only training here)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ptsweep.config import compose, to_dict

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))


def _declared_preset(name: str) -> str:
    """The preset an experiment config names (``override /preset: <p>``), following its defaults list."""
    text = (REPO / "conf" / "experiment" / f"{name}.yaml").read_text()
    m = re.search(r"override /preset: *(\w+)", text)
    if m:
        return m.group(1)
    parents = [d for d in yaml.safe_load(text)["defaults"] if isinstance(d, str) and d != "_self_"]
    assert parents, f"{name}: names no preset"
    return _declared_preset(parents[0])


def test_the_experiment_group_exists_and_is_not_in_the_defaults_list():
    assert len(EXPERIMENTS) >= 10
    assert "experiment" not in (REPO / "conf" / "config.yaml").read_text().split("defaults:", 1)[1]
    for name in EXPERIMENTS:
        assert (REPO / "conf" / "experiment" / f"{name}.yaml").read_text().startswith("# @package _global_\n"), name


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_config_composes_under_its_preset(name, capsys):
    from ptsweep.cli import main

    preset = _declared_preset(name)
    assert main(["lr-transfer", f"+experiment={name}", "--cfg"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["preset"] == preset
    assert to_dict(compose([f"preset={preset}", f"+experiment={name}"])) == to_dict(compose([f"+experiment={name}"]))


def test_make_passes_the_experiment_and_its_preset_unless_preset_is_set():
    def recipe(*variables: str) -> list[str]:
        out = subprocess.run(["make", "-n", "-o", ".venv/.ptsweep-installed", "lr-transfer", *variables], cwd=REPO,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return shlex.split(next(ln for ln in out.splitlines() if " -m ptsweep " in ln))

    argv = recipe("ARGS=+experiment=lr_damped")
    assert argv[-1] == "+experiment=lr_damped" and not any(a.startswith("preset=") for a in argv)
    assert "preset=lr_study" in recipe("PRESET=lr_study", "ARGS=+experiment=lr_damped")
    assert "preset=demo" in recipe()


def _readme_code() -> list[tuple[str, str]]:
    """(README, text) of every fenced block and inline code span of the Markdown files under experiments/."""
    out = []
    for md in sorted((REPO / "experiments").rglob("*.md")):
        if "results" in md.relative_to(REPO / "experiments").parts:
            continue
        text = md.read_text()
        blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
        spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        out += [(str(md.relative_to(REPO)), t) for t in blocks + spans]
    return out


def test_every_script_config_and_module_a_readme_command_names_exists():
    code = _readme_code()
    assert code
    missing = []
    for md, text in code:
        for path in re.findall(r"\b(experiments/[\w./-]+\.(?:py|sh))\b", text):
            missing += [] if (REPO / path).is_file() else [f"{md}: {path}"]
        for name in re.findall(r"\+experiment=([\w-]+)", text):
            missing += [] if name in EXPERIMENTS else [f"{md}: +experiment={name}"]
        for module in re.findall(r"python -m (ptsweep[\w.]*)", text):
            missing += [] if importlib.util.find_spec(module) else [f"{md}: python -m {module}"]
    assert not missing, missing


def test_no_script_under_experiments_edits_sys_path():
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "experiments").rglob("*.py")
                 if re.search(r"sys\.path\.(insert|append)", p.read_text())]
    assert not offenders, offenders


def _py_calls(block: str, tmp_path: Path) -> list[list[str]]:
    """The argv of every ``$PY`` call a README code block makes: the block run by bash with ``$PY`` a stub that
    records its arguments (a line that detaches a job, ``nohup ... &``, is left out)."""
    calls, stub = tmp_path / "calls.jsonl", tmp_path / "py"
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "open(os.environ['CALLS'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    stub.chmod(0o755)
    calls.write_text("")
    script = "\n".join(ln for ln in block.splitlines() if "nohup" not in ln)
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, check=True, timeout=120,
                   env={"PATH": "/usr/bin:/bin", "PY": str(stub), "CALLS": str(calls)})
    return [json.loads(line) for line in calls.read_text().splitlines()]


def _probe_overrides(argv: list[str]) -> list[str]:
    """probe_training.py's Hydra overrides (its --out and --every dropped)."""
    out, skip = [], False
    for word in argv:
        if skip or word in ("--out", "--every"):
            skip = not skip
            continue
        out.append(word)
    return out


def _readme_py_calls(tmp_path: Path) -> list[tuple[str, list[str]]]:
    """(README, argv) of every ``$PY`` call in the code blocks of experiments/'s Markdown files."""
    return [(md, argv) for md, text in _readme_code() if "$PY" in text and "\n" in text
            for argv in _py_calls(text, tmp_path)]


@pytest.mark.timeout(600)
def test_every_py_command_of_the_readmes_composes_and_each_lever_probe_runs_at_smoke_size(tmp_path, cache_dir,
                                                                                          monkeypatch):
    """The blocks written with ``$PY`` (experiments/lr-transfer, experiments/context): each ``python -m ptsweep``
    call and each probe composes (a variant name or setting a README misspells fails here), each levers.py call's
    sweeps compose; one probe per distinct lever set runs to the end at smoke size."""
    from experiment_scripts import load_script

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    levers = load_script("experiments/lr-transfer/levers.py")
    probe_training = load_script("experiments/context/probe_training.py")
    kinds, lever_probes, seen = set(), {}, set()
    for md, argv in _readme_py_calls(tmp_path):
        # a loop's calls differ in values only: compose one of them (a lever or control is part of the shape)
        shape = tuple(w if w.startswith(("model.variants=", "sweep.lr_transfer.control=")) else w.split("=", 1)[0]
                      for w in _probe_overrides(argv))
        if shape in seen:
            continue
        seen.add(shape)
        if argv[:2] == ["-m", "ptsweep"]:
            compose(argv[3:])
            kinds.add(f"ptsweep {argv[2]}")
        elif argv[0].endswith("probe_training.py"):
            cfg = compose(_probe_overrides(argv[1:]))
            lever_probes.setdefault(str(cfg.model.variants), _probe_overrides(argv[1:]))
            kinds.add("probe")
        elif argv[0].endswith("levers.py"):
            args, extra = levers.parse(argv[1:])
            for _, overrides in levers.calls(args.study, args.names, args.seeds, args.data, args.weights, extra):
                compose(overrides)
            kinds.add("levers.py")
        else:
            assert (REPO / argv[0]).is_file(), (md, argv)
    assert {"ptsweep lr-transfer", "ptsweep coord-check", "probe", "levers.py"} <= kinds, kinds
    assert {"[{'name': 'independent_wd', 'decay': 0.0005}]", "[{'name': 'feature_cap', 'cap': 4.0}]"} <= set(
        lever_probes)
    smoke = ["preset=smoke", "train.tokens=512", "model.width=32", "train.threads=1", f"data.cache_dir={cache_dir}"]
    for variants, overrides in lever_probes.items():
        if variants != "[]":
            out = tmp_path / "probe.json"
            assert probe_training.main(["--out", str(out), "--every", "4", *overrides, *smoke]) == 0, overrides
            assert str(json.loads(out.read_text())["config"]["model"]["variants"]) == variants
