"""demo: the three sweeps chained at toy scale (``make demo`` = ``python -m ptsweep demo preset=demo``).

    1. tune-small        -> <out_dir>/demo/tune-small        (transfer.yaml, trials, Optuna plots)
    2. verify-transfer   -> <out_dir>/demo/verify-transfer   (reads 1's transfer.yaml; Figure 1)
    3. scaling-curves    -> <out_dir>/demo/scaling-curves    (reads 1's transfer.yaml; Figure 2)
    report               -> <out_dir>/demo/report.md         (tables, headline numbers, plots as relative links)

One Ray session serves the three sweeps. Each stage resumes like the sweep itself (ledger / Tuner.restore), so
re-running an interrupted demo continues where it stopped. ``sweep.study`` (default "demo") names the folder.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pandas as pd

from ptsweep.config import TRANSFER_KEYS, RunConfig, with_overrides
from ptsweep.sweeps import scaling_curves, tune_small, verify_transfer
from ptsweep.sweeps.common import ray_session, read_json, study_path

STAGES = (("tune-small", tune_small), ("verify-transfer", verify_transfer), ("scaling-curves", scaling_curves))


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return "inf"
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame, cols: list[str] | None = None, max_rows: int = 80) -> str:
    """A GitHub-markdown table of ``df`` (no tabulate dependency)."""
    cols = [c for c in (cols or list(df.columns)) if c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.head(max_rows).iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    if len(df) > max_rows:
        lines.append(f"\n({len(df) - max_rows} more rows in the CSV)")
    return "\n".join(lines)


def write_report(root: Path, dirs: dict[str, Path], wall: dict[str, float]) -> Path:
    """<root>/report.md from the three study folders."""
    t, v, s = dirs["tune-small"], dirs["verify-transfer"], dirs["scaling-curves"]
    ts, vs, ss = read_json(t / "summary.json"), read_json(v / "summary.json"), read_json(s / "summary.json")
    trials = pd.read_parquet(t / "trials.parquet")
    vres = pd.read_parquet(v / "results.parquet")
    sres = pd.read_parquet(s / "results.parquet")
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    best = ts["best"]
    fits = ss.get("fits", {})
    out = [
        "# ptsweep demo report",
        "",
        f"Toy-scale run of the three sweeps on the embedded Shakespeare data (preset `{best.get('preset', '')}`), "
        f"generated {time.strftime('%Y-%m-%d %H:%M')}, git commit `{best.get('git_commit', 'unknown')}`.",
        "",
        "## Headline numbers",
        "",
        f"- **Best tune-small loss**: {best['val_loss']:.4f} at width {best['width']} "
        f"(trial {best['trial_id']}, {ts['n_trials']} trials: {ts['status_counts']}).",
        f"- **Transfer verdict** at width {vs['settings']['width']}: **{vs['verdict']}** - {vs['statement']}",
        f"  (n_required = {vs['n_required']}, n_run = {vs['n_run']}, alpha = {vs['settings']['alpha']}, "
        f"p = {vs['settings']['p']})",
        "- **Power-law fits** L = a P^-b: " + "; ".join(
            f"{m}: a = {f['a']:.3g}, b = {f['b']:.3g} (R2 = {f['r2']:.3f})" for m, f in fits.items()),
        "- **Winner per scale**: " + ", ".join(f"N={k}: {w['winner']}" for k, w in ss.get("winners", {}).items())
        + f" (PT beats BERT at every scale: {ss.get('pt_beats_bert_at_every_scale')}, "
          f"UT beats PT at every scale: {ss.get('ut_beats_pt_at_every_scale')})",
        "- **Wall time** of each `demo` invocation (a re-run resumes and only runs what is missing): " + "; ".join(
            ", ".join(f"{k} {w / 60:.1f} min" for k, w in inv.items()) for inv in wall["invocations"]),
        "",
        "## 1. tune-small (Optuna TPE + ASHA over the 7 transferable hyperparameters)",
        "",
        "Transferred values (`transfer.yaml`): " + ", ".join(f"`{k}={best['values'][k]:.4g}`" for k in TRANSFER_KEYS),
        "",
        markdown_table(trials.sort_values("val_loss"), ["trial_id", *TRANSFER_KEYS, "val_loss", "status", "steps"]),
        "",
    ]
    for name in ("optuna_history", "optuna_importances", "optuna_slices"):
        if (t / f"{name}.png").exists():
            out += [f"![{name}]({rel(t / f'{name}.png')})", ""]
    out += [f"Notes: {'; '.join(ts.get('notes', [])) or 'none'}", "",
            "## 2. verify-transfer (random search around the transferred point, [S] §3.1)", "",
            markdown_table(vres, ["rank", "trial", "distance", "val_loss", "rel_increase", "status", "error"]), ""]
    for name in ("fig1a_distance", "fig1b_rank"):
        if (v / f"{name}.png").exists():
            out += [f"![{name}]({rel(v / f'{name}.png')})", ""]
    out += ["## 3. scaling-curves (PT transferred vs BERT / UT tuned per scale)", "",
            markdown_table(sres, ["series", "scale", "width", "params", "non_embedding_params", "flops_per_token",
                                  "tokens", "val_loss", "best_lr", "status"]), ""]
    for name in ("fig2a_pt_vs_bert", "fig2b_pt_vs_ut", "loss_vs_compute"):
        if (s / f"{name}.png").exists():
            out += [f"![{name}]({rel(s / f'{name}.png')})", ""]
    out += ["## Files", ""] + [f"- `{rel(d)}/`" for d in dirs.values()] + [
        "", "Full settings: each folder's `summary.json`; every trial: `<study>/trials/<key>/` and "
            "`results.jsonl` in the output root.", ""]
    path = root / "report.md"
    path.write_text("\n".join(out))
    (root / "demo_summary.json").write_text(json.dumps({"wall_s": wall["invocations"], "verdict": vs["verdict"],
                                                        "best_tune_loss": best["val_loss"],
                                                        "winners": ss.get("winners", {})}, indent=1))
    return path


def run(cfg: RunConfig) -> Path:
    """Chain tune-small -> verify-transfer -> scaling-curves in ``<out_dir>/<sweep.study or demo>/``; write
    report.md; return that folder."""
    root_name = cfg.sweep.study or "demo"
    root = study_path(cfg, "demo") if cfg.sweep.study else (Path(cfg.out_dir) / root_name).resolve()
    root.mkdir(parents=True, exist_ok=True)
    transfer = root / "tune-small" / "transfer.yaml"
    dirs, wall = {}, {}
    t_all = time.time()
    with ray_session(cfg.ray):
        for stage, module in STAGES:
            t0 = time.time()
            over = {"sweep.study": f"{root_name}/{stage}"}
            if stage != "tune-small":
                over["sweep.transfer_file"] = str(transfer)
            print(f"=== demo: {stage} ===", flush=True)
            dirs[stage] = module.run(with_overrides(cfg, over))
            wall[stage] = time.time() - t0
    wall["total"] = time.time() - t_all
    log = root / "timings.jsonl"
    with log.open("a") as f:
        f.write(json.dumps({"finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **wall}) + "\n")
    invocations = [{k: v for k, v in json.loads(line).items() if k != "finished_at"}
                   for line in log.read_text().splitlines() if line.strip()]
    path = write_report(root, dirs, {**wall, "invocations": invocations})
    print(f"demo: report in {path} ({wall['total'] / 60:.1f} min)")
    return root
