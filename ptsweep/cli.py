"""Command line: ``python -m ptsweep <command> [hydra overrides]``: subcommands -> ``config.compose`` -> dispatch.

Commands: size, train, plan (:mod:`ptsweep.planner`) and the sweeps of the :data:`SWEEPS` table. Errors a user can
fix (a bad override, an unknown key, an impossible value, a missing corpus, a missing sweep module) print ONE line
``error: <message naming the key>`` to stderr and exit with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shlex
import signal
import sys
import threading

from ptsweep.config import RunConfig, compose, to_dict
from ptsweep.config.composition import one_line
from ptsweep.errors import ConfigError, DataError, TrackerError

# command -> (module exposing ``run(cfg: RunConfig) -> Path``, one-line help). Explicit table, imported lazily.
SWEEPS: dict[str, tuple[str, str]] = {
    "tune-small": ("ptsweep.sweeps.tune_small",
                   "Optuna (via Ray Tune) study of the 7 transferable HPs at the base width"),
    "verify-transfer": ("ptsweep.sweeps.verify_transfer",
                        "random-search check that the transferred config is top-p at sweep.width"),
    "scaling-curves": ("ptsweep.sweeps.scaling_curves",
                       "PT vs BERT vs UT loss over sweep.scales at matched parameter counts"),
    "coord-check": ("ptsweep.sweeps.coord_check",
                    "muP coordinate check (activation scales across widths) with a verdict"),
    "lr-transfer": ("ptsweep.sweeps.lr_transfer", "optimal LR across widths, muP vs SP"),
    "lr-horizon": ("ptsweep.sweeps.lr_horizon", "optimal LR across training budgets at the tuning width, eta*(T) fit"),
    "demo": ("ptsweep.sweeps.demo", "toy-scale chain of the three sweeps -> <out_dir>/demo/report.md"),
}


class CLIError(Exception):
    """A user-fixable problem: reported as one line, exit status 2."""


USER_ERRORS = (CLIError, ConfigError, DataError, TrackerError)
"""Exception types that are the user's to fix (printed as one line)."""


