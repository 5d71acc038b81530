"""The run planner: its PT memory model against measured saved-tensor bytes, micro-batch choice, the runs it counts
against each sweep's own list, measured step times, the breakdown by model and stage, the LR edge rule's most runs."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from ptsweep import bench_times, planner, plan_report
from ptsweep.analysis.design import n_required
from ptsweep.cli import main
from ptsweep.config import PTConfig, compose, with_overrides
from ptsweep.models import build_model, mlm_loss
from ptsweep.sweeps import baseline_tuning, lr_transfer_plan, scaling_curves, verify_transfer
from ptsweep.sweeps.transfer import config_point

PRESETS = ("smoke", "demo", "lr_study", "paper", "coord_train")


def _saved_bytes_per_seq(cfg, vocab, length, batches=(1, 3), frac=0.15):
    """Unique storages autograd saves in one forward (saved_tensors_hooks), difference between two batch sizes."""
    out = []
    for bsz in batches:
        torch.manual_seed(0)
        model = build_model(cfg, vocab, length)
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(5, vocab, (bsz, length), generator=g)
        labels = torch.full_like(ids, -100)
        labels[:, : round(frac * length)] = ids[:, : round(frac * length)]
        seen = {}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                seen[st.data_ptr()] = st.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss, _ = mlm_loss(model, ids, torch.ones_like(ids, dtype=torch.bool), labels)
        del loss
        out.append(sum(seen.values()))
    return (out[1] - out[0]) / (batches[1] - batches[0])


@pytest.mark.parametrize("width,length,impl", [(128, 64, "blockwise"), (256, 128, "blockwise"), (128, 32, "dense"),
                                               (256, 128, "auto")])
def test_pt_saved_memory_model_within_15_percent(width, length, impl):
    cfg = PTConfig(width=width, attention_impl=impl)
    vocab = 1000
    measured = _saved_bytes_per_seq(cfg, vocab, length)
    predicted = planner.activation_bytes(cfg, vocab, length, mask_prob=round(0.15 * length) / length)["saved"]
    assert abs(predicted - measured) <= 0.15 * measured, (predicted, measured)


def test_micro_batch_is_the_largest_even_split_that_fits():
    gb = 1e9
    assert planner.micro_batch(256, 0.1 * gb, 10 * gb, 80) == 256          # 25.6 GB of activations fit in 72 - 10
    assert planner.micro_batch(256, 0.5 * gb, 10 * gb, 80) == 86           # 3 micro-batches of <= 86 rows
    assert planner.micro_batch(256, 100 * gb, 10 * gb, 80) == 0            # not even one sequence


def _formula_count(cfg, sweep: str) -> int:
    """Runs of a sweep from its settings, written out independently of the planner and the sweep modules."""
    sw = cfg.sweep
    if sweep == "tune-small":
        return sw.num_samples
    if sweep == "verify-transfer":
        return sw.seeds + max(n_required(sw.alpha, sw.p), sw.n) * (sw.perturbed_seeds or sw.seeds)
    if sweep == "scaling-curves":
        baselines = len([m for m in sw.models if m != "pt"])
        paradigms = (2 if sw.scaling == "both" else 1) if "pt" in sw.models else 0
        search = sw.baseline.samples or sw.num_samples
        return len(sw.scales) * (baselines * (search + sw.seeds) + paradigms * sw.seeds)
    if sweep == "coord-check":
        cc = sw.coord_check
        if not (cc.equal_draws and cfg.model.name == "pt" and (cc.scaling or cfg.model.scaling) == "channels"):
            return len(cc.parametrizations) * len(cc.widths) * cc.seeds
        # equal draws: as many channels at every width as at the widest (C = N C0 / N0 under channels)
        channels = {w: w * cfg.model.base_channels / cfg.model.base_width for w in cc.widths}
        return len(cc.parametrizations) * sum(cc.seeds * math.ceil(max(channels.values()) / c)
                                              for c in channels.values())
    return -1  # lr-transfer: stage 2 depends on stage 1 (checked against the driver's functions below)


@pytest.mark.parametrize("preset", PRESETS)
def test_planner_counts_each_sweeps_own_trial_list(preset):
    cfg = compose([f"preset={preset}"])
    lists = planner.planned(cfg, planner.SWEEPS)
    rows = planner.plan(cfg, planner.SWEEPS)
    for sweep, trials in lists.items():
        counted = sum(r.count for r in rows if r.sweep == sweep)
        assert counted == len(trials) > 0, (sweep, counted, len(trials))
        assert {t.sweep for t in trials} == {sweep}
        if _formula_count(cfg, sweep) >= 0:
            assert counted == _formula_count(cfg, sweep), sweep
    # the drivers' own functions: verify-transfer's plan, lr-transfer's stage 1, scaling-curves' PT finals
    assert [t.label for t in lists["verify-transfer"]] == verify_transfer.plan(cfg, config_point(cfg))[1]
    stage1 = [t for t in lists["lr-transfer"] if t.stage == "search"]
    assert [t.label for t in stage1] == lr_transfer_plan.stage1_trials(cfg)[1]
    pt_finals = [t.label for t in lists["scaling-curves"] if t.model_name == "pt"]
    assert pt_finals == [label for label, _ in scaling_curves.pt_finals(cfg, {})]


def test_paper_counts_written_out():
    """Paper: verify-transfer 3 base seeds + 59 points x 2 paired seeds; scaling-curves 2 baselines x 7 scales x
    (64 search + 3 finals) + PT 7 x 3; lr_study's lr-transfer by hand: stage 1 = 4 widths x (2 x 6 LRs + 6 control)
    + 2 weight widths x 3 weights (the default weight's runs are the LR study's) = 78; stage 2 = 2 more seeds at the 2
    best values of 14 groups (8 LR, 4 control, 2 weight), the weight groups' default value again the LR study's:
    8 x 4 + 4 x 4 + 2 x 2 = 52."""
    paper = {s: sum(r.count for r in rows) for s, rows in _by_sweep(planner.plan(compose(["preset=paper"]))).items()}
    assert paper == {"tune-small": 64, "verify-transfer": 3 + 2 * 59, "scaling-curves": 2 * 7 * (64 + 3) + 7 * 3}
    lr_study = planner.planned(compose(["preset=lr_study"]), ["lr-transfer"])["lr-transfer"]
    assert (sum(t.stage == "search" for t in lr_study), sum(t.stage == "final" for t in lr_study)) == (78, 52)


def _by_sweep(rows):
    out = {}
    for r in rows:
        out.setdefault(r.sweep, []).append(r)
    return out


def test_make_plan_paper_prints_121_verify_runs_and_the_scaling_breakdown(capsys, tmp_path):
    assert main(["plan", "preset=paper", "--bench-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "verify-transfer: 121 runs" in out and "no GPU records in" in out
    assert "scaling-curves: 959 runs, 5,641.5 GPU-hours" in out
    lines = {" ".join(line.split()[:2]): line for line in out.splitlines() if line.startswith("  ")}
    assert lines["ut search"].split()[2:4] == ["448", "runs"] and lines["ut search"].endswith("87.1%")
    assert lines["bert search"].split()[4] == "411.3"  # the "BERT searches are 411 more"


def test_breakdown_hours_are_runs_times_flops_over_peak_mfu():
    """The UT search at scale 3072 (d = 4288), from the sizing module's FLOPs by hand: 64 x 1.4e9 tokens x executed
    FLOPs/token / (989e12 x 0.3) seconds."""
    cfg = compose(["preset=paper"])
    rows = planner.plan(cfg, ["scaling-curves"])
    ut = [r for r in rows if r.model == "ut" and r.width == 4288 and r.stage == "search"]
    assert len(ut) == 1 and ut[0].count == 64 and ut[0].time_source == "MFU 0.3"
    assert ut[0].gpu_hours == pytest.approx(64 * 1.4e9 * ut[0].exec_flops_per_token / (989e12 * 0.3) / 3600)
    parts = plan_report.breakdown(rows)
    assert sum(h for _, h in parts.values()) == pytest.approx(sum(r.gpu_hours for r in rows))
    assert parts[("ut", "search")][0] == 7 * 64 and parts[("pt", "final")][0] == 7 * 3


def test_the_planned_search_trials_train_the_search_budget_at_the_search_seed():
    """A baseline's first search round at any scale: the TPE budget (paper: 64) or one trial per grid LR."""
    cfg = compose(["preset=paper"])
    trials = baseline_tuning.planned_search(cfg, "scaling-curves", "bert", 3072, cfg.model)
    assert len(trials) == 64 and trials[0].label == "hp-bert-w3072-0" and {t.stage for t in trials} == {"search"}
    assert {t.tokens for t in trials} == {cfg.sweep.baseline.search_frac * cfg.train.tokens}
    assert {t.seed for t in trials} == {cfg.seed + cfg.sweep.seeds}  # no reported run trains at it
    grid = with_overrides(cfg, {"sweep.baseline.grid": [1e-4, 3e-4, 1e-3]})
    labels = [t.label for t in baseline_tuning.planned_search(grid, "scaling-curves", "ut", 256, cfg.model)]
    assert labels == ["grid-ut-w256-0", "grid-ut-w256-1", "grid-ut-w256-2"]


