"""The demo's report (``<out_dir>/demo/report.md``): one screen a newcomer reads first (what ran, the unigram and
no-context baselines, the three results with their noise and the context check of every final model), then a section
per sweep. Final models are quoted on the test split, tune-small's trials on validation.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis import framings
from ptsweep.analysis.regret import PLANE_CAVEAT, missing_bound
from ptsweep.config import TRANSFER_KEYS
from ptsweep.reports.demo_figures import PT_TARGET
from ptsweep.reports.demo_format import (ci_text, gain_text, loss_line, markdown_table, num, table_rows,
                                        vs_unigram)
from ptsweep.reports.demo_models import final_models, with_context


def context_check(models: pd.DataFrame) -> list[str]:
    """Plain-words check: how many final models learned context, PT's smallest gain against the 0.2-nat target."""
    if models.empty:
        return ["- No final model finished."]
    n_ok = int(models["learned"].sum())
    pt = models[models["model"] == "pt"]
    worst = pt.loc[pt["gain"].idxmin()] if len(pt) and pt["gain"].notna().any() else None
    out = [f"- **Context check**: {n_ok} of {len(models)} final models learned context (gain > 2 SE on test)"
           + ("." if n_ok == len(models) else ": NOT all - " + ", ".join(
               f"{r['name']} ({r['role']}) {gain_text(r['gain'], r['gain_se'])}"
               for _, r in models[~models["learned"]].head(6).iterrows())
              + (" ..." if (~models["learned"]).sum() > 6 else "") + ".")]
    if worst is not None:
        met = worst["gain"] >= PT_TARGET
        out.append(f"- PT's smallest context gain: {gain_text(worst['gain'], worst['gain_se'])} ({worst['name']}, "
                   f"{worst['role']}); target >= {PT_TARGET} nats: **{'met' if met else 'NOT met'}**"
                   + ("" if met or not worst["loss"] > worst["no_context"] else
                      f" - its test loss {num(worst['loss'])} is above the no-context baseline "
                      f"{num(worst['no_context'])}: at this budget it predicts mostly from token frequencies and the "
                      f"visible token (experiments/demo/README.md)") + ".")
    return out


def scaling_table(models: pd.DataFrame, ss: dict) -> list[str]:
    """PT vs BERT / UT per scale: test loss and context gain of each, PT - baseline with its 95 % interval."""
    sc = models[models["role"] == "scaling"]
    if sc.empty:
        return ["(no scaling point finished)"]
    series = list(dict.fromkeys(sc["name"].str.split(" ").str[0]))
    pairs = [p for p in ss.get("differences", {})]
    head = "| PT width | " + " | ".join(f"{x} loss (context gain)" for x in series) + " | " + \
        " | ".join(f"{p.replace('-', ' - ')} [95 %]" for p in pairs) + " |"
    lines = [head, "|" + "---|" * (1 + len(series) + len(pairs))]
    for width in sorted(sc["width"].unique()):
        cells = []
        for x in series:
            r = sc[(sc["width"] == width) & (sc["name"] == f"{x} N={int(width)}")]
            cells.append(f"{num(r['loss'].iloc[0])} ({num(r['gain'].iloc[0], sign=True)} +- {num(r['gain_se'].iloc[0])}"
                         f"{' learned' if r['learned'].iloc[0] else ' NOT learned'})" if len(r) else "failed")
        for p in pairs:
            d = ss["differences"][p].get(str(int(width)), {})
            cells.append(f"{num(d.get('diff'), sign=True)} [{num(d.get('lo'), sign=True)}, "
                         f"{num(d.get('hi'), sign=True)}] {framings.decision_text(d)}")
        lines.append(f"| {int(width)} | " + " | ".join(cells) + " |")
    return lines


BEYOND = "; the optimum may lie beyond"
"""The clause every edge note of scaling-curves ends with: said once in the summary's edge line."""


def edge_lines(ss: dict) -> list[str]:
    """The baselines' searched optima on the edge of their range (on the first screen, not only in section 3): the
    optimum may lie beyond, and a baseline's loss is then an upper bound of its tuned loss (said once)."""
    edges = [n.removesuffix(BEYOND) for n in ss.get("notes", [])
             if "not bracketed" in n or "only one search trial" in n]
    return ([f"- **Baseline LR search at its edge** ({len(edges)}; the optimum may lie beyond, so the tuned baseline "
             "may be better than shown): " + "; ".join(edges) + ".", ""] if edges else [])


