"""The committed studies agree with what the READMEs say about them.

Each results folder under experiments/*/results/ holds a study's finished trial records and the report.md rendered
from them. Re-rendering from the records git tracks must give the committed report.md byte for byte (a stale report,
or one a code change would render differently, fails here), the scaling README's per-seed test-loss table must be the
final records' losses, and every interval the READMEs quote about the trained study must be one the report states.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ptsweep.cli import main
from ptsweep.reports.study_report import DERIVED

REPO = Path(__file__).resolve().parents[1]


def tracked(pathspec: str) -> list[Path]:
    """The files under ``pathspec`` that git tracks ([] outside a git checkout)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", pathspec], cwd=REPO, capture_output=True)
    return [REPO / n for n in listed.stdout.decode().split("\0") if n] if listed.returncode == 0 else []


def committed_folders() -> list[Path]:
    """The results folders whose study.json git tracks (every one on disk outside a git checkout): a study running
    here that has committed nothing yet is no committed study."""
    pattern = "experiments/*/results/*/study.json"
    return sorted(p.parent for p in tracked(pattern) or REPO.glob(pattern))


FOLDERS = committed_folders()
TRAINED = REPO / "experiments" / "scaling" / "results" / "scaling-trained"
INTERVAL = re.compile(r"([+-]?\d+\.\d+) \[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]")


def tracked_copy(folder: Path, dst: Path) -> Path:
    """Copy the files of ``folder`` that git tracks (all of them outside a git checkout) to ``dst``/<name>: records a
    running study has written but nobody has committed yet are not the committed study."""
    files = tracked(str(folder)) or [p for p in folder.rglob("*") if p.is_file()]
    out = dst / folder.name
    for f in files:
        (out / f.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, out / f.relative_to(folder))
    return out


def final_test_losses(folder: Path) -> dict[tuple[str, str], dict[int, float]]:
    """(width, model) -> {seed: test loss} of the folder's final-run records."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for path in folder.glob("trials/final-*.json"):
        rec = json.loads(path.read_text())
        parts = rec["label"].split("-")
        width = next(p[1:] for p in parts if re.fullmatch(r"w\d+", p))
        out.setdefault((width, parts[1]), {})[int(parts[-1][1:])] = rec["record"]["test_loss"]
    return out


def quoted_intervals(text: str) -> list[tuple[float, float, float]]:
    """Every 'x [lo, hi]' in ``text``, as absolute values (prose writes 'BERT is 0.527 [0.436, 0.618] below PT' for
    the report's +0.527 [+0.436, +0.618])."""
    return [tuple(abs(float(v)) for v in m) for m in INTERVAL.findall(text)]


def test_the_results_folders_are_found():
    assert TRAINED in FOLDERS and len(FOLDERS) >= 2


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_committed_report_is_the_render_of_the_committed_records(folder, tmp_path, capsys):
    copy = tracked_copy(folder, tmp_path)
    derived = DERIVED.get(json.loads((folder / "study.json").read_text())["sweep"], ())
    for name in ("report.md", *derived):
        (copy / name).unlink()
    assert main(["report", str(copy)]) == 0
    assert "nothing is trained" in capsys.readouterr().out
    rendered = (copy / "report.md").read_text()
    assert not re.search(r"\b(nan|inf)\b", rendered, re.I), "a report prints a number that is not one"
    assert rendered == (folder / "report.md").read_text(), \
        f"{folder.relative_to(REPO)}/report.md is stale: run make report STUDY={folder.relative_to(REPO)}"
    for name in derived:
        assert (copy / name).read_text() == (folder / name).read_text(), f"{folder.relative_to(REPO)}/{name} is stale"


def test_scaling_readme_table_is_the_final_records(tmp_path):
    losses = final_test_losses(tracked_copy(TRAINED, tmp_path))
    readme = (REPO / "experiments" / "scaling" / "README.md").read_text()
    header = re.search(r"^\| width \| (.*) \|$", readme, re.M).group(1).split(" | ")
    models = {"PT": "pt", "BERT": "bert", "UT": "ut", "ModernBERT": "modernbert"}
    checked = 0
    for width in sorted({w for w, _ in losses}):
        row = re.search(rf"^\| {width} \| (.*) \|$", readme, re.M).group(1).split(" | ")
        for name, cell in zip(header, row):
            seeds = losses[(width, models[name])]
            assert cell == " / ".join(f"{seeds[s]:.3f}" for s in sorted(seeds)), (width, name)
            checked += 1
    assert checked == 8


def test_quoted_intervals_of_the_trained_study_are_the_reports():
    report = quoted_intervals((TRAINED / "report.md").read_text())
    scaling = (REPO / "experiments" / "scaling" / "README.md").read_text()
    headline = scaling.split("## Current result", 1)[1].split("\nTuning runs (", 1)[0]  # the rest: other studies
    main_readme = (REPO / "README.md").read_text()
    bullet = main_readme[main_readme.index("- PT vs BERT vs UT where every model has learned"):]
    bullet = bullet.split("\n- ", 1)[0].split("\n## ", 1)[0]
    quoted = quoted_intervals(headline) + quoted_intervals(bullet)
    assert len(quoted) >= 10
    rounding = 10 ** -3 / 2 + 1e-9  # the READMEs round the report's 4 decimals to 3
    for q in quoted:
        assert any(all(abs(a - b) <= rounding for a, b in zip(q, r)) for r in report), f"{q} is not in the report"
