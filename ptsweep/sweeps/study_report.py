"""``ptsweep report <results folder>`` (``make report STUDY=...``): a study's report.md and figures re-rendered from
its results folder alone (``ptsweep.results``): no training, no Ray, no corpus, no runs/.

The command recorded in the folder's study.json runs again under ``sweep.report_only`` in a temporary output
folder: every trial is read from the folder's records (a trial it lacks is reported as missing, never trained),
and the report.md and every figure it writes are copied into the results folder (``report.md``, ``figures/``).
The same records give the same report.md, byte for byte.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path

from ptsweep import results

RENDERERS = {"scaling-curves": "ptsweep.sweeps.scaling_curves"}
"""The sweeps whose report this command renders, and their driver modules."""
FIGURES = "figures"


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
        text = (sdir / "report.md").read_text().replace(str(sdir), f"<{study['study']}>")
    out = results_dir / "report.md"
    out.write_text(text)
    print(f"report: {out} and {len(list(figures.glob('*.png')))} figures in {figures}")
    return out