def every_scale_line(ss: dict) -> str:
    """'PT beats BERT at every scale: **undecided: bert learned no context at this budget (N = 32)**; UT beats PT
    ...': scaling-curves' every-scale statements in words (``framings.verdict_text``)."""
    st = ss.get("statements", {})
    return (f"PT beats BERT at every scale: **{st.get('pt_beats_bert_at_every_scale', 'n/a')}**; UT beats PT at every "
            f"scale: **{st.get('ut_beats_pt_at_every_scale', 'n/a')}**.")


def first_screen(trials: pd.DataFrame, ts: dict, vs: dict, ss: dict, models: pd.DataFrame, wall: dict,
                 cfg_info: dict) -> list[str]:
    """The summary a newcomer reads first (module docstring); ``trials``: tune-small's, with their ledger metrics."""
    best = ts["best"]
    tuned = models[models["role"] == "tuned point"]
    b = trials[trials["trial_id"].astype(str) == str(best["trial_id"])].iloc[0]
    inv = wall["invocations"]
    last = {k: sum(i.get(k, 0.0) for i in inv) for k in (inv[0] if inv else {})}  # summed over the invocations
    split = ", ".join(f"{k} {v / 60:.1f}" for k, v in last.items() if k != "total")
    vst = vs.get("settings", {})
    resumed = f"; summed over {len(inv)} invocations (a re-run resumes)" if len(inv) > 1 else ""
    others = " and ".join(m.upper() for m in ss.get("models", []) if m != "pt")
    return [
        "## Summary",
        "",
        f"**What ran** (preset `{best.get('preset', '')}`, commit `{str(best.get('git_commit', ''))[:10]}`, "
        f"{last.get('total', math.nan) / 60:.1f} min: {split} min{resumed}): "
        f"PT ({best.get('parametrization')}, {best.get('scaling')} scaling) tuned at width {best['width']} "
        f"({ts['n_trials']} Optuna TPE trials, {ts.get('early_stopping', 'ASHA')}: {ts['status_counts']}), its 7 "
        f"values transferred to width {vst.get('width')} and verified against {vs.get('n_perturbed_run', '?')} "
        f"points perturbed by +-{100 * vst.get('perturb', 0.2):.0f} % ({vst.get('perturbed_seeds')} paired seeds "
        f"each), then PT vs {others} (LR tuned per scale) at PT widths "
        f"{', '.join(str(x) for x in ss.get('scales', []))}, {len(ss.get('seeds', []))} seeds each. Every run: "
        f"{cfg_info['steps']} steps of {cfg_info['batch']} x {cfg_info['seq_len']} tokens, Shakespeare, "
        f"V = {cfg_info['vocab']}; final models scored on {cfg_info['test_blocks']} held-out test blocks "
        f"(~{cfg_info['test_tokens']} masked tokens)."
        + (f" {cfg_info['n_shared']} runs served two sweeps (identical configs: `shared_runs.json`)."
           if cfg_info.get("n_shared") else ""),
        "",
        f"**Baselines** (a model above *unigram* learned nothing; below *no-context* it used context): test unigram "
        f"{num(cfg_info['unigram'])}, no-context {num(cfg_info['no_context'])}. Context gain = unigram - model on the "
        f"targets whose input is [MASK] (+- SE); learned = gain > 2 SE.",
        "",
        f"1. **Tuned point** (width {best['width']}, LR {best['values']['optim.lr']:.3g}): validation loss "
        f"{loss_line(b['val_loss'], b['unigram_loss'], b['no_context_loss'])} +- {num(b['val_loss_se'])}; "
        f"context gain {gain_text(b['context_gain'], b['context_gain_se'])}"
        + (f"; on test {gain_text(tuned['gain'].iloc[0], tuned['gain_se'].iloc[0])}." if len(tuned) else "."),
        f"2. **Transfer to width {vst.get('width')}** (base test loss {num(vs.get('base_loss_mean'))}): "
        f"{transfer_summary(vs)} Details and rules: section 2.",
        f"3. **PT vs baselines** (test loss, mean of {len(ss.get('seeds', []))} seeds; PT - baseline with a 95 % "
        f"interval; negative = PT better; no verdict where a model learned no context): {every_scale_line(ss)}",
        "",
        *scaling_table(models, ss),
        "",
        *edge_lines(ss),
        *context_check(models),
        "",
    ]


