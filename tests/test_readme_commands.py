"""Every command in the README's "What you can run" table works at smoke size: a change to the package must not
change what users type.

The commands are read from the README itself; a row without a smoke recipe below fails the test, so a new README
command must come with one. Make targets are expanded by ``make -n`` (the recipe the user's ``make`` would run,
setup skipped). The five sweeps compose and validate through ``ptsweep.cli.main`` (``--cfg``) and the planner
enumerates their trials; each sweep's smoke run end to end is its own test (test_sweeps, test_coord_check,
test_lr_transfer). ``plan``, ``size`` and ``train`` run in-process, bench scripts as subprocesses with their smallest
arguments (they take no preset).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")
pytest.importorskip("optuna")

REPO = Path(__file__).resolve().parents[1]
STAMP = ".venv/.ptsweep-installed"  # the Makefile's setup stamp: `make -n -o` treats it as up to date


def _readme_commands() -> list[str]:
    """The first code span of each row of the README's "What you can run" table, in order."""
    text = (REPO / "README.md").read_text()
    section = text.split("## What you can run", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    return [re.match(r"\| `([^`]+)`", ln).group(1) for ln in rows]


def _key(command: str) -> str:
    """'make verify-transfer WIDTH=1536 [...]' -> 'make verify-transfer'; 'python -m ptsweep size ...' -> 'size'."""
    words = command.split()
    return f"make {words[1]}" if words[0] == "make" else words[3]


def _smoke(out: Path) -> dict[str, list[str]]:
    """Per README command: make variables (make targets) or the argv after ``python -m ptsweep`` at smoke size."""
    run = f"out_dir={out} tracker=disabled"
    return {
        "make tune-small": ["PRESET=smoke", f"ARGS={run} sweep.num_samples=1"],
        "make verify-transfer": ["PRESET=smoke", "WIDTH=64", "SEEDS=1", f"ARGS={run}"],
        "make scaling-curves": ["PRESET=smoke", "SCALES=64,128", "MODELS=pt",
                                f"ARGS={run} sweep.match=non_embedding"],
        "make coord-check": ["PRESET=smoke", "MODEL=pt", f"ARGS={run} sweep.coord_check.parametrizations=[mup_sp]"],
        "make lr-transfer": ["PRESET=smoke", f"ARGS={run} sweep.lr_transfer.seeds=1 "
                             "sweep.lr_transfer.parametrizations=[mup] sweep.lr_transfer.weight_grid=[]"],
        "make report": [f"STUDY={out / 'results-smoke'}"],
        "make lr-horizon": ["PRESET=smoke", f"ARGS={run}"],
        "make bench": [f"ARGS=--width 128 --vocab 1000 --batch 2 --seq-len 16 --steps 1 --warmup 0 --threads 1 "
                       f"--models pt,bert --tracker disabled --out {out / 'bench'}"],
        "make bench-memory": [f"ARGS=--width 64 --vocab 1000 --seq-lens 16 --batches 1,2 --models pt "
                              f"--scalings rank --out {out / 'bench'}"],
        "plan": ["plan", "preset=smoke"],
        "size": ["size", "preset=smoke", "model=pt", "model.width=128", "model.scaling=rank"],
        "train": ["train", "preset=smoke", "model=pt", "model.width=64", "data=shakespeare", "train.tokens=2048",
                  *run.split()],
    }


def _make_recipe(target: str, variables: list[str]) -> list[str]:
    """The command ``make <target> <variables>`` would run (``make -n``, setup not remade), as argv."""
    out = subprocess.run(["make", "-n", "-o", STAMP, target.split()[1], *variables], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    lines = [ln for ln in out.replace("\\\n", " ").splitlines() if " -m ptsweep " in ln or " bench/" in ln]
    assert len(lines) == 1, out
    return shlex.split(lines[0])


def test_readme_table_lists_the_commands_this_test_runs(tmp_path):
    commands = _readme_commands()
    assert len(commands) >= 10, commands
    assert {_key(c) for c in commands} == set(_smoke(tmp_path)), "a README command without a smoke run (or back)"


SWEEP_COMMANDS = {"make tune-small", "make verify-transfer", "make scaling-curves", "make coord-check",
                  "make lr-transfer", "make lr-horizon"}
"""Checked by composing (``--cfg``) and planning; their runs are the sweeps' own tests."""


def _check_sweep(argv: list[str], capsys) -> int:
    """The sweep command composes and validates (exit 0, the config on stdout); the planner's sweeps enumerate."""
    from ptsweep import planner
    from ptsweep.cli import main
    from ptsweep.config import compose

    assert main([*argv, "--cfg"]) == 0, argv
    assert yaml.safe_load(capsys.readouterr().out)["preset"] == "smoke", argv
    if argv[0] in planner.SWEEPS:
        assert planner.plan(compose(argv[1:]), [argv[0]]), argv
    return 0


@pytest.mark.timeout(600)
def test_every_readme_command_works_at_smoke_size(tmp_path, cache_dir, capsys):
    from ptsweep.cli import main

    recipes = _smoke(tmp_path)
    shutil.copytree(REPO / "tests" / "fixtures" / "results-smoke", tmp_path / "results-smoke")  # make report's study
    ran = []
    for command in _readme_commands():
        key = _key(command)
        t0 = time.time()
        argv = _make_recipe(key, recipes[key]) if key.startswith("make ") else [sys.executable, "-m", "ptsweep",
                                                                                *recipes[key]]
        if argv[1:3] == ["-m", "ptsweep"]:
            assert "preset=smoke" in argv or key == "make report", argv
            code = _check_sweep(argv[3:], capsys) if key in SWEEP_COMMANDS else main(argv[3:])
        else:  # a bench script: its own process, as `make bench` runs it
            code = subprocess.run([sys.executable, *argv[1:]], cwd=REPO, capture_output=True, text=True,
                                  timeout=300).returncode
        assert code == 0, (command, argv)
        capsys.readouterr()  # what this command printed is not the next one's --cfg output
        ran.append(key)
        print(f"{key}: {time.time() - t0:.1f} s", file=sys.stderr)
    assert (tmp_path / "bench" / "bench.json").exists() and (tmp_path / "bench" / "memory.json").exists()
    assert (tmp_path / "results-smoke" / "figures" / "learning_curves_w64.png").exists()  # make report rendered
    assert len(ran) == len(recipes)
