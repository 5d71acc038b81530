"""Measurements and verdict of the muP coordinate check (Yang et al. 2022, "Tensor Programs V", §D / microsoft/mup
``coord_check``) for PT, BERT, UT (experiments/coord-check/README.md, "Method"). For each parametrization, width and
seed, at init and after each training step, every intermediate x (PT per MFVI iteration, BERT / UT per layer) is
measured on one fixed validation batch (softmax inputs centred over their axis):

    value = mean_i |x_t[i]|            (muP: Theta(1) in width)
    delta = mean_i |x_t[i] - x_0[i]|   (muP: Theta(1); SP: grows with width)

Verdict (muP only): every slope of log(size) vs log(width) within [-tol, +tol]; quantities muP makes vanish at init
(:func:`exempt`) are checked one-sidedly.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from ptsweep import data as data_mod
from ptsweep.analysis.fits import coord_slopes
from ptsweep.config import PTConfig, RunConfig, anchor_at, with_overrides
from ptsweep.errors import ConfigError
from ptsweep.models import IGNORE_INDEX, build_model, training_objective
from ptsweep.parametrization import MUP_VARIANTS, build_optimizer, set_lr
from ptsweep.train import lr_factor, resolve_device

GROUPS = ("parametrization", "quantity", "iteration", "step")

EXPECTED_VANISHING = {"output_logits"}
"""Quantities that may shrink with width under muP in every model (checked one-sidedly): W_out ~ N(0, 1/N^2) (PT,
[S] Table 2) and BERT / UT's 1/d readout multiplier give output logits of size N^(-1/2) at init."""

DIAGNOSTICS = {"p_hat_rms", "g_hat_rms"}
"""Recorded and plotted but not part of the verdict: sqrt(mean (a Q)^2), how concentrated Q_z / Q_g are (mean |a Q|
is identically 1 under muP; experiments/coord-check/README.md)."""

EXPECTED_VANISHING_RANK = {"attn_logits"}
"""PT with scaling=rank: <q, v>/r is O(r^(-1/2)) at init (spec §6.4, as in muP Transformers): checked one-sidedly."""


def _stat(name: str, x: torch.Tensor) -> float:
    """The size of x: RMS for the ``*_rms`` diagnostics, else mean |x|."""
    x = x.detach().float()
    return float(x.pow(2).mean().sqrt()) if name.endswith("_rms") else float(x.abs().mean())


def _pt_activations(model, batch: dict) -> dict[tuple[str, int], torch.Tensor]:
    """Every PT intermediate on ``batch`` (eval mode, no grad): {(quantity, iteration): tensor}."""
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    trace: list[dict] = []
    hidden = model.mfvi(ids, mask, trace)  # (B, L, N)
    if model.cfg.head_input == "probs":
        hidden = model.features(torch.softmax(hidden.float(), dim=-1).to(hidden.dtype))
    valid = model.valid_pairs(mask.bool())  # (B, 1, L, L)
    out: dict[tuple[str, int], torch.Tensor] = {}
    for t, rec in enumerate(trace, start=1):
        for name in ("z_logits", "p_hat", "q", "v", "msg_unary", "msg_child", "msg_head", "msg_topic"):
            out[(name, t)] = rec[name]
        topic = rec["topic_logits"]                                         # (B, L, M)
        out[("topic_logits", t)] = (topic - topic.mean(-1, keepdim=True))[mask.bool()]
        attn, keep = rec["attn_logits"], valid.expand_as(rec["attn_logits"])  # (B, C, L, L)
        row_mean = torch.where(keep, attn, 0.0).sum(-1, keepdim=True) / keep.sum(-1, keepdim=True).clamp_min(1)
        out[("attn_logits", t)] = (attn - row_mean).masked_select(keep)
        out[("p_hat_rms", t)] = rec["p_hat"]
        out[("g_hat_rms", t)] = model.const.a_g * rec["q_g"]
    h = hidden[mask.bool()].float()  # (n_tokens, N): every real token (less noisy than the labelled ones only)
    out[("encoder_out", 0)] = h
    out[("head_norm", 0)] = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + model.cfg.rms_eps) * model.head_gain
    out[("output_logits", 0)] = model.head(hidden[labels != IGNORE_INDEX])  # (n, V): where the loss is computed
    return out