def regret_text(vs: dict) -> str:
    """'regret 0.12 % [0.00 %, 0.81 %] of the loss' from verify-transfer's summary (analysis.regret), or why it is
    missing."""
    reg = vs.get("regret") or {}
    if "regret_rel" not in reg:
        return f"regret not estimated ({reg.get('reason', 'no surface fit')})"
    lo, hi = reg["regret_rel_ci"]
    if reg.get("model") == "linear":  # the corner of a plane: an extrapolation, not a measured loss
        return f"regret from a plane {PLANE_CAVEAT}: {reg['regret_rel']:.2%} [{lo:.2%}, {hi:.2%}] of the loss"
    return f"regret {reg['regret_rel']:.2%} [{lo:.2%}, {hi:.2%}] of the loss ({reg.get('model', '?')} surface)"


def transfer_summary(vs: dict) -> str:
    """Summary item 2, one sentence per claim: the regret bound (or why n points give none), the strict test of [S]
    and the contrast rule, each with the one count it rests on; their statements are in section 2 only."""
    no_bound = missing_bound(vs, len(TRANSFER_KEYS))
    first = (f"No regret bound: {no_bound}." if no_bound else
             f"Regret verdict **{vs['verdict'].upper()}**: {regret_text(vs)}.")
    strict = str((vs.get("strict") or {}).get("verdict", "n/a")).upper()
    return (f"{first} Strict test of [S]: **{strict}** ({vs.get('n_better', '?')} of {vs.get('n_valid', '?')} "
            f"points lower than the base). Contrast rule: **{str(vs.get('contrast_verdict', 'n/a')).upper()}** "
            f"({vs.get('n_better_beyond_noise', '?')} lower beyond noise).")


CONTRAST_RULE = (
    "How the contrast rule decides: each perturbed point runs at the base's seeds (paired: same initialisation, data "
    "order and masks), and point j's contrast delta_j = point - base is estimated in a seed-blocked linear model with "
    "Student-t errors. FAIL if some point beats the base beyond the Bonferroni t band (or the neighbourhood is better "
    "on average); PASS if n >= n_required, at most half of the points beat the base and the neighbourhood is worse on "
    "average (one-sided t); FLAT if every point is within +-{margin:.0f} % of the base with its simultaneous interval; "
    "INCONCLUSIVE otherwise (including no noise estimate). Measured error rates: docs/verdicts.md.")
"""Section 2's one statement of the contrast rule (the README's docs/verdicts.md has its error rates)."""


def verdict_section(vs: dict) -> list[str]:
    """Section 2: the regret verdict's numbers, the strict test and the contrast rule with their statements, the
    numbers behind the contrast rule, and the rule itself - each said once (the summary gives only the verdicts)."""
    st = vs.get("settings", {})
    split = st.get("loss_split", "val")
    strict = vs.get("strict") or {}
    out = [f"**Regret verdict {vs['verdict'].upper()}** ({split} split): {regret_text(vs)}; tolerance "
           f"{vs.get('regret_tolerance', math.nan):.2%} of the loss (sweep.regret_tolerance): pass when the regret's "
           "upper bound is below it, fail when its lower bound is above it. The surface, per hyperparameter: "
           "verify-transfer/report.md.", "",
           f"**Strict test of [S] §3.1** (n_required = {vs.get('n_required', '?')} at alpha = {st.get('alpha')}, "
           f"p = {st.get('p')}): {strict.get('statement', 'n/a')}", "",
           f"**Contrast rule {str(vs.get('contrast_verdict', 'n/a')).upper()}**: "
           + ("; ".join(vs.get("reasons") or []) or vs.get("contrast_statement", "")).rstrip(".") + ".", ""]
    if "df" in vs:
        base = vs.get("base_losses", [])
        out += [
            f"- Base point: {len(base)} seed(s), {split} loss {', '.join(f'{x:.4f}' for x in base)} "
            f"(mean {vs['base_loss_mean']:.4f}); each of the {vs['n_valid']} finite perturbed points "
            f"({vs['n_failed']} failed) at {st.get('perturbed_seeds', '?')} paired seed(s); design {vs['design']}, "
            f"residual df = {vs['df']}, run-noise sd = {vs['sigma']:.4g}.",
            f"- Neighbourhood - base (average paired contrast): {vs['neighbourhood_delta']:+.4f} +- "
            f"{vs['neighbourhood_se']:.4f} (t = {vs['neighbourhood_t']:+.2f}).",
            f"- {vs['n_better_paired']} of {vs['n_valid']} paired contrasts are negative (equivalence would give "
            f"{vs['count_expected_if_equivalent']:g} on average; P(>= {vs['n_better_paired']} | equivalence) = "
            f"{vs['p_count']:.2f}); beyond the family-wise band (|t| > {vs['t_quantile']:.3g}, test_alpha = "
            f"{vs['test_alpha']}): {vs['n_better_beyond_noise']} lower, {vs['n_worse_beyond_noise']} higher.",
        ]
        if vs.get("transfer_mismatch"):
            out.append(f"- PROCEEDED DESPITE transfer.yaml mismatch: {vs['transfer_mismatch']}")
    return out + ["", CONTRAST_RULE.format(margin=100 * vs.get("margin", 0.01)), ""]


