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


def vs_unigram(loss, unigram) -> str:
    """'-0.123 (below)' or '+0.050 ABOVE unigram: nothing learned' (issue 8: every loss read against the baseline)."""
    try:
        loss, unigram = float(loss), float(unigram)
    except (TypeError, ValueError):
        return ""
    if not (math.isfinite(loss) and math.isfinite(unigram)):
        return ""
    d = loss - unigram
    return f"{d:+.3f} (below)" if d < 0 else f"{d:+.3f} ABOVE unigram: nothing learned"


def _ci(v) -> str:
    return f"[{v[0]:.3g}, {v[1]:.3g}]" if v and all(isinstance(x, (int, float)) and math.isfinite(x) for x in v) else ""


def verdict_section(vs: dict) -> list[str]:
    """The verification verdict: the outcome, the numbers behind it, the strict test and the rule."""
    st = vs.get("settings", {})
    split = st.get("loss_split", "val")
    out = [f"**Outcome: {vs['verdict'].upper()}** (scored on the {split} split; decision rule below).", ""]
    if "df" in vs:
        base = vs.get("base_losses", [])
        out += [
            f"- Base point: {len(base)} seed(s), {split} loss {', '.join(f'{x:.4f}' for x in base)} "
            f"(mean {vs['base_loss_mean']:.4f}); each of the {vs['n_valid']} finite perturbed points "
            f"({vs['n_failed']} failed) at {st.get('perturbed_seeds', '?')} paired seed(s); design {vs['design']}, "
            f"residual df = {vs['df']}, run-noise sd = {vs['sigma']:.4g}.",
            f"- Neighbourhood - base (average paired contrast): {vs['neighbourhood_delta']:+.4f} +- "
            f"{vs['neighbourhood_se']:.4f} (t = {vs['neighbourhood_t']:+.2f}).",
            f"- {vs['n_better_paired']} of {vs['n_valid']} points beat the base (equivalence would give "
            f"{vs['count_expected_if_equivalent']:g} on average; P(>= {vs['n_better_paired']} | equivalence) = "
            f"{vs['p_count']:.2f}); {vs['n_better_beyond_noise']} beat it and {vs['n_worse_beyond_noise']} are worse "
            f"beyond the family-wise band (|t| > {vs['t_quantile']:.3g}, test_alpha = {vs['test_alpha']}).",
            f"- Reasons: {'; '.join(vs.get('reasons', []))}.",
            f"- Paper's strict test ([S] §3.1, n_required = {vs['n_required']} at alpha = {st.get('alpha')}, "
            f"p = {st.get('p')}): **{vs['strict']['verdict']}** - {vs['strict']['statement']}",
        ]
        if vs.get("transfer_mismatch"):
            out.append(f"- PROCEEDED DESPITE transfer.yaml mismatch: {vs['transfer_mismatch']}")
    else:
        out.append(f"- {vs.get('statement', '')}")
    out += ["", "Rule: each perturbed point runs at the base's seeds (paired: same initialisation, data order and "
            "masks), and point j's contrast delta_j = point - base is estimated in a seed-blocked linear model with "
            "Student-t errors. FAIL if some point beats the base beyond the Bonferroni t band (or the neighbourhood "
            "is better on average); PASS if n >= n_required, at most half of the points beat the base and the "
            "neighbourhood is worse on average (one-sided t); FLAT if every point is within +-"
            f"{100 * vs.get('margin', 0.01):.0f} % of the base with its simultaneous interval; INCONCLUSIVE "
            "otherwise (including no noise estimate). A base beaten by more than half of its neighbourhood is never "
            "a pass. Measured error rates: README, \"Verification verdict\".", ""]
    return out


