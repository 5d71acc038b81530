"""The analysis notebooks run end to end on small results that this test writes itself (same formats as the sweeps),
and the committed notebooks carry no outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from ptsweep.config import TRANSFER_KEYS

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))


def test_notebooks_exist():
    names = {p.stem for p in NOTEBOOKS}
    assert {"01_coord_check_and_lr_transfer", "02_verification_report", "03_scaling_curves",
            "04_pt_walkthrough"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebooks_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip outputs"


# --------------------------------------------------------------------------------------------------------------
# Tiny results in the sweeps' formats
# --------------------------------------------------------------------------------------------------------------
def _coord_results(root: Path) -> None:
    from ptsweep.sweeps import coord_check as cc

    rows = []
    for par in ("mup", "sp"):
        for w in (64, 128, 256):
            for q in ("z_logits", "q", "output_logits"):
                for step in range(3):
                    grow = 1.0 if par == "mup" else (w / 64) ** (0.5 * step)
                    rows.append({"quantity": q, "iteration": 1 if q != "output_logits" else 0, "step": step,
                                 "value": grow, "delta": math.nan if step == 0 else 0.1 * grow,
                                 "parametrization": par, "width": w, "seed": 0})
    coords = pd.DataFrame(rows)
    folder = root / "coord-check" / "pt"
    folder.mkdir(parents=True)
    coords.to_csv(folder / "coords.csv", index=False)
    table = cc.slopes(coords)
    table.to_csv(folder / "slopes.csv", index=False)
    res = cc.verdict(table, 0.25, "pt")
    (folder / "summary.json").write_text(json.dumps({"model": "pt", "verdict": "pass" if res["pass"] else "fail",
                                                     "mup": res}))


def _lr_results(root: Path) -> None:
    rows = []
    for par in ("mup", "sp"):
        for w in (32, 64, 128):
            for lr in (1e-3, 1e-2, 1e-1):
                best = 1e-2 if par == "mup" else 1e-2 * 32 / w
                rows.append({"trial_key": f"k{len(rows)}", "label": f"lr-{par}-w{w}", "model.parametrization": par,
                             "model.width": w, "optim.lr": lr, "model.w_attn": 1.0, "seed": 0,
                             "val_loss": 5 + (math.log10(lr) - math.log10(best)) ** 2 - 0.1 * math.log2(w),
                             "status": "ok"})
            if par == "mup":
                for wa in (0.25, 1.0, 4.0):
                    rows.append({"trial_key": f"k{len(rows)}", "label": f"wattn-{par}-w{w}",
                                 "model.parametrization": par, "model.width": w, "optim.lr": 1e-2,
                                 "model.w_attn": wa, "seed": 0, "val_loss": 5 + abs(math.log(wa)), "status": "ok"})
    folder = root / "lr-transfer"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "trials.csv", index=False)


def _verify_results(folder: Path) -> None:
    """Paired design as verify-transfer writes it: base at seeds 0, 1; every point at both seeds; a test split."""
    from ptsweep.analysis import perturb

    base = {k: (3e-3 if k == "optim.lr" else 1.0) for k in TRANSFER_KEYS}
    rng = np.random.default_rng(0)
    rows = [{"trial": f"base-s{i}", **base, "seed": i, "val_loss": 5.0 + 0.01 * i, "test_loss": 5.1 + 0.01 * i,
             "status": "ok"} for i in range(2)]
    for i, p in enumerate(perturb(base, 8, 0.2, seed=0)):
        shift = rng.uniform(0, 0.2)
        for s in range(2):
            rows.append({"trial": f"p{i:03d}-s{s}", **p, "seed": s, "val_loss": 5.05 + shift + 0.01 * s,
                         "test_loss": 5.15 + shift + 0.01 * s + rng.normal(0, 0.002), "status": "ok"})
    rows[-1]["val_loss"], rows[-1]["test_loss"], rows[-1]["status"] = math.inf, math.nan, "diverged"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "trials.csv", index=False)
    (folder / "summary.json").write_text(json.dumps({"verdict": "pass", "statement": "synthetic",
                                                     "settings": {"width": 128, "alpha": 0.2, "p": 0.2, "base": base}}))


def _scaling_results(folder: Path) -> None:
    """runs.csv as scaling-curves writes it: 3 series x 3 scales x 2 seeds."""
    rows = []
    rng = np.random.default_rng(1)
    for model, a in (("pt", 20.0), ("bert", 22.0), ("ut", 21.0)):
        for i, s in enumerate((64, 128, 256)):
            params = 1e6 * 2 ** i
            for seed in (0, 1):
                loss = a * params ** -0.1 + rng.normal(0, 0.01)
                rows.append({"model": model, "scaling": "channels" if model == "pt" else "", "series": model,
                             "scale": s, "seed": seed, "width": s, "params": params,
                             "non_embedding_params": params / 2, "flops_per_token": 6 * params, "tokens": 1e5,
                             "loss": loss, "val_loss": loss, "test_loss": loss, "best_lr": 1e-3, "status": "ok"})
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "runs.csv", index=False)


def _execute(path: Path, cwd: Path) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    _coord_results(root)
    _lr_results(root)
    _verify_results(root / "verify-transfer")
    _scaling_results(root / "scaling-curves")
    return root


@pytest.mark.parametrize("name,sub", [("01_coord_check_and_lr_transfer", ""), ("02_verification_report", "verify-transfer"),
                                      ("03_scaling_curves", "scaling-curves")])
def test_results_notebooks_execute(name, sub, results, monkeypatch, tmp_path):
    monkeypatch.setenv("PTSWEEP_RESULTS", str(results / sub) if sub else str(results))
    monkeypatch.setenv("PTSWEEP_FIG_DIR", str(tmp_path))
    nb = _execute(NB_DIR / f"{name}.ipynb", tmp_path)
    assert any(o.get("output_type") == "display_data" for c in nb.cells for o in c.get("outputs", []))


def test_walkthrough_notebook_executes(monkeypatch, tmp_path):
    monkeypatch.setenv("PTSWEEP_TRAIN_STEPS", "2")
    nb = _execute(NB_DIR / "04_pt_walkthrough.ipynb", tmp_path)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "iteration 4: mean entropy" in text