def _hf_activations(model, batch: dict) -> dict[tuple[str, int], torch.Tensor]:
    """BERT / UT intermediates via forward hooks on the HF modules; iteration = layer application 1..n_layers."""
    layers = list(model.layers) if hasattr(model, "layers") else [model.layer]
    out: dict[tuple[str, int], torch.Tensor] = {}
    calls = {"n": 0}
    handles = []

    def grab(name: str, per_layer: bool = True):
        def hook(_mod, _inp, output):
            x = output[0] if isinstance(output, tuple) else output
            out[(name, calls["n"] if per_layer else 0)] = x.detach()
        return hook

    def count(_mod, _inp):  # a layer application starts: next iteration index
        calls["n"] += 1

    for layer in layers:
        handles.append(layer.register_forward_pre_hook(count))
        for name, mod in (("attn_context", layer.attention.self), ("attn_out", layer.attention.output.dense),
                          ("ffn_act", layer.intermediate), ("ffn_out", layer.output.dense), ("hidden", layer)):
            handles.append(mod.register_forward_hook(grab(name)))
    handles.append(model.embeddings.register_forward_hook(grab("embeddings", per_layer=False)))
    handles.append(model.head_transform.register_forward_hook(grab("head_transform", per_layer=False)))
    try:
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        hidden = model.encode(ids, mask)  # (B, L, d)
        out[("output_logits", 0)] = model.head(hidden[labels != IGNORE_INDEX])  # (n, V)
    finally:
        for h in handles:
            h.remove()
    return out


@torch.no_grad()
def activations(model, batch: dict) -> dict[tuple[str, int], torch.Tensor]:
    """{(quantity, iteration): tensor} of every measured intermediate of ``model`` on ``batch`` (eval mode)."""
    was_training = model.training
    model.eval()
    try:
        is_pt = isinstance(getattr(model, "cfg", None), PTConfig)
        return _pt_activations(model, batch) if is_pt else _hf_activations(model, batch)
    finally:
        model.train(was_training)


def measure_run(cfg: RunConfig, corpus, steps: int, lr: float, batch_size: int, schedule: str = "constant",
                measure_steps: Sequence[int] = ()) -> list[dict]:
    """Rows {quantity, iteration, step, value, delta} for one (model config, seed) over ``steps`` AdamW steps
    (``schedule`` 'constant': ``lr``, no clipping; 'train': the run's schedule and clipping), measured at init and at
    ``measure_steps`` (empty: every step)."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    oc = cfg.optim
    opt = build_optimizer(model, model.width, model.parametrization, lr, betas=oc.betas, eps=oc.eps,
                          weight_decay=0.0)
    probe = data_mod.val_batches(corpus, cfg.data, batch_size)[0]
    rows: list[dict] = []
    ref: dict[tuple[str, int], torch.Tensor] = {}
    measured = set(measure_steps) if measure_steps else set(range(steps + 1))
    model.train()
    for t in range(steps + 1):
        acts = activations(model, probe) if t == 0 or t == steps or t in measured else {}
        for (name, it), x in acts.items():
            x = x.detach().float()
            ref.setdefault((name, it), x)
            rows.append({"quantity": name, "iteration": it, "step": t, "value": _stat(name, x),
                         "delta": _stat(name, x - ref[(name, it)]) if t > 0 else math.nan})
        if t == steps:
            break
        if schedule == "train":
            set_lr(opt, lr, lr_factor(t, steps, oc.warmup_frac, oc.schedule, oc.min_lr_frac))
        b = data_mod.train_batch(corpus, cfg.data, t, batch_size, cfg.seed)
        loss = training_objective(model, b["input_ids"], b["attention_mask"], b["labels"])[0]  # + PT's lever terms
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if schedule == "train" and oc.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), oc.grad_clip)
        opt.step()
    return rows


def collect(cfg: RunConfig, corpus=None, log=print) -> pd.DataFrame:
    """The coordinate table: one row per (parametrization, width, seed, quantity, iteration, step); ``base_width``:
    PT's N0 in that run ('mup_sp': the anchor, where it is SP)."""
    cc = cfg.sweep.coord_check
    resolve_device("cpu")  # the check runs on the CPU; flush denormals there exactly as training does
    if cfg.train.threads > 0:  # as in training (train.threads); on a loaded machine 1 thread avoids thrashing
        torch.set_num_threads(cfg.train.threads)
    runs = run_configs(cfg)
    corpus = corpus if corpus is not None else data_mod.prepare(cfg.data)
    batch_size = cc.batch_size or cfg.train.batch_size
    frames = []
    for ov, run_cfg in runs:
        t0 = time.perf_counter()
        par, width, seed = ov["model.parametrization"], ov["model.width"], ov["seed"]
        rows = measure_run(run_cfg, corpus, cc.steps, cc.lr, batch_size, cc.schedule, cc.measure_steps)
        frames.append(pd.DataFrame(rows).assign(parametrization=par, width=width, seed=seed,
                                                base_width=getattr(run_cfg.model, "base_width", None)))
        log(f"coord-check {cfg.model.name} {par} width {width} seed {seed}: {time.perf_counter() - t0:.1f}s")
    return pd.concat(frames, ignore_index=True)


