"""demo (``make demo``): tune-small -> verify-transfer -> scaling-curves chained at toy scale in one Ray session, each
in ``<out_dir>/demo/<sweep>/``, then ``<out_dir>/demo/report.md``; a run identical to an earlier stage's is reused
(``share_runs``).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from ptsweep.trials import results
from ptsweep.config import RunConfig, to_dict, with_overrides
from ptsweep.sweeps import scaling_curves, tune_small, verify_transfer
from ptsweep.reports.demo_report import write_report
from ptsweep.identity import trial_key
from ptsweep.io import append_line, write_json
from ptsweep.trials.ledger import read_ledger, trial_dir
from ptsweep.reports.outputs import study_name, study_path
from ptsweep.trials.ray_session import ray_session
from ptsweep.sweeps.transfer import read_transfer

STAGES = (("tune-small", tune_small), ("verify-transfer", verify_transfer), ("scaling-curves", scaling_curves))


def demo_config(cfg: RunConfig) -> RunConfig:
    """PT under the one paradigm ``sweep.scaling`` at the smallest of ``sweep.scales`` (so tune-small's best trial is
    also PT's scaling point there; 'mup_sp' anchored there too); unchanged under ``sweep.scaling=both``."""
    sweep_cfg = cfg.sweep
    if cfg.model.name != "pt" or sweep_cfg.scaling not in ("channels", "rank"):
        return cfg
    cfg = with_overrides(cfg, {"model.scaling": sweep_cfg.scaling, "model.width": min(sweep_cfg.scales)})
    return with_overrides(cfg, cfg.model.anchor_overrides()) if cfg.model.parametrization == "mup_sp" else cfg


def planned_pt_finals(cfg: RunConfig) -> dict[str, str]:
    """{trial key: label} of scaling-curves' PT runs (``scaling_curves.pt_finals``)."""
    if "pt" not in cfg.sweep.models:
        return {}
    base = to_dict(cfg)
    return {trial_key(base, over, label): label
            for label, over in scaling_curves.pt_finals(cfg, read_transfer(cfg)[0])}


def share_runs(root: Path, dst_stage: str, planned: dict[str, str]) -> list[dict]:
    """A planned trial of ``dst_stage`` whose config digest (the trial key after its label) is a finished run (status
    ok) of an earlier stage gets that run's ledger record (with ``shared_from``) and its learning curve
    (``history.jsonl``) instead of training again. Returns one {trial_key, label, from} per shared record."""
    index = {}
    for stage in ("tune-small", "verify-transfer"):
        done = results.ledger_records(root / stage)
        for key in done.loc[done["status"] == "ok", "trial_key"] if len(done) else ():
            index.setdefault(key.rsplit("-", 1)[-1], (stage, key))
    shared = []
    for key, label in planned.items():
        hit = index.get(key.rsplit("-", 1)[-1])
        if hit is None or read_ledger(root / dst_stage, key) is not None:
            continue
        stage, src_key = hit
        src, dst = trial_dir(root / stage, src_key), trial_dir(root / dst_stage, key)
        if (src / "history.jsonl").is_file():  # the same config's in-loop evaluations: the run's learning curve
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / "history.jsonl", dst / "history.jsonl")
        write_json(dst / "final.json",
                   {**read_ledger(root / stage, src_key), "trial_key": key, "label": label,
                    "shared_from": f"{stage}/{src_key}"})
        shared.append({"trial_key": key, "label": label, "from": f"{stage}/{src_key}"})
    return shared


def run(cfg: RunConfig) -> Path:
    """Chain tune-small -> verify-transfer -> scaling-curves in ``<out_dir>/<sweep.study or demo>/``; write
    report.md; return that folder."""
    cfg = demo_config(cfg)
    root_name, root = study_name(cfg, "demo"), study_path(cfg, "demo")
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
    append_line(log, json.dumps({"finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **wall}))
    invocations = [{k: v for k, v in json.loads(line).items() if k != "finished_at"}
                   for line in log.read_text().splitlines() if line.strip()]
    if shared:
        write_json(root / "shared_runs.json", shared)
    path = write_report(root, dirs, {**wall, "invocations": invocations}, cfg)
    print(f"demo: report in {path} ({wall['total'] / 60:.1f} min)")
    return root