def spreads_text(spreads: dict) -> str:
    """'pt-32 sd 0.0049 (df 1), bert-32 sd 0.2100 (df 1)': each cell's seed spread (``model_spread``)."""
    return ", ".join(f"{m} sd {d['sd']:.4f} (df {d['df']})" if d.get("sd") is not None else f"{m} sd n/a"
                     for m, d in spreads.items()) or "no spreads"


def scaling_section(ss: dict, sres: pd.DataFrame, models: pd.DataFrame) -> list[str]:
    split = ss.get("loss_split", "val")
    t = sres.copy()
    t["interval"] = [f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "" for lo, hi in zip(t["loss_lo"], t["loss_hi"])]
    t["vs unigram"] = [vs_unigram(x, u) for x, u in zip(t["loss"], t["unigram_loss"])]
    sc = models[models["role"] == "scaling"].set_index("name")
    names = [f"{a} N={int(b)}" for a, b in zip(t["series"], t["scale"])]
    t["no_context"] = [sc["no_context"].get(n, math.nan) for n in names]
    t["context gain"] = [gain_text(sc["gain"].get(n), sc["gain_se"].get(n)) if n in sc.index else "" for n in names]
    out = [f"Losses on the **{split}** split (baselines' LRs were chosen on validation), mean over "
           f"{len(ss.get('seeds', []))} seed(s) per point; interval = 95 % t interval with each cell's own seed sd "
           f"(a one-seed cell: its model's, pooled over its scales; {spreads_text(ss.get('seed_spreads', {}))}); "
           f"token SE = "
           f"standard error over the scored masked tokens.", "",
           markdown_table(t, ["series", "scale", "width", "params", "n_seeds", "loss", "interval", "loss_token_se",
                              "unigram_loss", "vs unigram", "no_context", "context gain", "best_lr", "lr_edge",
                              "status"]), ""]
    out += ["Fits (rule: L = a P^-b + c when c is identified - >= 4 sizes, converged, F-test against the pure law "
            "- else L = a P^-b; 95 % intervals from a residual bootstrap over seeds):", ""]
    for key, label in (("fits", "parameters"), ("fits_flops", "training FLOPs")):
        for series, f in ss.get(key, {}).items():
            const = f", c = {f['c']:.3g} {ci_text(f['ci']['c'])}" if f["form"] == "power_law_const" else ""
            out.append(f"- {series} vs {label}: {f['form']}, a = {f['a']:.3g} {ci_text(f['ci']['a'])}, "
                       f"b = {f['b']:.3g} {ci_text(f['ci']['b'])}{const}; {f.get('note') or ''}")
    out += ["", "Differences (PT - baseline, negative = PT better), 95 % Welch interval of the two cells' seed "
                "spreads:", ""]
    for pair, per in ss.get("differences", {}).items():
        for s, d in per.items():
            out.append(f"- {pair} at N = {s}: {d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}] -> "
                       f"{framings.decision_text(d)}")
    out += [""] + framings.report_lines(ss, as_run=False)  # tuning trials per model and the three framings
    return out + [""]  # the every-scale statements and the baselines' edge flags: the summary, once