def scaling_section(ss: dict, sres: pd.DataFrame) -> list[str]:
    split = ss.get("loss_split", "val")
    t = sres.copy()
    t["interval"] = [f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "" for lo, hi in zip(t["loss_lo"], t["loss_hi"])]
    t["vs unigram"] = [vs_unigram(x, u) for x, u in zip(t["loss"], t["unigram_loss"])]
    out = [f"Losses on the **{split}** split (baselines' LRs were chosen on validation), mean over "
           f"{len(ss.get('seeds', []))} seed(s) per point; interval = 95 % t interval with the seed sd pooled over "
           f"all cells (sd {ss.get('pooled_seed_sd') or float('nan'):.4f}, df {ss.get('pooled_df')}); token SE = "
           f"standard error over the scored masked tokens.", "",
           markdown_table(t, ["series", "scale", "width", "params", "n_seeds", "loss", "interval", "loss_token_se",
                              "unigram_loss", "vs unigram", "val_loss", "best_lr", "lr_edge", "status"]), ""]
    out += ["Fits (rule: L = a P^-b + c when c is identified - >= 4 sizes, converged, F-test against the pure law "
            "- else L = a P^-b; 95 % intervals from a residual bootstrap over seeds):", ""]
    for key, label in (("fits", "parameters"), ("fits_flops", "training FLOPs")):
        for series, f in ss.get(key, {}).items():
            out.append(f"- {series} vs {label}: {f['form']}, a = {f['a']:.3g} {_ci(f['ci']['a'])}, b = {f['b']:.3g} "
                       f"{_ci(f['ci']['b'])}" + (f", c = {f['c']:.3g} {_ci(f['ci']['c'])}" if f['form'] ==
                                                  'power_law_const' else "") + f"; {f.get('note') or ''}")
    out += ["", "Differences (PT - baseline, negative = PT better), 95 % t interval:", ""]
    for pair, per in ss.get("differences", {}).items():
        for s, d in per.items():
            dec = {"a_lower": "PT lower", "b_lower": "baseline lower"}.get(d["decided"], "undecided")
            out.append(f"- {pair} at N = {s}: {d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}] -> {dec}")
    out += ["", f"PT beats BERT at every scale: {ss.get('pt_beats_bert_at_every_scale')}; UT beats PT at every scale: "
                f"{ss.get('ut_beats_pt_at_every_scale')} (null = undecided at some scale)."]
    edges = [n for n in ss.get("notes", []) if "not bracketed" in n]
    if edges:
        out += ["", "Baseline LR edge flags: " + "; ".join(edges) + "."]
    return out + [""]