def _fmt_count(n: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(int(n))


def cmd_size(cfg: RunConfig, vocab: int | None, table: bool = False) -> int:
    """Print the model's shape, parameter counts and training FLOPs/token (no data loading), or with ``table`` the
    sizing table."""
    from ptsweep.models.sizing import describe

    V = vocab or cfg.data.vocab_size
    if table:
        return _size_table(cfg, V)
    info = describe(cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob)
    m = cfg.model
    if m.name == "pt":
        shape = (f"PT  N={m.width} C={m.channels} r={m.rank} M={m.topics} K={m.n_classes} T={m.n_iters} "
                 f"scaling={m.scaling} parametrization={m.parametrization}")
    else:
        shape = (f"{m.name.upper():<3} d={info['width']} heads={info['n_heads']} layers={info['n_layers']} "
                 f"d_ff={info['d_ff']} parametrization={m.parametrization}")
    print(shape)
    print(f"vocab V={V}  seq_len={cfg.data.seq_len}")
    print(f"params {_fmt_count(info['params'])} ({info['params']:,})  "
          f"non-embedding {_fmt_count(info['non_embedding_params'])} ({info['non_embedding_params']:,})")
    print(f"train FLOPs/token {info['flops_per_token']:.4g}")
    return 0


def _size_table(cfg: RunConfig, V: int) -> int:
    """Markdown sizing table (docs/baselines.md, "Baseline shapes"): PT at sweep.scales and every baseline family
    matched by sweep.match (``models.sizing.match_shape``)."""
    from ptsweep.models.sizing import SCHEMAS, sizing_table

    if cfg.model.name != "pt":
        raise CLIError(f"model.name: size --table starts from the PT config (model=pt), got {cfg.model.name}")
    sweep_cfg, d = cfg.sweep, cfg.data
    rows = sizing_table(cfg.model, sweep_cfg.scales, V, d.seq_len, d.mask_prob, sweep_cfg.match,
                        models=("pt", *SCHEMAS))
    print(f"sizing table: V={V} seq_len={d.seq_len} mask_prob={d.mask_prob} PT scaling={cfg.model.scaling} "
          f"match={sweep_cfg.match} (PT shape: N, C heads, T iterations; baselines: d, heads of 64, layers/steps)")
    print("| PT N | model | d | heads | layers | d/layers | params | non-emb. params | train FLOPs/token | "
          f"{sweep_cfg.match} / PT's |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['scale']} | {r['model']} | {r['error']} |")
            continue
        print(f"| {r['scale']} | {r['model'].upper()} | {r['width']} | {r['n_heads']} | {r['n_layers']} | "
              f"{'-' if r['model'] == 'pt' else round(r['width'] / r['n_layers'])} | {_fmt_count(r['params'])} | "
              f"{_fmt_count(r['non_embedding_params'])} | {_fmt_count(r['flops_per_token'])} | "
              f"{r['match_ratio']:.3f} |")
    return 0


def _summary(metrics: dict) -> str:
    """Final metrics as one JSON line (floats to 6 significant digits, inf/nan as strings; no history)."""
    def fmt(v):
        if isinstance(v, float):
            return float(f"{v:.6g}") if math.isfinite(v) else str(v)
        return v

    return json.dumps({k: fmt(v) for k, v in metrics.items() if k not in ("history", "run_dir")}, default=str)


def cmd_plan(args) -> int:
    """Print the run plan (``ptsweep.planner``) of the sweeps that ``sweep=<name>[,<name>]`` tokens and --sweep
    select (other tokens stay Hydra overrides)."""
    from ptsweep import bench_times, planner, plan_report

    names, rest = [], []
    for tok in args.overrides:
        key, _, value = tok.partition("=")
        if key == "sweep" and value and all(v in planner.SWEEPS for v in value.split(",")):
            names += value.split(",")
        else:
            rest.append(tok)
    if args.sweep:
        names += args.sweep.split(",")
    bad = [n for n in names if n not in planner.SWEEPS]
    if bad:
        raise CLIError(f"sweep: unknown sweep {bad[0]!r} (choose from {', '.join(planner.SWEEPS)})")
    cfg = compose(rest)
    try:
        records, skipped = bench_times.load(args.bench_dir)
        device = bench_times.choose_device(records, args.device)
    except ValueError as e:
        raise CLIError(str(e)) from e
    hw = planner.Hardware(args.gpu_mem, args.peak_tflops, args.mfu, device, tuple(records))
    note = (f"step times: measured on {device} where a record of {args.bench_dir} matches the shape "
            f"({len([r for r in records if r.device == device])} records), else MFU {args.mfu:g}" if device else
            f"step times: no GPU records in {args.bench_dir} (bench/bench_models.py --device cuda writes them): "
            f"every line at MFU {args.mfu:g}") + (f"; {len(skipped)} other JSON file(s) there hold no step times"
                                                  if skipped else "")
    rows = planner.plan(cfg, names or list(planner.DEFAULT_SWEEPS), hw)
    print(plan_report.format_plan(rows, cfg, hw, note))
    return 0


def cmd_train(cfg: RunConfig) -> int:
    """Compose -> tracker -> ``train.run`` -> one-line summary + the run folder."""
    from ptsweep import train
    from ptsweep.metrics import format_loss
    from ptsweep.tracking import make_tracker

    metrics = train.run(cfg, make_tracker(cfg.tracker))
    print(_summary(metrics))
    stale = metrics.get("status") == "stopped" and metrics.get("val_step", metrics.get("steps")) != metrics.get("steps")
    when = f" (last evaluation, at step {metrics['val_step']} of {metrics['steps']})" if stale else ""
    print(f"validation{when}: {format_loss(metrics)}")
    if "test_loss" in metrics:
        print(f"test: {format_loss(metrics, prefix='test_')}")
    print(f"run dir: {metrics.get('run_dir', '')}")
    return 0 if metrics.get("status") in ("ok", "stopped") else 1


def _widths(command: str, cfg: RunConfig) -> str:
    """The width(s) ``command`` trains PT (or ``model.name``) at, in words."""
    sw, m = cfg.sweep, cfg.model
    others = " and ".join(x.upper() for x in sw.models if x != "pt")
    scaling = f" ({m.scaling} scaling)" if m.name == "pt" else ""
    return {"tune-small": f"{m.name.upper()} tuning width {m.width}{scaling}",
            "verify-transfer": f"PT width {sw.width} (the transferred point is checked there)",
            "scaling-curves": f"PT widths {sw.scales} ({sw.scaling} scaling)" + (f" beside {others}" if others else ""),
            "coord-check": f"{m.name.upper()} widths {sw.coord_check.widths}",
            "lr-transfer": f"PT widths {sw.lr_transfer.widths} ({sw.lr_transfer.scaling} scaling)",
            "lr-horizon": f"PT width {sw.lr_horizon.width or m.width}"
                          + (f" (mup_sp anchored at {sw.lr_horizon.anchor})" if sw.lr_horizon.anchor else "")
                          + (f" beside its matched {sw.lr_horizon.baseline.upper()}" if sw.lr_horizon.baseline else ""),
            "demo": f"PT widths {sw.scales} ({sw.scaling} scaling), tuned at {min(sw.scales)}"}[command]


def _steps(command: str, cfg: RunConfig) -> int | str:
    """Optimizer steps of each run of ``command`` (coord-check: the steps it measures; lr-horizon: its budgets)."""
    if command == "coord-check":
        return cfg.sweep.coord_check.steps
    if command == "lr-horizon":
        return " / ".join(str(t) for t in sorted(cfg.sweep.lr_horizon.steps))
    tokens = (cfg.sweep.lr_transfer.tokens if command == "lr-transfer" else 0) or cfg.train.tokens
    return round(tokens / (cfg.train.batch_size * cfg.data.seq_len))


def start_line(command: str, cfg: RunConfig) -> str:
    """The first line every sweep prints: the preset, the data and the width(s), so that a run at toy scale is
    never silent; under the demo preset it says how to get the paper's setting."""
    d = cfg.data
    line = (f"{command}: preset {cfg.preset}, data {d.label} (tokenizer {d.tokenizer}, V = {d.vocab_size}, blocks of "
            f"{d.seq_len}), {_widths(command, cfg)}, {_steps(command, cfg)} steps per run")
    if cfg.preset == "demo":
        line += ("; the demo preset trains on the embedded Shakespeare plays at toy budget, not on [S]'s MiniPile "
                 "(PRESET=paper with make, preset=paper with python -m ptsweep)")
    return line


def cmd_sweep(command: str, cfg: RunConfig) -> int:
    """Print :func:`start_line`, import ``ptsweep.sweeps.<module>`` lazily and call its ``run(cfg) -> Path``."""
    print(start_line(command, cfg), flush=True)
    module_name, _ = SWEEPS[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise CLIError(f"command {command!r} is not available: module {module_name} is missing") from e
        raise
    out = module.run(cfg)
    print(f"{command}: results in {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ptsweep",
        description="PT + muP hyperparameter-transfer experiments. Any config key can be overridden Hydra-style: "
                    "model.width=512 optim.lr=3e-3 preset=smoke|demo|paper model=pt|bert|ut "
                    "tracker=offline|online|disabled",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model.width=512 preset=smoke")
        p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
        p.add_argument("--cfg", nargs="?", const="job", choices=["job"], default=None,
                       help="print the composed, validated config (YAML) and exit")
        return p

    size = add("size", "print model shape, parameter counts and FLOPs/token (no data loading)")
    size.add_argument("--vocab", type=int, default=None, help="vocabulary size (default: data.vocab_size)")
    size.add_argument("--table", action="store_true",
                      help="sizing table: PT at every sweep.scales width and the BERT / UT matched by sweep.match")
    add("train", "one training run; prints final metrics and the run folder")
    plan = add("plan", "per sweep trial: params, FLOPs/token, predicted memory, micro-batch and GPU-hours")
    plan.add_argument("--sweep", default="", help="comma-separated sweeps (default: tune-small,verify-transfer,"
                                                  "scaling-curves; also lr-transfer, coord-check); also sweep=<name>")
    plan.add_argument("--gpu-mem", type=float, default=80.0, help="GPU memory in GB (default 80)")
    plan.add_argument("--peak-tflops", type=float, default=989.0, help="peak TFLOP/s (default: H100 SXM bf16 dense)")
    plan.add_argument("--mfu", type=float, default=0.3, help="assumed model FLOPs utilisation (default 0.3)")
    plan.add_argument("--bench-dir", default="runs/bench", help="bench_models.py records (*.json, searched "
                      "recursively) whose GPU step times replace the MFU estimate where the shape matches")
    plan.add_argument("--device", default="", help="the GPU of the bench records to use, part of its name (e.g. "
                      "H200; default: the only GPU the records have)")
    for name, (_, help_text) in SWEEPS.items():
        add(name, help_text)
    report = sub.add_parser("report", help="re-render a study's report.md and figures from its results folder "
                                           "(no training)")
    report.add_argument("study", help="the results folder, e.g. experiments/scaling/results/scaling-trained")
    report.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    return parser


def _resume_command(argv: list[str] | None) -> str:
    """The command line that repeats (and so resumes) this one."""
    return " ".join(shlex.quote(a) for a in ["python", "-m", "ptsweep", *(argv if argv is not None else sys.argv[1:])])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from ptsweep.trials.ray_session import RESUME, install_sigterm_handler, stop_line

    RESUME["command"] = _resume_command(argv) if args.command in SWEEPS else ""
    RESUME["kept"] = "finished trials are kept" if args.command in SWEEPS else ""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    install_sigterm_handler()  # SIGTERM: one line + the resume command, exit 143 (trials.ray_session docstring)
    try:
        return _dispatch(args, stop_line)
    finally:  # a caller that runs main() in-process (tests, notebooks) gets its own handler back
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _dispatch(args, stop_line) -> int:
    """Run the parsed command; user errors -> one line, status 2; Ctrl-C -> the stop line, status 130."""
    try:
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "report":
            from ptsweep.io import resolve_path
            from ptsweep.reports.study_report import render

            return 0 if render(resolve_path(args.study)) else 1
        cfg = compose(args.overrides)
        if args.cfg:
            import yaml

            print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
            return 0
        from ptsweep.tracking import OVERRIDES_ENV

        os.environ[OVERRIDES_ENV] = json.dumps(list(args.overrides))  # saved as .hydra/overrides.yaml by each run
        if args.command == "size":
            return cmd_size(cfg, args.vocab, args.table)
        if args.command == "train":
            return cmd_train(cfg)
        return cmd_sweep(args.command, cfg)
    except USER_ERRORS as e:
        if args.debug:
            raise
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (SweepInterrupted after a clean Tune stop, or Python's own anywhere else)
        print(stop_line(signal.SIGINT), file=sys.stderr, flush=True)
        return 130
