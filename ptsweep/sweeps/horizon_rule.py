"""The horizon rule (``sweep.horizon``, applied by ``transfer.read_transfer``): the LR of transfer.yaml at a training
budget other than the one tune-small tuned it at. Rule 'off': another budget is a mismatch like any other setting
(under ``sweep.allow_transfer_mismatch`` the LR is used as tuned, with a warning line). Rule 'power': optim.lr
becomes lr_tuned (T / T_tuned)^-beta (T in optimizer steps; ``analysis.horizon.scale_lr``), beta from
``sweep.horizon.beta`` or the fit of this model in an lr-horizon study's horizon.json; the peak LR only changes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from ptsweep.analysis.horizon import scale_lr
from ptsweep.config import RunConfig
from ptsweep.errors import SweepError
from ptsweep.reports.lr_horizon_report import model_identity, with_variants

BUDGET_KEY = "train.tokens"
"""The transfer.yaml setting that holds the tuned budget."""
RISK = "an LR tuned at a short budget can collapse a long run"
FIX = ("set sweep.horizon.rule=power with sweep.horizon.beta=<number> or sweep.horizon.results=<an lr-horizon "
       "study's horizon.json> (experiments/lr-horizon/README.md)")


def active(cfg: RunConfig) -> bool:
    """Whether a budget change is the rule's to handle (rule 'power') rather than a mismatch."""
    return cfg.sweep.horizon.rule != "off"


def risk_note(mismatch: Mapping[str, Any]) -> str:
    """The words a refusal adds when the budget is among the mismatched settings ('' otherwise)."""
    return f"; the budget differs and {RISK}: {FIX}" if BUDGET_KEY in mismatch else ""


def _steps(tokens: float, batch: Any, seq_len: Any) -> float:
    return float(tokens) / (float(batch) * float(seq_len))


def budgets(cfg: RunConfig, provenance: Mapping[str, Any]) -> tuple[float, float] | None:
    """(tuned steps, target steps), or None when transfer.yaml records no budget."""
    rec = dict(provenance.get("settings") or {})
    tuned = rec.get(BUDGET_KEY, provenance.get("token_budget"))
    if tuned is None:
        return None
    batch, seq = rec.get("train.batch_size", cfg.train.batch_size), rec.get("data.seq_len", cfg.data.seq_len)
    return _steps(tuned, batch, seq), _steps(cfg.train.tokens, cfg.train.batch_size, cfg.data.seq_len)


def apply(cfg: RunConfig, values: dict[str, float], provenance: dict, source: Path | str) -> dict[str, float]:
    """``values`` with optim.lr carried to this run's budget under rule 'power' (module docstring); prints one line
    whenever the budget differs from transfer.yaml's, and records what was done in ``provenance["horizon"]``."""
    span = budgets(cfg, provenance)
    if span is None or math.isclose(span[0], span[1], rel_tol=1e-9):
        return values
    tuned, target = span
    lr = float(values["optim.lr"])
    if not active(cfg):
        provenance["horizon"] = {"rule": "off", "tuned_steps": tuned, "target_steps": target, "lr": lr}
        print(f"horizon rule off: optim.lr {lr:.4g} tuned at {tuned:,.0f} steps is used as it is for "
              f"{target:,.0f} steps (sweep.allow_transfer_mismatch) - {RISK}; to scale it, {FIX}", flush=True)
        return values
    beta, why, fit = beta_of(cfg, tuned, target)
    new = scale_lr(lr, tuned, target, beta)
    provenance["horizon"] = {"rule": "power", "beta": beta, "source": why, "tuned_steps": tuned,
                             "target_steps": target, "lr_tuned": lr, "lr": new, "beta_range": fit.get("beta_range")}
    print(f"horizon rule power: optim.lr {lr:.4g} tuned at {tuned:,.0f} steps -> {new:.4g} at {target:,.0f} steps "
          f"(x ({target:,.0f} / {tuned:,.0f})^-{beta:.3g} = {new / lr:.3g}); beta {beta:.3g} {why}"
          f"{_range_text(fit.get('beta_range'), lr, tuned, target)}{_ci_text(fit)}",
          flush=True)
    return {**values, "optim.lr": new}


def _range_text(rng: list[float] | None, lr: float, tuned: float, target: float) -> str:
    """'; its range [a, b] gives optim.lr x-y' for the fit's beta range (an infinite end: open on that side)."""
    if not rng:
        return ""
    lrs = sorted(scale_lr(lr, tuned, target, b) for b in rng if math.isfinite(b))
    open_side = " (open on one side: an optimum on a grid edge)" if len(lrs) < 2 else ""
    return (f"; its range [{rng[0]:.2f}, {rng[1]:.2f}] gives optim.lr {'-'.join(f'{x:.4g}' for x in lrs)}"
            f"{open_side}")


def _bounded(fit: Mapping[str, Any]) -> str:
    """' (N just under a collapse, where a parabola places no optimum)' when the fit left such seeds out."""
    n = fit.get("n_seed_bounded")
    return f" ({n} just under a collapse, where a parabola places no optimum)" if n else ""


def _ci_text(fit: Mapping[str, Any]) -> str:
    """'; over its N seed optima beta b [lo, hi]' when the fit has the seeds' t interval ('' otherwise)."""
    ci = fit.get("beta_ci")
    return (f"; over its {fit.get('n_seed_optima')} seed optima beta {fit['beta_seeds']:.3g} "
            f"[{ci[0]:.3g}, {ci[1]:.3g}] (95 %)" if ci else "")


