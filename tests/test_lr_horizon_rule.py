"""The horizon rule where transfer.yaml is read (verify-transfer, scaling-curves): at another budget it applies the
power rule and says so, or refuses naming the risk; bad rule input is a one-line error. No Ray: verify-transfer is
stopped right after it has read transfer.yaml."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from ptsweep import cli
from ptsweep.config import TRANSFER_KEYS
from ptsweep.errors import SweepError
from ptsweep.sweeps import verify_transfer
from ptsweep.sweeps.transfer import read_transfer, transfer_settings

RISK = "an LR tuned at a short budget can collapse a long run"
LONG = "train.tokens=16384"  # 64 steps of 8 x 32; the smoke preset (and transfer.yaml) has 16


@pytest.fixture
def tfile(tmp_path) -> Path:
    """transfer.yaml tuned under the smoke preset (16 steps), optim.lr 0.02."""
    cfg = cli.compose(["preset=smoke"])
    doc = {"values": {k: (0.02 if k == "optim.lr" else 1.0) for k in TRANSFER_KEYS},
           "provenance": {"study": "t", "settings": transfer_settings(cfg)}}
    path = tmp_path / "transfer.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _results(tmp_path, name="pt", parametrization="mup_sp", steps=(4, 16, 64), beta=0.5, beta_range=(0.3, 0.7),
             variants=(), **doc) -> Path:
    """A horizon.json whose grid optima and seed optima both fit ``beta``."""
    path = tmp_path / "horizon.json"
    chosen = {"variants": list(variants)} if variants else {}
    path.write_text(json.dumps({"sweep": "lr-horizon", "data": "shakespeare", **doc, "fits": {name: {
        "model": {"name": name, "parametrization": parametrization, "width": 64, **chosen}, "steps": list(steps),
        "beta": beta, "beta_seeds": beta, "beta_range": list(beta_range) if beta_range else None}}}))
    return path


def _verify(monkeypatch, capsys, tfile, *over):
    """``python -m ptsweep verify-transfer`` in-process, stopped (status 2) once transfer.yaml has been read."""
    def stop(cfg, default):
        raise SweepError("stopped here by the test, before any trial")
    monkeypatch.setattr(verify_transfer, "open_study", stop)
    rc = cli.main(["verify-transfer", "preset=smoke", f"sweep.transfer_file={tfile}", f"out_dir={tfile.parent}",
                   *over])
    return rc, capsys.readouterr()


def test_verify_transfer_at_another_budget_prints_the_applied_rule(monkeypatch, capsys, tfile):
    rc, out = _verify(monkeypatch, capsys, tfile, LONG, "sweep.horizon.rule=power", "sweep.horizon.beta=0.5")
    assert rc == 2 and "stopped here by the test" in out.err  # it got past transfer.yaml
    line = next(ln for ln in out.out.splitlines() if ln.startswith("horizon rule"))
    assert "optim.lr 0.02 tuned at 16 steps -> 0.01 at 64 steps" in line and "sweep.horizon.beta" in line


def test_verify_transfer_refuses_another_budget_naming_the_risk_with_the_rule_off(monkeypatch, capsys, tfile):
    rc, out = _verify(monkeypatch, capsys, tfile, LONG)
    assert rc == 2 and "stopped here" not in out.err
    err = out.err.strip()
    assert "\n" not in err and "train.tokens" in err and RISK in err and "sweep.horizon.rule=power" in err
    assert "allow_transfer_mismatch" in err


def test_the_rule_takes_the_budget_out_of_the_mismatch_and_scales_the_lr(tfile, capsys):
    values, prov, _ = read_transfer(cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG,
                                                 "sweep.horizon.rule=power", "sweep.horizon.beta=0.5"]))
    assert values["optim.lr"] == pytest.approx(0.01) and prov["mismatch"] == {}
    assert prov["horizon"]["lr_tuned"] == 0.02 and prov["horizon"]["target_steps"] == 64
    assert values["model.w_attn"] == 1.0  # only the LR moves
    capsys.readouterr()
    # at the tuned budget the rule changes nothing and says nothing
    values, prov, _ = read_transfer(cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}",
                                                 "sweep.horizon.rule=power", "sweep.horizon.beta=0.5"]))
    assert values["optim.lr"] == 0.02 and "horizon" not in prov and "horizon rule" not in capsys.readouterr().out


def test_the_mismatch_override_with_the_rule_off_keeps_the_lr_and_names_the_risk(tfile, capsys):
    values, prov, _ = read_transfer(cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG,
                                                 "sweep.allow_transfer_mismatch=true"]))
    out = capsys.readouterr().out
    assert values["optim.lr"] == 0.02 and "train.tokens" in prov["mismatch"]
    assert "horizon rule off" in out and RISK in out


def test_beta_from_an_lr_horizon_results_file(tmp_path, tfile, capsys):
    res = _results(tmp_path)
    values, prov, _ = read_transfer(cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG,
                                                 "sweep.horizon.rule=power", f"sweep.horizon.results={res}"]))
    out = capsys.readouterr().out
    assert values["optim.lr"] == pytest.approx(0.01) and prov["horizon"]["beta"] == 0.5
    assert str(res) in out and "budgets 4-64 steps" in out
    assert "0.007579-0.0132" in out  # beta 0.7 and 0.3 of the file's range: 0.02 (64 / 16)^-beta


@pytest.mark.parametrize("case, match", [
    ("another model", "a results file of another model"),
    ("another variant", "holds the fit of pt (mup_sp with attn_row_rms), not of this run's pt (mup_sp): a results"),
    ("short budgets", "do not bracket the target budget of 64 steps"),
    ("not a study", "is not an lr-horizon study's horizon.json"),
    ("no beta", "has no finite beta"),
    ("negative beta", "fits beta -0.4 < 0 for pt (mup_sp): its optima rise with the budget"),
    ("no power law", "no power law passes through every budget's bracket"),
    ("missing", "cannot read"),
])
def test_bad_results_files_are_one_line_errors(tmp_path, tfile, case, match):
    res = {"another model": lambda: _results(tmp_path, name="bert", parametrization="sp"),
           "another variant": lambda: _results(tmp_path, variants=[{"name": "attn_row_rms"}]),
           "short budgets": lambda: _results(tmp_path, steps=(1, 4, 16)),
           "no beta": lambda: _results(tmp_path, beta=None),
           "negative beta": lambda: _results(tmp_path, beta=-0.4, beta_range=(-0.9, 0.1)),
           "no power law": lambda: _results(tmp_path, beta_range=None),
           "missing": lambda: tmp_path / "nowhere.json"}.get(case)
    path = res() if res else tmp_path / "x.json"
    if case == "not a study":
        path.write_text(json.dumps({"sweep": "lr-transfer"}))
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG, "sweep.horizon.rule=power",
                       f"sweep.horizon.results={path}"])
    with pytest.raises(SweepError) as e:
        read_transfer(cfg)
    assert match in str(e.value) and "\n" not in str(e.value)


def test_a_run_with_a_variant_reads_the_fit_of_that_variant(tmp_path, tfile, capsys):
    res = _results(tmp_path, beta=0.25, beta_range=(0.1, 0.4), variants=[{"name": "attn_row_rms"}])
    over = ["preset=smoke", f"sweep.transfer_file={tfile}", LONG, "sweep.horizon.rule=power",
            f"sweep.horizon.results={res}", "sweep.allow_transfer_mismatch=true"]
    values, prov, _ = read_transfer(cli.compose([*over, "model.variants=[{name:attn_row_rms}]", "model.w_attn=6"]))
    assert prov["horizon"]["beta"] == 0.25 and values["optim.lr"] == pytest.approx(0.02 * 4 ** -0.25)
    assert "(pt mup_sp width 64 with attn_row_rms on shakespeare" in capsys.readouterr().out
    with pytest.raises(SweepError, match=r"holds the fit of pt \(mup_sp with attn_row_rms\), not of this run's pt "
                                         r"\(mup_sp with z_loss coef="):
        read_transfer(cli.compose([*over, "model.variants=[{name:z_loss,coef:1e-4}]"]))


def test_extrapolation_past_the_measured_budgets_is_allowed_only_on_purpose(tmp_path, tfile):
    res = _results(tmp_path, steps=(1, 4, 16))
    cfg = cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG, "sweep.horizon.rule=power",
                       f"sweep.horizon.results={res}", "sweep.horizon.extrapolate=4"])
    values, _, _ = read_transfer(cfg)
    assert math.isclose(values["optim.lr"], 0.01)


def test_an_open_beta_range_and_another_batch_shape_are_said(tmp_path, tfile, capsys):
    res = _results(tmp_path, beta_range=(0.3, math.inf), batch_size=16, seq_len=64)
    doc = json.loads(res.read_text())
    doc["fits"]["pt"].update(beta_seeds=0.45, beta_ci=[0.2, 0.7], n_seed_optima=6)
    res.write_text(json.dumps(doc))
    values, _, _ = read_transfer(cli.compose(["preset=smoke", f"sweep.transfer_file={tfile}", LONG,
                                              "sweep.horizon.rule=power", f"sweep.horizon.results={res}",
                                              "sweep.horizon.estimate=grid"]))
    out = capsys.readouterr().out
    assert values["optim.lr"] == pytest.approx(0.01)
    assert "its range [0.30, inf] gives optim.lr 0.0132 (open on one side: an optimum on a grid edge)" in out
    assert "measured at batch 16 x 64, this run 8 x 32: beta is per optimizer step" in out
    assert "; over its 6 seed optima beta 0.45 [0.2, 0.7] (95 %)" in out


def test_the_default_estimate_reads_the_seed_optima_beta_and_says_so(tmp_path, tfile, capsys):
    res = _results(tmp_path)  # grid beta 0.5
    doc = json.loads(res.read_text())
    doc["fits"]["pt"].update(beta_seeds=0.25, beta_ci=[0.1, 0.4], n_seed_optima=6)
    res.write_text(json.dumps(doc))
    over = ["preset=smoke", f"sweep.transfer_file={tfile}", LONG, "sweep.horizon.rule=power",
            f"sweep.horizon.results={res}"]
    values, prov, _ = read_transfer(cli.compose(over))  # the default reads the seed optima
    out = capsys.readouterr().out
    assert values["optim.lr"] == pytest.approx(0.02 * 4 ** -0.25) and prov["horizon"]["beta"] == 0.25
    assert "beta 0.25 from" in out and "sweep.horizon.estimate=seeds" in prov["horizon"]["source"]
    values, prov, _ = read_transfer(cli.compose([*over, "sweep.horizon.estimate=grid"]))
    assert values["optim.lr"] == pytest.approx(0.01) and "sweep.horizon.estimate=grid" in prov["horizon"]["source"]
    doc["fits"]["pt"].update(beta_seeds=None, n_seed_optima=1, n_seed_bounded=4)
    res.write_text(json.dumps(doc))
    with pytest.raises(SweepError) as e:
        read_transfer(cli.compose(over))
    assert "has no finite beta (sweep.horizon.estimate=seeds)" in str(e.value)
    assert "1 seed optima between grid points (4 just under a collapse, where a parabola places no optimum)" in \
        str(e.value)


def test_the_committed_shakespeare_study_drives_the_rule(tmp_path, capsys):
    """The repository's own horizon.json (written by `make report` from the committed records): an LR tuned at 1,200
    steps of the lr_study shape carried to 19,200 steps by the seeds' beta (the default) and by the grid's."""
    res = Path(__file__).resolve().parents[1] / "experiments/lr-horizon/results/lr-horizon-shakespeare/horizon.json"
    fit = json.loads(res.read_text())["fits"]["pt"]
    tuned = cli.compose(["preset=lr_study", "model.width=32", "model.scaling=rank", "train.tokens=1228800"])
    assert (tuned.train.batch_size, tuned.data.seq_len) == (16, 64)  # 1,200 steps of 16 x 64
    tfile = tmp_path / "transfer.yaml"
    tfile.write_text(yaml.safe_dump({"values": {k: (0.02 if k == "optim.lr" else 1.0) for k in TRANSFER_KEYS},
                                     "provenance": {"study": "t", "settings": transfer_settings(tuned)}}))
    over = ["preset=lr_study", "model.width=32", "model.scaling=rank", f"sweep.transfer_file={tfile}",
            f"train.tokens={1228800 * 16}", "sweep.horizon.rule=power", f"sweep.horizon.results={res}"]
    for extra, beta in (([], fit["beta_seeds"]), (["sweep.horizon.estimate=grid"], fit["beta"])):
        values, prov, _ = read_transfer(cli.compose([*over, *extra]))
        assert values["optim.lr"] == pytest.approx(0.02 * 16 ** -beta) and prov["mismatch"] == {}
        assert "on shakespeare, budgets 1,200-19,200 steps" in capsys.readouterr().out
    assert 0.2 < fit["beta_seeds"] < 0.4  # the README's +0.29 [+0.22, +0.37]


def test_the_committed_cap_study_drives_no_run():
    """The committed cap study's fit (pt with attn_row_rms, seeds' beta below 0): refused for the uncapped model as
    another model's, and for the capped one as negative, each naming the model (what its README tells a user)."""
    from ptsweep.sweeps.horizon_rule import model_fit

    res = Path(__file__).resolve().parents[1] / "experiments/lr-horizon/results/lr-horizon-cap/horizon.json"
    capped = ["preset=smoke", "model.variants=[{name:attn_row_rms}]", "model.w_attn=6"]
    for over, match in ((["preset=smoke"], "not of this run's pt (mup_sp): a results file of another model"),
                        (capped, "< 0 for pt (mup_sp with attn_row_rms): its optima rise with the budget")):
        with pytest.raises(SweepError) as e:
            model_fit(cli.compose(over), res, "seeds")
        assert match in str(e.value)
    assert json.loads(res.read_text())["fits"]["pt"]["beta_seeds"] < 0  # the README's -0.10 [-0.35, +0.15]