def write_report(root: Path, dirs: dict[str, Path], wall: dict, cfg) -> Path:
    """<root>/report.md (+ demo_summary.json and the demo figures) from the three study folders."""
    from ptsweep.io import read_json, write_json
    from ptsweep.reports import demo_figures

    t, v, s = dirs["tune-small"], dirs["verify-transfer"], dirs["scaling-curves"]
    ts, vs, ss = read_json(t / "summary.json"), read_json(v / "summary.json"), read_json(s / "summary.json")
    trials = with_context(pd.read_parquet(t / "trials.parquet"), t)
    models = final_models(root)
    rel = lambda p: p.relative_to(root).as_posix()  # noqa: E731
    shared = read_json(root / "shared_runs.json") if (root / "shared_runs.json").exists() else []
    info = {"steps": int(round(cfg.train.tokens / (cfg.train.batch_size * cfg.data.seq_len))),
            "batch": cfg.train.batch_size, "seq_len": cfg.data.seq_len, "vocab": ss.get("vocab_size", "?"),
            "test_blocks": cfg.data.max_test_blocks, "n_shared": len(shared),
            "test_tokens": int(np.nanmedian(trials["test_tokens"])) if trials["test_tokens"].notna().any() else "?",
            "unigram": float(models["unigram"].mean()) if len(models) else math.nan,
            "no_context": float(models["no_context"].mean()) if len(models) else math.nan}
    figs = {"demo_tuning": demo_figures.plot_tuning(trials, root / "demo_tuning.png")}
    if len(models):
        figs["demo_losses"] = demo_figures.plot_losses(models, root / "demo_losses.png")
        figs["demo_context"] = demo_figures.plot_context(models, root / "demo_context.png")
    out = [f"# ptsweep demo report ({time.strftime('%Y-%m-%d %H:%M')})", ""]
    out += first_screen(trials, ts, vs, ss, models, wall, info)
    out += [f"![final models vs baselines]({rel(figs['demo_losses'])})" if "demo_losses" in figs else "", "",
            f"![context gain of every final model]({rel(figs['demo_context'])})" if "demo_context" in figs else "", ""]
    out += tuning_section(trials, ts, t, rel(figs["demo_tuning"]), rel)
    out += ["## 2. verify-transfer (random search around the transferred point, [S] §3.1)", ""]
    out += verdict_section(vs) + verify_table(pd.read_parquet(v / "results.parquet"), vs, models)
    out += _figure_lines(v, ("fig1a_distance", "fig1b_rank"), rel)
    out += ["## 3. scaling-curves (PT transferred vs BERT / UT tuned per scale)", ""]
    out += scaling_section(ss, pd.read_parquet(s / "results.parquet"), models)
    out += _figure_lines(s, ("fig2a_pt_vs_bert", "fig2b_pt_vs_ut", "loss_vs_compute"), rel)
    models = models.assign(vs_unigram=models["loss"] - models["unigram"],
                           vs_no_context=models["loss"] - models["no_context"],
                           context_gain=[gain_text(g, e) for g, e in zip(models["gain"], models["gain_se"])])
    out += ["## 4. Every final model against both baselines (test split)", "",
            table_rows(models, {"role": "role", "name": "model", "width": "PT width", "loss": "test loss",
                                "unigram": "unigram", "vs_unigram": "- unigram", "no_context": "no-context",
                                "vs_no_context": "- no-context", "context_gain": "context gain +- SE",
                                "n_runs": "runs", "shared": "record shared from"}), ""]
    out += trained_study_lines()
    out += further_lines(root, dirs, cfg.tracker.mode, rel)
    path = root / "report.md"
    path.write_text("\n".join(out))
    write_json(root / "demo_summary.json", {
        "wall_s": wall["invocations"], "verdict": vs["verdict"], "strict_verdict": vs.get("strict", {}).get("verdict"),
        "best_tune_loss": ts["best"]["val_loss"], "unigram_test_loss": info["unigram"],
        "no_context_test_loss": info["no_context"], "winners": ss.get("winners", {}),
        "statements": ss.get("statements", {}),
        "final_models": models.drop(columns=["context_gain"]).to_dict(orient="records"),
        "all_learned_context": bool(len(models) and models["learned"].all()),
        "pt_min_context_gain": float(models.loc[models["model"] == "pt", "gain"].min()) if len(models) else None,
        "shared_runs": shared})
    return path


def trained_study_lines() -> list[str]:
    """The trained-budget comparison's claims (preset=trained's results folder), quoted from the repository."""
    from ptsweep.trials import results
    from ptsweep.config import compose
    from ptsweep.reports.study_report import repository_section

    return repository_section(results.folder(compose(["preset=trained"])),
                              "5. The answer at a trained budget (PT vs BERT vs UT vs ModernBERT, preset=trained)")