def run_configs(cfg: RunConfig) -> list[tuple[dict, RunConfig]]:
    """(overrides, config) of every measured run, all built before the first one runs (a ConfigError names the run)."""
    out = []
    for ov in run_overrides(cfg):
        try:
            out.append((ov, with_overrides(cfg, ov)))
        except ConfigError as e:
            raise ConfigError(f"{e} (coord-check's {ov['model.parametrization']} run at width {ov['model.width']}; "
                              "sweep.coord_check.parametrizations lists the runs)") from None
    return out


def run_overrides(cfg: RunConfig) -> list[dict]:
    """The overrides of every measured run, in :func:`collect`'s order: parametrization x width x seed
    (:func:`seeds_at` seeds per width; 'mup_sp' anchored by :func:`anchor_of`)."""
    cc = cfg.sweep.coord_check
    shape = {"model.scaling": cc.scaling} if cc.scaling and cfg.model.name == "pt" else {}
    anchor = anchor_of(cfg)
    return [{"model.width": int(width), "model.parametrization": par, "seed": cfg.seed + s, **shape,
             **(anchor if par == "mup_sp" else {})}
            for par in cc.parametrizations for width in cc.widths for s in range(seeds_at(cfg, width))]


def checked_scaling(cfg: RunConfig) -> str | None:
    """PT's paradigm in the check: sweep.coord_check.scaling, '' = model.scaling (None for BERT / UT)."""
    return cfg.sweep.coord_check.scaling or getattr(cfg.model, "scaling", None)


def anchor_of(cfg: RunConfig) -> dict:
    """PT's base shape moved to ``coord_check.anchor`` (0: the smallest checked width) under the checked paradigm:
    'mup_sp' is SP there and muP on either side. {} for BERT / UT."""
    cc = cfg.sweep.coord_check
    shape = {"model.scaling": checked_scaling(cfg)} if cfg.model.name == "pt" else {}
    return anchor_at(cfg, cc.anchor or min(cc.widths), shape)


def seeds_at(cfg: RunConfig, width: int) -> int:
    """Seeds measured at ``width``: ``coord_check.seeds``, times C(widest) / C(width) for PT under scaling=channels
    with ``equal_draws`` (each width then averages the same number of independent channels; the config field)."""
    cc = cfg.sweep.coord_check
    if not (cc.equal_draws and cfg.model.name == "pt" and checked_scaling(cfg) == "channels"):
        return cc.seeds
    shape = {"model.scaling": "channels"}
    widest, here = (with_overrides(cfg, {**shape, "model.width": int(w)}).model.channels
                    for w in (max(cc.widths), width))
    return cc.seeds * math.ceil(widest / here)


def slopes(coords: pd.DataFrame) -> pd.DataFrame:
    """Log-log slope vs width of value and delta per (parametrization, quantity, iteration, step); column ``stat``."""
    parts = {"value": coords, "delta": coords[coords["step"] > 0]}
    out = pd.concat({stat: coord_slopes(d, group_cols=GROUPS, value_col=stat) for stat, d in parts.items()},
                    names=["stat", None])
    return out.reset_index(level="stat").reset_index(drop=True)