def test_scaling_curves_plans_every_scales_search_and_pt_runs_only_with_pt():
    """The plan written out by hand: per baseline, 4 scales x (the grid's 3 LRs + a final per seed); PT's finals only
    when sweep.models has pt."""
    over = ["preset=smoke", "sweep.scales=[64,128,192,256]", "sweep.baseline.grid=[1e-3,3e-3,1e-2]"]
    baselines = scaling_curves.planned_trials(compose([*over, "sweep.models=[bert,ut]"]))
    assert len(baselines) == 2 * 4 * (3 + 1)
    assert [t.label for t in baselines if t.model.name == "bert" and t.scale == 192] == [
        "grid-bert-w192-0", "grid-bert-w192-1", "grid-bert-w192-2", "final-bert-w192-s0"]
    with_pt = scaling_curves.planned_trials(compose([*over, "sweep.models=[pt,bert,ut]"]))
    assert len(with_pt) == len(baselines) + 4 and {t.model.name for t in with_pt[len(baselines):]} == {"pt"}


def test_run_micro_batch_follows_the_setting():
    assert planner.run_micro_batch(0, 256, 86) == 256  # the whole batch, fitting or not
    assert planner.run_micro_batch(64, 256, 86) == 64 and planner.run_micro_batch(512, 256, 86) == 256
    assert planner.run_micro_batch("auto", 256, 86) == 86
    rows = planner.plan(compose(["preset=paper"]), ["scaling-curves"])  # the paper preset's default: auto
    big = [r for r in rows if r.model == "pt" and r.width == 3072]
    assert big[0].micro_batch == big[0].fit_micro_batch >= 1 and big[0].peak_bytes <= 80e9 * planner.MEMORY_FRACTION
    assert all(r.peak_bytes <= 80e9 * planner.MEMORY_FRACTION for r in rows)  # every paper width fits
    rows0 = planner.plan(compose(["preset=paper", "train.micro_batch_size=0"]), ["scaling-curves"])
    big0 = [r for r in rows0 if r.model == "pt" and r.width == 3072][0]
    assert big0.micro_batch == 256 and big0.peak_bytes > 80e9  # the whole batch: over the GPU
    assert plan_report.row_line(big0, 80.0).split()[-4].endswith("!")