def write_report(root: Path, dirs: dict[str, Path], wall: dict[str, float]) -> Path:
    """<root>/report.md from the three study folders."""
    from ptsweep.sweeps.verify_transfer import with_ledger_metrics

    t, v, s = dirs["tune-small"], dirs["verify-transfer"], dirs["scaling-curves"]
    ts, vs, ss = read_json(t / "summary.json"), read_json(v / "summary.json"), read_json(s / "summary.json")
    trials = with_ledger_metrics(pd.read_parquet(t / "trials.parquet"), t)
    vres = pd.read_parquet(v / "results.parquet")
    sres = pd.read_parquet(s / "results.parquet")
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    best = ts["best"]
    uni_val = float(trials["unigram_loss"].dropna().iloc[0]) if trials["unigram_loss"].notna().any() else math.nan
    uni_val_se = float(trials["unigram_loss_se"].dropna().iloc[0]) if trials["unigram_loss_se"].notna().any() \
        else math.nan
    uni_test = float(sres["unigram_loss"].dropna().iloc[0]) if sres["unigram_loss"].notna().any() else math.nan
    trials["vs unigram"] = [vs_unigram(x, uni_val) for x in trials["val_loss"]]
    vres = vres.copy()
    vres["vs unigram"] = [vs_unigram(x, vs.get("unigram_loss")) for x in vres.get("loss", vres["val_loss"])]
    best_pt = sres[sres["series"].str.startswith("pt")]
    out = [
        "# ptsweep demo report",
        "",
        f"Toy-scale run of the three sweeps on the embedded Shakespeare data (preset `{best.get('preset', '')}`), "
        f"generated {time.strftime('%Y-%m-%d %H:%M')}, git commit `{best.get('git_commit', 'unknown')}`.",
        "",
        "## Headline numbers",
        "",
        f"- **Unigram baseline** (training-set token frequencies on the same masked tokens; a model at or above it "
        f"has learned no context): validation {uni_val:.4f} +- {uni_val_se:.4f}, test {uni_test:.4f}.",
        f"- **Best tune-small loss**: {best['val_loss']:.4f} at width {best['width']} "
        f"({vs_unigram(best['val_loss'], uni_val)}; trial {best['trial_id']}, {ts['n_trials']} trials: "
        f"{ts['status_counts']}).",
        f"- **Transfer verdict** at width {vs['settings']['width']}: **{vs['verdict']}** "
        f"(strict test of [S]: {vs.get('strict', {}).get('verdict', 'n/a')}); details in section 2.",
        "- **Scaling**: " + ", ".join(f"PT N={int(r['scale'])}: {r['loss']:.3f} ({vs_unigram(r['loss'], r['unigram_loss'])})"
                                      for _, r in best_pt.iterrows())
        + f"; PT beats BERT at every scale: {ss.get('pt_beats_bert_at_every_scale')} (null = undecided).",
        "- **Wall time** of each `demo` invocation (a re-run resumes and only runs what is missing): " + "; ".join(
            ", ".join(f"{k} {w / 60:.1f} min" for k, w in inv.items()) for inv in wall["invocations"]),
        "",
        "## 1. tune-small (Optuna TPE + ASHA over the 7 transferable hyperparameters, validation split)",
        "",
        "Transferred values (`transfer.yaml`): " + ", ".join(f"`{k}={best['values'][k]:.4g}`" for k in TRANSFER_KEYS),
        "",
        markdown_table(trials.sort_values("val_loss"), ["trial_id", *TRANSFER_KEYS, "val_loss", "val_loss_se",
                                                        "vs unigram", "status", "steps"]),
        "",
    ]
    for name in ("optuna_history", "optuna_importances", "optuna_slices"):
        if (t / f"{name}.png").exists():
            out += [f"![{name}]({rel(t / f'{name}.png')})", ""]
    out += [f"Notes: {'; '.join(ts.get('notes', [])) or 'none'}", "",
            "## 2. verify-transfer (random search around the transferred point, [S] §3.1)", ""]
    out += verdict_section(vs)
    out += [markdown_table(vres, ["rank", "trial", "distance", "loss", "delta", "se", "t", "vs unigram", "val_loss",
                                  "n_seeds", "rel_increase", "status", "error"]), ""]
    for name in ("fig1a_distance", "fig1b_rank"):
        if (v / f"{name}.png").exists():
            out += [f"![{name}]({rel(v / f'{name}.png')})", ""]
    out += ["## 3. scaling-curves (PT transferred vs BERT / UT tuned per scale)", ""]
    out += scaling_section(ss, sres)
    for name in ("fig2a_pt_vs_bert", "fig2b_pt_vs_ut", "loss_vs_compute"):
        if (s / f"{name}.png").exists():
            out += [f"![{name}]({rel(s / f'{name}.png')})", ""]
    out += ["## Files", ""] + [f"- `{rel(d)}/`" for d in dirs.values()] + [
        "", "Full settings: each folder's `summary.json`; every trial: `<study>/trials/<key>/` and "
            "`results.jsonl` in the output root.", ""]
    path = root / "report.md"
    path.write_text("\n".join(out))
    (root / "demo_summary.json").write_text(json.dumps({"wall_s": wall["invocations"], "verdict": vs["verdict"],
                                                        "strict_verdict": vs.get("strict", {}).get("verdict"),
                                                        "best_tune_loss": best["val_loss"],
                                                        "unigram_val_loss": uni_val, "unigram_test_loss": uni_test,
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
