"""``ptsweep report <results folder>`` (``make report STUDY=...``): a study's report.md and figures re-rendered from
its results folder alone: the command recorded in its study.json runs again under ``sweep.report_only`` in a
temporary folder (a trial the folder lacks is reported as missing, never trained). The same records give the same
report.md, byte for byte.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path

from ptsweep.trials import results

RENDERERS = {"scaling-curves": "ptsweep.sweeps.scaling_curves", "lr-horizon": "ptsweep.sweeps.lr_horizon"}
"""The sweeps whose report this command renders, and their driver modules."""
FIGURES = "figures"
DERIVED = {"lr-horizon": ("horizon.json",)}
"""Files besides report.md a sweep's render writes into the results folder: lr-horizon's fit, so that
``sweep.horizon.results`` can read a committed study on any clone."""


def render(results_dir: Path) -> Path:
    """Re-render the report of ``results_dir`` into it; returns the path of its report.md."""
    results_dir = Path(results_dir).resolve()
    study = results.read_study(results_dir)
    if study["sweep"] not in RENDERERS:
        raise results.ResultsError(f"{results_dir}: a {study['sweep']} study; `report` renders "
                                   f"{', '.join(RENDERERS)} studies")
    n = len(results.record_paths(results_dir))
    print(f"report: {study['study']} ({study['sweep']}) from {n} trial records in {results_dir}; nothing is trained",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="ptsweep-report-") as tmp:
        cfg = results.study_config(results_dir, **{"out_dir": tmp, "sweep.results": str(results_dir),
                                                   "sweep.report_only": True, "tracker.mode": "disabled"})
        sdir = Path(importlib.import_module(RENDERERS[study["sweep"]]).run(cfg))
        figures = results_dir / FIGURES
        shutil.rmtree(figures, ignore_errors=True)
        figures.mkdir()
        for png in sorted(sdir.glob("*.png")):
            shutil.copyfile(png, figures / png.name)
        for name in DERIVED.get(study["sweep"], ()):
            shutil.copyfile(sdir / name, results_dir / name)
        text = _with_progress((sdir / "report.md").read_text().replace(str(sdir), f"<{study['study']}>"), sdir, n)
    out = results_dir / "report.md"
    out.write_text(text)
    print(f"report: {out} and {len(list(figures.glob('*.png')))} figures in {figures}")
    return out


def _with_progress(text: str, sdir: Path, n: int) -> str:
    """report.md with a line under its title: how many records it rests on and how many planned runs are missing."""
    import pandas as pd

    words = {"runs": "final runs", "lr_search": "tuning trials", "trials": "trials"}  # the sweeps' tables of runs
    missing = {name: int((pd.read_csv(sdir / f"{name}.csv")["status"] == "missing").sum())
               for name in words if (sdir / f"{name}.csv").exists()}
    what = " and ".join(f"{k} {words[name]}" for name, k in missing.items())
    line = (f"_Rendered from {n} trial records of its results folder; not yet in it: {what} (their cells say so)._"
            if any(missing.values()) else f"_Rendered from {n} trial records of its results folder: every planned "
                                          f"run is in it._")
    title, _, rest = text.partition("\n")
    return f"{title}\n\n{line}\n{rest}"


def repository_section(results_dir: Path, heading: str) -> list[str]:
    """Markdown lines quoting the claims section of a committed study's report.md, with how many trial records it
    rests on and the command that re-renders it."""
    from ptsweep.io import repo_root

    results_dir = Path(results_dir).resolve()
    rel = results_dir.relative_to(repo_root()) if results_dir.is_relative_to(repo_root()) else results_dir
    n = len(results.record_paths(results_dir)) if results_dir.is_dir() else 0
    out = [f"## {heading}", "", f"_Rendered from the repository's results folder `{rel}` ({n} finished trial records "
                                  f"committed), not run by this command; `make report STUDY={rel}` re-renders it._",
           ""]
    report = results_dir / "report.md"
    if not report.exists():
        return out + ["No report yet: the study has not committed a rendered report.", ""]
    lines = report.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    if start is None:
        return out + ["Its report.md has no claims section.", ""]
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(("-", " "))),
               len(lines))
    return out + [line.replace("## ", "### ", 1) if i == start else line for i, line in enumerate(lines[start:end],
                                                                                                   start)] + [""]