def beta_of(cfg: RunConfig, tuned: float, target: float) -> tuple[float, str, dict]:
    """(beta, where it comes from in words, the fit read or {}) of rule 'power'."""
    hz = cfg.sweep.horizon
    if hz.beta is not None:
        return float(hz.beta), "(sweep.horizon.beta)", {}
    path = Path(hz.results).expanduser().resolve()
    fit, doc = model_fit(cfg, path, str(hz.estimate))
    lo, hi = min(fit["steps"]), max(fit["steps"])
    for what, t in (("tuned", tuned), ("target", target)):
        if not lo / hz.extrapolate * (1 - 1e-9) <= t <= hi * hz.extrapolate * (1 + 1e-9):
            raise SweepError(f"sweep.horizon.results: {path} measured budgets {lo:,.0f}-{hi:,.0f} steps, which do not "
                             f"bracket the {what} budget of {t:,.0f} steps; measure a budget past it, or set "
                             f"sweep.horizon.extrapolate >= {max(lo / t, t / hi):.3g} to extrapolate on purpose")
    m = fit["model"]
    corpus = f"; this run trains on {cfg.data.label}" if doc.get("data") != cfg.data.label else ""
    where = (f"from {path} ({m['name']} {m.get('parametrization', '')} width {m.get('width')}{with_variants(m)} on "
             f"{doc.get('data')}, budgets {lo:,.0f}-{hi:,.0f} steps{corpus}{_shape_note(cfg, doc)}; "
             f"{ESTIMATES[str(hz.estimate)][1]})")
    return float(fit[ESTIMATES[str(hz.estimate)][0]]), where, fit


def _shape_note(cfg: RunConfig, doc: Mapping[str, Any]) -> str:
    """'; measured at batch B x L, this run B' x L' ...' when the study's batch shape differs ('' otherwise)."""
    there = (doc.get("batch_size"), doc.get("seq_len"))
    here = (cfg.train.batch_size, cfg.data.seq_len)
    if None in there or tuple(map(int, there)) == here:
        return ""
    return (f"; measured at batch {there[0]} x {there[1]}, this run {here[0]} x {here[1]}: beta is per optimizer "
            f"step")


ESTIMATES = {"grid": ("beta", "beta of the grid optima (sweep.horizon.estimate=grid)"),
             "seeds": ("beta_seeds", "beta of the seeds' optima between grid points (sweep.horizon.estimate=seeds)")}
"""Each ``sweep.horizon.estimate``: (the key of horizon.json's fit that holds its beta, the estimate in words)."""


def model_fit(cfg: RunConfig, path: Path, estimate: str = "grid") -> tuple[dict, dict]:
    """(the fit of this config's model, the whole document) of an lr-horizon horizon.json; one-line SweepError when
    the file is missing or unreadable, holds no fit of this model, or its fit has no finite beta of ``estimate``."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SweepError(f"sweep.horizon.results: cannot read {path} ({type(e).__name__}) - point it to the "
                         f"horizon.json of a finished `make lr-horizon`") from None
    if not isinstance(doc, dict) or doc.get("sweep") != "lr-horizon" or not isinstance(doc.get("fits"), dict):
        raise SweepError(f"sweep.horizon.results: {path} is not an lr-horizon study's horizon.json")
    here = model_identity(cfg.model)
    name, par = here["name"], here["parametrization"]
    who = f"{name} ({par}{with_variants(here)})"
    fits = [f for f in doc["fits"].values() if f.get("model", {}).get("name") == name
            and f["model"].get("parametrization") == par
            and f["model"].get("variants", []) == here.get("variants", [])]
    if not fits:
        held = ", ".join(f"{f['model'].get('name')} ({f['model'].get('parametrization')}{with_variants(f['model'])})"
                         for f in doc["fits"].values() if "model" in f) or "no model"
        raise SweepError(f"sweep.horizon.results: {path} holds the fit of {held}, not of this run's {who}: a results "
                         f"file of another model")
    beta = fits[0].get(ESTIMATES[estimate][0])
    if not isinstance(beta, (int, float)) or not math.isfinite(beta):
        why = (fits[0].get("note") or "too few budgets with an optimum" if estimate == "grid" else
               f"{fits[0].get('n_seed_optima', 0)} seed optima between grid points{_bounded(fits[0])}; "
               f"sweep.horizon.estimate=grid reads the grid optima")
        raise SweepError(f"sweep.horizon.results: {path} has no finite beta (sweep.horizon.estimate={estimate}) for "
                         f"{who}: {why}")
    if beta < 0:
        raise SweepError(f"sweep.horizon.results: {path} fits beta {beta:.3g} < 0 for {who}: "
                         f"its optima rise with the budget, and the rule never raises an LR for a longer run; read "
                         f"its report, or set sweep.horizon.beta by hand")
    if "beta_range" in fits[0] and not fits[0]["beta_range"]:
        raise SweepError(f"sweep.horizon.results: {path}: no power law passes through every budget's bracket for "
                         f"{who}, so its beta {beta:.3g} describes no measured optimum; read its "
                         f"report, or set sweep.horizon.beta by hand")
    return fits[0], doc