def exempt(model_name: str, scaling: str | None) -> set[str]:
    """Quantities whose value at t = 0 is allowed to vanish with width under muP (module docstring)."""
    return EXPECTED_VANISHING | (EXPECTED_VANISHING_RANK if model_name == "pt" and scaling == "rank" else set())


def verdict(slope_table: pd.DataFrame, tolerance: float, model_name: str = "pt", scaling: str | None = None,
            quantities: set[str] | None = None, parametrization: str = "mup") -> dict:
    """muP verdict: every checked slope of ``parametrization`` within [-tolerance, +tolerance] (NaN slopes and
    :data:`DIAGNOSTICS` unchecked; ``quantities``: a subset). Quantities in :func:`exempt` are checked one-sidedly at
    every step: their delta inherits the init's N^(-1/2) until the Theta(1) update dominates. Returns {"pass",
    "n_checked", "n_failed", "worst", "failures" (up to 20 rows, worst first), ...}."""
    m = slope_table[(slope_table["parametrization"] == parametrization)
                    & ~slope_table["quantity"].isin(DIAGNOSTICS)]
    if quantities is not None:
        m = m[m["quantity"].isin(quantities)]
    c = m[np.isfinite(m["slope"].astype(float))].copy()
    one_sided = c["quantity"].isin(exempt(model_name, scaling))
    c["excess"] = np.where(one_sided, c["slope"].clip(lower=0.0), c["slope"].abs())
    bad = c[c["excess"] > tolerance].sort_values("excess", ascending=False)
    worst = c.sort_values("excess", ascending=False).head(1)

    def rec(r) -> dict:
        return {"stat": r["stat"], "quantity": r["quantity"], "iteration": int(r["iteration"]),
                "step": int(r["step"]), "slope": float(r["slope"]), "r2": float(r["r2"])}

    return {
        "pass": bool(len(c) > 0 and bad.empty),
        "tolerance": tolerance,
        "n_checked": int(len(c)),
        "n_failed": int(len(bad)),
        "worst": rec(worst.iloc[0]) if len(worst) else None,
        "failures": [rec(r) for _, r in bad.head(20).iterrows()],
        "failed_quantities": sorted(bad["quantity"].unique().tolist()),
        "one_sided_value_check": sorted(exempt(model_name, scaling)),
    }


def sp_summary(slope_table: pd.DataFrame) -> dict:
    """For comparison: SP's largest delta slope per quantity (max over iterations and steps)."""
    s = slope_table[(slope_table["parametrization"] == "sp") & (slope_table["stat"] == "delta")]
    g = s.groupby("quantity")["slope"].max().sort_values(ascending=False)
    return {q: float(v) for q, v in g.items()}


def check_at_init(cfg: RunConfig, widths: tuple[int, ...] = (64, 128, 256)) -> dict:
    """Cheap at-init coordinate check of ``cfg.model`` (tune-small's tuned point): one seed, no optimizer step, its own
    parametrization (muP family only); it does not test the LR rules."""
    par = cfg.model.parametrization
    if par not in MUP_VARIANTS:
        return {"kind": "at-init", "verdict": f"n/a (parametrization {par})"}
    run_cfg = with_overrides(cfg, {"sweep.coord_check.widths": list(widths), "sweep.coord_check.seeds": 1,
                                   "sweep.coord_check.steps": 0, "sweep.coord_check.parametrizations": [par]})
    table = slopes(collect(run_cfg, log=lambda *_: None))
    result = verdict(table, run_cfg.sweep.coord_check.tolerance, cfg.model.name, checked_scaling(run_cfg),
                     parametrization=par)
    return {"kind": f"at-init (0 optimizer steps), widths {list(widths)}, 1 seed, tolerance "
                    f"{run_cfg.sweep.coord_check.tolerance}", "verdict": "pass" if result["pass"] else "fail",
            "n_failed": result["n_failed"], "n_checked": result["n_checked"], "worst": result["worst"]}