def _bench_record(tmp_path: Path) -> Path:
    """A real bench_models.py record (PT, width 128, smoke's shape, one CPU step) written by its own writer, then
    marked as measured on a GPU with a round tokens/s."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    try:
        import bench_models
        from bench_output import write_outputs
    finally:
        sys.path.remove(str(bench))
    args = {"steps": 1, "warmup": 0, "device": "cpu", "width": 128, "vocab": 1000, "batch": 8, "seq_len": 32,
            "layers": 4, "mask_prob": 0.15, "threads": 1, "pt_impl": "auto"}
    cpu = bench_models.bench_one("pt", args)
    out = tmp_path / "bench"
    write_outputs(out / "cpu", "bench", {**args, "device": "cpu"}, [cpu], "cpu")
    gpu = {**cpu, "device": "cuda:0", "device_name": "NVIDIA H200", "tokens_per_s": 1000.0}
    write_outputs(out / "gpu", "bench", {**args, "device": "cuda:0"}, [gpu], "gpu")
    (out / "memory.json").write_text(json.dumps({"meta": {}, "results": [{"model": "pt", "per_seq_mb": 1.0}]}))
    return out


def test_measured_step_times_replace_mfu_where_gpu_and_shape_match(tmp_path, capsys):
    folder = _bench_record(tmp_path)
    records, skipped = bench_times.load(folder)
    assert [(r.device, r.model, r.width, r.batch) for r in records] == [("NVIDIA H200", "pt", 128, 8)]  # CPU: unused
    assert skipped == ["cpu/bench.json", "memory.json"]
    cfg = compose(["preset=smoke"])
    hw = planner.Hardware(device=bench_times.choose_device(records, ""), records=tuple(records))
    rows = {r.sweep: r for r in planner.plan(cfg, ["tune-small", "verify-transfer"], hw)}
    tune, verify = rows["tune-small"], rows["verify-transfer"]  # PT width 64 (not measured) and width 128 (measured)
    assert verify.time_source == "measured NVIDIA H200 B=8" and verify.width == 128
    n_verify = cfg.sweep.seeds + max(n_required(cfg.sweep.alpha, cfg.sweep.p), cfg.sweep.n)
    assert verify.gpu_hours == pytest.approx(n_verify * cfg.train.tokens / 1000.0 / 3600)
    assert tune.time_source == "MFU 0.3" and tune.width == 64
    other_shape = with_overrides(cfg, {"model.n_iters": 2})  # same width, other FLOPs per token: not this record
    assert planner.plan(other_shape, ["verify-transfer"], hw)[0].time_source == "MFU 0.3"
    assert main(["plan", "preset=smoke", "sweep=verify-transfer", "--bench-dir", str(folder), "--device", "h200"]) == 0
    out = capsys.readouterr().out
    assert "measured on NVIDIA H200" in out and "verify-transfer: 2 runs" in out and "measured NVIDIA H200 B=8" in out
    assert main(["plan", "preset=smoke", "--bench-dir", str(folder), "--device", "A100"]) == 2
    assert "--device 'A100': no GPU(s) of the bench records match" in capsys.readouterr().err


def test_unknown_sweep_is_a_one_line_error(capsys):
    assert main(["plan", "--sweep", "nope"]) == 2
    assert "sweep: unknown sweep 'nope'" in capsys.readouterr().err


def test_the_plan_names_the_lr_edge_rule_runs_it_leaves_out():
    """The edge rule's runs are not in the plan's rows (as no widening round is); its line says how many at most and
    their hours: preset=trained (grid of 3 LRs, lr_widen 2, 2 baselines x 2 scales and PT's LR grid) 10 grid trials =
    2/3 of the grids' hours; the paper (64 TPE trials, lr_widen 2 here) 2 x 64 per searched (baseline, scale): twice the
    searches' hours."""
    hw = planner.Hardware(peak_tflops=1e-3)  # hours large enough to compare at one decimal
    trained = compose(["preset=trained"])
    rows = planner.plan(trained, ["scaling-curves"], hw)
    search = [r for r in rows if r.stage == "search"]
    assert sum(r.count for r in search) == 2 * 2 * 3 + 3  # the grids (PT's LR grid at width 32 too), no edge trial
    (line,) = plan_report.edge_lines(trained, hw)
    assert "lr_widen=2" in line and "up to 10 more search runs" in line  # 2 per grid: 4 baseline grids and PT's
    assert f"{sum(r.gpu_hours for r in search) * 2 / 3:,.1f} GPU-hours (2 per searched" in line
    paper = compose(["preset=paper", "sweep.baseline.lr_widen=2"])
    search = [r for r in planner.plan(paper, ["scaling-curves"], hw) if r.stage == "search"]
    (line,) = plan_report.edge_lines(paper, hw)
    assert f"up to {2 * 7 * 2 * 64} more search runs, {2 * sum(r.gpu_hours for r in search):,.1f} GPU-hours" in line
    assert plan_report.edge_lines(with_overrides(paper, {"sweep.baseline.lr_widen": 0}), hw) == []
    pt_grid = with_overrides(paper, {"sweep.transfer_from": "grid", "sweep.transfer_grid": [1e-3, 2e-3, 4e-3]})
    assert f"up to {2 * 7 * 2 * 64 + 2} more search runs" in plan_report.edge_lines(pt_grid, hw)[0]  # PT's: 1 a round


FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gpu-check-fixture.json"
"""A GPU check record with made-up numbers (bench/bench_cluster.py's schema), never under bench/results."""


def test_plan_paper_prices_from_a_gpu_check_record_folder_and_names_it(tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / FIXTURE.name).write_text(FIXTURE.read_text())
    records, skipped = bench_times.load(f"{folder},{tmp_path / 'absent'}")
    assert skipped == [] and {r.trials for r in records} == {1, 2, 4}  # the failed pack of 8 is no record
    hw = planner.Hardware(device=bench_times.choose_device(records, ""), records=tuple(records))
    paper = compose(["preset=paper"])
    rows = {r.sweep: r for r in planner.plan(paper, ["tune-small", "verify-transfer"], hw)}
    tune, verify = rows["tune-small"], rows["verify-transfer"]
    gpu = "FIXTURE GPU (made-up numbers, not a measurement)"
    assert tune.time_source == f"measured {gpu} B=256 x4/GPU"  # paper: four width-256 trials per GPU
    assert tune.gpu_hours == pytest.approx(tune.count * paper.train.tokens / 320000.0 / 3600)  # the 4's aggregate
    assert verify.time_source == f"measured {gpu} B=256" and verify.time_record.endswith(FIXTURE.name)
    assert verify.gpu_hours == pytest.approx(verify.count * paper.train.tokens / 90000.0 / 3600)
    graphs = planner.plan(with_overrides(paper, {"train.compile": "reduce-overhead"}), ["verify-transfer"], hw)[0]
    assert graphs.time_source.endswith("B=256 reduce-overhead")
    assert graphs.gpu_hours == pytest.approx(verify.gpu_hours * 90000.0 / 225000.0)
    eight = planner.plan(with_overrides(paper, {"ray.pack_gpus_per_trial": 0.125}), ["tune-small"], hw)[0]
    assert eight.time_source == f"measured {gpu} B=256"  # no record of 8 per GPU: one trial alone
    assert main(["plan", "preset=paper", "--bench-dir", f"{folder},{tmp_path / 'absent'}"]) == 0
    out = capsys.readouterr().out
    assert f"measured on {gpu}" in out and f"{folder}/{FIXTURE.name} (" in out
    assert "GPU-hours from measured step times where a record matches (else the assumed MFU)" in out
    assert main(["plan", "preset=paper", "--bench-dir", str(tmp_path / "absent")]) == 0
    assert "GPU-hours: every line at the assumed MFU" in capsys.readouterr().out


def test_the_committed_gpu_records_folder_holds_no_fixture():
    """bench/results holds real GPU check records only: a made-up or dry record there would price real plans (the
    files with step-time rows; a compile-parity file has none)."""
    results = Path(__file__).resolve().parents[1] / "bench" / "results"
    docs = [d for f in sorted(results.glob("*.json")) if "results" in (d := json.loads(f.read_text()))]
    assert docs, "no GPU check record in bench/results"
    assert not [d["meta"] for d in docs if d["meta"].get("fixture") or d["meta"].get("dry")
                or "fixture" in str(d["meta"].get("device_name", "")).lower()]