def _figure_lines(study_dir: Path, names, rel) -> list[str]:
    """A markdown image line per figure of ``names`` the study wrote."""
    return [line for n in names if (study_dir / f"{n}.png").exists()
            for line in (f"![{n}]({rel(study_dir / f'{n}.png')})", "")]


def tuning_section(trials: pd.DataFrame, ts: dict, t: Path, tuning_figure: str, rel) -> list[str]:
    """Section 1: the transferred values, tune-small's trials against both baselines, Optuna's figures, notes."""
    best = ts["best"]
    trials["vs unigram"] = [vs_unigram(x, u) for x, u in zip(trials["val_loss"], trials["unigram_loss"])]
    trials["vs no-context"] = [num(x - n, sign=True) for x, n in zip(trials["val_loss"].astype(float),
                                                                      trials["no_context_loss"].astype(float))]
    trials["context gain"] = [gain_text(g, e) for g, e in zip(trials["context_gain"], trials["context_gain_se"])]
    out = [f"## 1. tune-small (Optuna TPE over the 7 transferable hyperparameters, "
           f"{ts.get('early_stopping', 'ASHA')}, validation split)", "",
           "Transferred values (`transfer.yaml`): "
           + ", ".join(f"`{k}={best['values'][k]:.4g}`" for k in TRANSFER_KEYS),
           "", f"![tune-small trials]({tuning_figure})", "",
           table_rows(trials.sort_values("val_loss"), {
               "trial_id": "trial", **{k: k for k in TRANSFER_KEYS}, "val_loss": "val_loss", "val_loss_se": "+- SE",
               "vs unigram": "vs unigram", "vs no-context": "vs no-context", "context gain": "context gain",
               "status": "status", "steps": "steps"}), ""]
    out += _figure_lines(t, ("optuna_history", "optuna_importances", "optuna_slices"), rel)
    return out + [f"Notes: {'; '.join(ts.get('notes', [])) or 'none'}", ""]


def verify_table(vres: pd.DataFrame, vs: dict, models: pd.DataFrame) -> list[str]:
    """Section 2's table: verify-transfer's rank table with each point's test context gain and its loss against the
    unigram baseline."""
    ver = models[models["role"] == "verification"].set_index("name")
    key = vres["trial"].astype(str).str.split(" ").str[0]
    vres = vres.assign(**{"context gain (test)": [gain_text(ver["gain"].get(k), ver["gain_se"].get(k))
                                                  if k in ver.index else "" for k in key],
                          "vs unigram": [vs_unigram(x, vs.get("unigram_loss")) for x in vres["loss"]]})
    return [markdown_table(vres, ["rank", "trial", "distance", "loss", "delta", "se", "t", "vs unigram",
                                  "context gain (test)", "n_seeds", "rel_increase", "status", "error"]), ""]


def further_lines(root: Path, dirs: dict[str, Path], tracker_mode: str, rel) -> list[str]:
    """Section 6 (Optuna dashboard, W&B sync, resuming) and the list of files."""
    t, s = dirs["tune-small"], dirs["scaling-curves"]
    return ["## 6. Looking further", "",
            f"- Optuna study of tune-small: `pip install optuna-dashboard` (not part of `make setup`), then "
            f"`optuna-dashboard {rel(t / 'optuna.journal')}` (run in `{root}`; a journal file is a storage "
            f"optuna-dashboard opens directly; study name `search`; the baselines' LR searches: "
            f"`{rel(s / 'optuna.journal')}`).",
            f"- W&B (tracker `{tracker_mode}`): every trial's offline run is in `<study>/trials/<trial>/wandb/`; "
            f"upload them and the three sweep summary runs with `wandb sync {root}/*/trials/*/wandb/offline-run-* "
            f"{root}/*/wandb_summary/wandb/offline-run-*` (needs `wandb login` and network).",
            "- Re-running `make demo` resumes: finished trials come from each study's ledger "
            "(`<study>/trials/<key>/final.json`) and only the report is rewritten.", "",
            "## Files", ""] + [f"- `{rel(d)}/`" for d in dirs.values()] + [
        "", "Full settings: each folder's `summary.json`; every trial: `<study>/trials/<key>/` and "
            "`results.jsonl` in the output root.", ""]
