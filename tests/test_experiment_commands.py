"""The experiment configs (``conf/experiment/*.yaml``, ``+experiment=<name>``) and the commands of experiments/'s
READMEs: every config composes through the CLI (``python -m ptsweep lr-transfer +experiment=<name> --cfg``) under
the preset it names, the same with that preset given on the command line, and through ``make lr-transfer
ARGS="+experiment=<name>"`` (``make -n``); every script, config and ``python -m`` module a README command names
exists. Nothing trains."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
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
