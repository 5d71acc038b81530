"""demo: the three sweeps chained at toy scale (``make demo`` = ``python -m ptsweep demo preset=demo``).

    1. tune-small        -> <out_dir>/demo/tune-small        (transfer.yaml, trials, Optuna plots)
    2. verify-transfer   -> <out_dir>/demo/verify-transfer   (reads 1's transfer.yaml; Figure 1)
    3. scaling-curves    -> <out_dir>/demo/scaling-curves    (reads 1's transfer.yaml; Figure 2)
    report               -> <out_dir>/demo/report.md         (tables, headline numbers, plots as relative links)

PT: the paradigm ``sweep.scaling`` everywhere, tuned at the smallest of ``sweep.scales`` (``demo_config``). One run
serves two sweeps where the configurations are identical (``share_runs``: the verification base point and
tune-small's best trial are PT scaling points). One Ray session serves the three sweeps. Each stage resumes like the sweep itself (ledger / Tuner.restore), so
re-running an interrupted demo continues where it stopped. ``sweep.study`` (default "demo") names the folder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ptsweep.config import RunConfig, to_dict, with_overrides
from ptsweep.sweeps import scaling_curves, tune_small, verify_transfer
from ptsweep.sweeps.demo_report import write_report
from ptsweep.identity import trial_key
from ptsweep.io import write_json
from ptsweep.sweeps.ledger import read_ledger, trial_dir
from ptsweep.sweeps.outputs import study_path
from ptsweep.sweeps.ray_session import ray_session
from ptsweep.sweeps.transfer import read_transfer

STAGES = (("tune-small", tune_small), ("verify-transfer", verify_transfer), ("scaling-curves", scaling_curves))


def demo_config(cfg: RunConfig) -> RunConfig:
    """The demo trains PT under one paradigm, ``sweep.scaling``, and tunes it at the smallest of ``sweep.scales``
    (so tune-small's best trial is also PT's scaling point there): ``model.scaling`` and ``model.width`` follow. The
    preset cannot set them itself (``model.scaling`` does not exist for BERT / UT, and width 32 is no PT shape under
    the default channels paradigm). Under 'mup_sp' the base shape moves to that width too
    (``PTConfig.anchor_overrides``: the same shapes at every width, SP at the tuning width). With
    ``sweep.scaling=both`` the config is left as it is."""
    sweep_cfg = cfg.sweep
    if cfg.model.name != "pt" or sweep_cfg.scaling not in ("channels", "rank"):
        return cfg
    cfg = with_overrides(cfg, {"model.scaling": sweep_cfg.scaling, "model.width": min(sweep_cfg.scales)})
    return with_overrides(cfg, cfg.model.anchor_overrides()) if cfg.model.parametrization == "mup_sp" else cfg


def planned_pt_finals(cfg: RunConfig) -> dict[str, str]:
    """{trial key: label} of scaling-curves' PT runs (the keys ``scaling_curves.run`` computes: label
    ``final-pt-<scaling>-w<width>-s<i>``, overrides = the 7 transferred values + width, scaling, seed)."""
    sweep_cfg = cfg.sweep
    if "pt" not in sweep_cfg.models:
        return {}
    transferred, _, _ = read_transfer(cfg)
    base = to_dict(cfg)
    out = {}
    for sc in (["channels", "rank"] if sweep_cfg.scaling == "both" else [sweep_cfg.scaling]):
        for s in sweep_cfg.scales:
            for i in range(sweep_cfg.seeds):
                label = f"final-pt-{sc}-w{s}-s{i}"
                overrides = {**transferred, "model.width": s, "model.scaling": sc, "seed": cfg.seed + i}
                out[trial_key(base, overrides, label)] = label
    return out


def share_runs(root: Path, dst_stage: str, planned: dict[str, str], sources=("tune-small", "verify-transfer")) \
        -> list[dict]:
    """One run serving two sweeps: a planned trial of ``dst_stage`` whose configuration is identical to a finished
    run (status ok) of an earlier stage - same config digest, the part of the trial key after the label, which
    leaves out only bookkeeping keys - gets that run's ledger record instead of training again (e.g. the
    verification base point at width 2N and seeds 0, 1 IS PT's scaling point at 2N; tune-small's best trial IS PT's
    scaling point at the tuning width, seed 0). The copied record says where it came from (``shared_from``)."""
    index = {}
    for stage in sources:
        for rec_path in sorted((root / stage / "trials").glob("*/final.json")):
            key = rec_path.parent.name
            rec = read_ledger(root / stage, key)
            if rec and rec.get("status") == "ok" and "trial_key" in rec:
                index.setdefault(key.rsplit("-", 1)[-1], (stage, key, rec))
    shared = []
    for key, label in planned.items():
        hit = index.get(key.rsplit("-", 1)[-1])
        if hit is None or read_ledger(root / dst_stage, key) is not None:
            continue
        stage, src_key, rec = hit
        write_json(trial_dir(root / dst_stage, key) / "final.json",
                   {**rec, "trial_key": key, "label": label, "shared_from": f"{stage}/{src_key}"})
        shared.append({"trial_key": key, "label": label, "from": f"{stage}/{src_key}"})
    return shared


def run(cfg: RunConfig) -> Path:
    """Chain tune-small -> verify-transfer -> scaling-curves in ``<out_dir>/<sweep.study or demo>/``; write
    report.md; return that folder."""
    cfg = demo_config(cfg)
    root_name = cfg.sweep.study or "demo"
    root = study_path(cfg, "demo") if cfg.sweep.study else (Path(cfg.out_dir) / root_name).resolve()
    root.mkdir(parents=True, exist_ok=True)
    transfer = root / "tune-small" / "transfer.yaml"
    dirs, wall, shared = {}, {}, []
    t_all = time.time()
    with ray_session(cfg.ray):
        for stage, module in STAGES:
            t0 = time.time()
            over = {"sweep.study": f"{root_name}/{stage}"}
            if stage != "tune-small":
                over["sweep.transfer_file"] = str(transfer)
            scfg = with_overrides(cfg, over)
            print(f"=== demo: {stage} ===", flush=True)
            if stage == "scaling-curves":
                shared = share_runs(root, stage, planned_pt_finals(scfg))
                for s in shared:
                    print(f"[demo] {s['label']}: identical to {s['from']} (finished): its record is reused, "
                          f"not trained again", file=sys.stderr, flush=True)
            dirs[stage] = module.run(scfg)
            wall[stage] = time.time() - t0
    wall["total"] = time.time() - t_all
    log = root / "timings.jsonl"
    with log.open("a") as f:
        f.write(json.dumps({"finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **wall}) + "\n")
    invocations = [{k: v for k, v in json.loads(line).items() if k != "finished_at"}
                   for line in log.read_text().splitlines() if line.strip()]
    if shared:
        write_json(root / "shared_runs.json", shared)
    path = write_report(root, dirs, {**wall, "invocations": invocations}, cfg)
    print(f"demo: report in {path} ({wall['total'] / 60:.1f} min)")
    return root
