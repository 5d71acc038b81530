"""The three framings of the scaling comparison (ptsweep.analysis.framings) on synthetic curves with known answers:
the difference of two fitted laws at given x, its bootstrap interval, the verdict per scale and per framing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ptsweep.analysis import framings


def _runs(law, xs, seeds=2, noise=0.0, rng=None):
    """(x, y) with one entry per run: law(x) times a log-normal seed noise."""
    x = np.repeat(np.asarray(xs, dtype=float), seeds)
    eps = rng.normal(0, noise, x.size) if noise else np.zeros(x.size)
    return x, law(x) * np.exp(eps)


def pt_law(x):
    return 5.0 * x ** -0.1


def bert_law(x):
    return 6.0 * x ** -0.1


def _learned(runs: pd.DataFrame) -> set[tuple[str, str]]:
    """Every (series, scale) of ``runs`` as a cell that learned context (no gate applies)."""
    return {(str(x), str(int(s))) for x, s in zip(runs["series"], runs["scale"])}


def test_difference_at_matched_x_is_the_known_one_and_noise_free_seeds_decide_nothing():
    """Noise-free power laws: D(x) = (5 - 6) x^-0.1 exactly, at x inside both ranges even where no run sits; seeds
    that agree exactly give no seed noise, so no interval and no verdict. With a little noise the verdict is PT's."""
    xa, ya = _runs(pt_law, [1e6, 4e6, 1.6e7])
    xb, yb = _runs(bert_law, [2e6, 8e6, 3.2e7])  # interleaved with PT's: PT's own x are interpolated for BERT
    at = [2e6, 4e6, 8e6, 1.6e7]
    rows = framings.compare_at(xa, ya, xb, yb, at)
    for x, r in zip(at, rows):
        assert r["diff"] == pytest.approx(-1.0 * x ** -0.1, rel=1e-9)
        assert r["loss_b"] == pytest.approx(bert_law(x), rel=1e-9)
        assert np.isnan(r["lo"]) and r["decided"] == "undecided" and r["reason"] == framings.NO_NOISE
    rng = np.random.default_rng(0)
    xa, ya = _runs(pt_law, [1e6, 4e6, 1.6e7], noise=1e-3, rng=rng)
    xb, yb = _runs(bert_law, [2e6, 8e6, 3.2e7], noise=1e-3, rng=rng)
    per = {str(i): r for i, r in enumerate(framings.compare_at(xa, ya, xb, yb, at))}
    assert all(r["lo"] < r["diff"] < r["hi"] < 0 for r in per.values())
    assert framings.every_scale(per)["every_scale"] is True
    assert framings.every_scale(per, win="b_lower")["every_scale"] is False


def test_crossing_curves_give_the_known_verdict_per_x():
    """a = 3 x^-0.05, b = 5 x^-0.1 cross at x* = (5/3)^20 ~ 2.7e4: a is lower below x*, b above."""
    xs, rng = np.geomspace(1e3, 1e6, 5), np.random.default_rng(1)
    xa, ya = _runs(lambda x: 3 * x ** -0.05, xs, noise=1e-3, rng=rng)
    xb, yb = _runs(lambda x: 5 * x ** -0.1, xs, noise=1e-3, rng=rng)
    x_star = (5 / 3) ** 20
    rows = framings.compare_at(xa, ya, xb, yb, [2e3, 1e4, 1e5, 8e5])
    assert [r["decided"] for r in rows] == ["a_lower", "a_lower", "b_lower", "b_lower"]
    for r in rows:
        assert np.sign(r["diff"]) == np.sign(r["x"] - x_star)
    assert framings.every_scale({str(i): r for i, r in enumerate(rows)})["every_scale"] is False


def test_extrapolated_x_gets_no_verdict():
    rng = np.random.default_rng(2)
    xa, ya = _runs(pt_law, [1e6, 1e7, 1e8], noise=1e-3, rng=rng)
    xb, yb = _runs(bert_law, [1e6, 3e6, 1e7], noise=1e-3, rng=rng)
    rows = framings.compare_at(xa, ya, xb, yb, [1e6, 1e7, 1e8])
    assert [r["decided"] for r in rows] == ["a_lower", "a_lower", "extrapolated"]
    assert rows[2]["in_range_a"] and not rows[2]["in_range_b"]
    res = framings.every_scale({"256": rows[0], "512": rows[1], "1024": rows[2]})
    assert res["every_scale"] is None and res["extrapolated_at"] == ["1024"]
    # within the tolerance (10 % past the last run) the curve counts as interpolated
    near = framings.compare_at(xa, ya, xb, yb, [1.05e7])[0]
    assert near["decided"] == "a_lower"


def test_bootstrap_interval_covers_the_true_difference():
    """With seed noise (sd 1 % of the loss, 2 seeds, 4 sizes per model) the 95 % interval of D(x) covers the true
    difference in most simulations and is wider than zero; an equal pair is mostly undecided."""
    rng = np.random.default_rng(0)
    at = np.array([2e6, 8e6])
    cover, width, undecided_equal = 0, [], 0
    n_sim = 60
    for _ in range(n_sim):
        xa, ya = _runs(pt_law, [1e6, 4e6, 1.6e7, 6.4e7], noise=0.01, rng=rng)
        xb, yb = _runs(lambda x: 5.1 * x ** -0.1, [1.5e6, 6e6, 2.4e7], noise=0.01, rng=rng)
        rows = framings.compare_at(xa, ya, xb, yb, at)
        truth = -0.1 * at ** -0.1
        cover += all(r["lo"] <= t <= r["hi"] for r, t in zip(rows, truth))
        width += [r["hi"] - r["lo"] for r in rows]
        xe, ye = _runs(pt_law, [1.5e6, 6e6, 2.4e7], noise=0.01, rng=rng)
        eq = framings.compare_at(xa, ya, xe, ye, at)
        undecided_equal += all(r["decided"] == "undecided" for r in eq)
    assert cover / n_sim >= 0.8, cover
    assert min(width) > 0
    assert undecided_equal / n_sim >= 0.8, undecided_equal


def test_framings_use_each_axis_and_pt_own_x():
    """PT is lower at equal total params (its law is 0.9 x the baseline's on that axis) but higher at equal FLOPs
    (1.1 x on that axis); BERT sits at 1.05 x PT's params and 0.8 x its FLOPs: the three framings must read their own columns."""
    rows = []
    for series in ("pt", "bert"):
        for s in (64, 128, 256, 512):
            for seed in (0, 1):
                p, ne, f = 1e4 * s * (1.05 if series == "bert" else 1), 2e3 * s, 1e9 * s
                rows.append({"series": series, "scale": s, "seed": seed, "params": p, "non_embedding_params": ne,
                             "train_flops": f * (0.8 if series == "bert" else 1)})
    df = pd.DataFrame(rows)

    def law(series, x, axis):
        k = {("pt", "params"): 4.5, ("bert", "params"): 5.0, ("pt", "non_embedding_params"): 5.0,
             ("bert", "non_embedding_params"): 5.0, ("pt", "train_flops"): 5.5, ("bert", "train_flops"): 5.0}
        return k[(series, axis)] * x ** -0.1

    out, rng = {}, np.random.default_rng(3)
    for name, col in framings.FRAMINGS.items():
        d = df.copy()
        d["loss"] = [law(r["series"], r[col], col) * (1 + rng.normal(0, 1e-4)) for _, r in d.iterrows()]
        out[name] = framings.framings(d, ["pt"], ["bert"], _learned(d), {})[name]["pt-bert"]
    assert out["total"]["every_scale"] is True and out["flops"]["every_scale"] is False
    assert out["non_embedding"]["every_scale"] is None  # equal laws: zero difference, undecided everywhere
    pt_x = {str(s): 1e9 * s for s in (64, 128, 256, 512)}
    assert {s: r["x"] for s, r in out["flops"]["per_scale"].items()} == pytest.approx(pt_x)
    # at PT's largest FLOPs the baseline (0.8 x PT's FLOPs per run) is 25 % beyond its last run: extrapolated
    assert out["flops"]["per_scale"]["512"]["decided"] == "extrapolated"


def test_one_scale_reads_no_fit_and_the_report_shows_the_seed_interval():
    """One scale: no curve can be fitted, so each framing says "no fit" there (not "undecided", which is for an
    interval that straddles 0), and the report's as-run lines give the per-scale difference with its t interval and
    name the reason: the interval includes 0."""
    rows = [{"series": s, "scale": 32, "seed": k, "params": 5e5, "non_embedding_params": 2e4, "train_flops": 3e16,
             "loss": loss} for s, losses in (("pt", (4.605, 4.651)), ("bert", (4.752, 4.619))) for k, loss in
            enumerate(losses)]
    runs = pd.DataFrame(rows)
    res = framings.framings(runs, ["pt"], ["bert"], _learned(runs), {})["total"]["pt-bert"]
    assert res["every_scale"] is None and res["failed_at"] == ["32"] and res["undecided_at"] == []
    diff = {"32": {"diff": -0.0574, "lo": -0.2416, "hi": 0.1267, "decided": "undecided"}}
    summary = {"framings": {"total": {"pt-bert": res}}, "differences": {"pt-bert": diff},
               "statements": {"pt_beats_bert_at_every_scale": framings.verdict_text(None, diff)}}
    text = "\n".join(framings.report_lines(summary))
    assert "undecided at N = 32" not in text and "failed" not in text
    assert "- pt-bert: N=32: -0.0574 [-0.2416, +0.1267] undecided" in text
    assert "At every scale: undecided: no fit (N = 32)**" in text
    assert "PT beats BERT at every scale: undecided: the interval includes 0 (N = 32)" in text


def test_a_pair_with_no_scale_to_compare_says_so_instead_of_an_empty_list():
    summary = {"framings": {"total": {"pt-bert": {"per_scale": {}, "every_scale": None}}}}
    text = "\n".join(framings.report_lines(summary))
    assert f"- pt-bert: {framings.NO_SCALES}. **At every scale: undecided**" in text and "pt-bert: ." not in text


def test_an_undecided_verdict_names_each_scales_reason():
    """A context gate's reason, then the scales left undecided by their interval, no fit or extrapolation."""
    gate = "undecided: bert learned no context at this budget"
    per = {"32": {"decided": "undecided", "no_context": ["bert"], "reason": gate},
           "64": {"decided": "undecided", "diff": -0.05, "lo": -0.2, "hi": 0.1},
           "128": {"decided": "extrapolated"}, "256": {"decided": "a_lower"}}
    assert framings.verdict_text(None, per) == (f"{gate} (N = 32); PT's x outside the baseline's range (N = 128); "
                                                "the interval includes 0 (N = 64)")
    del per["32"]
    assert framings.verdict_text(None, per) == ("undecided: PT's x outside the baseline's range (N = 128); "
                                                "the interval includes 0 (N = 64)")
    assert framings.verdict_text(False, per) == "no" and framings.verdict_text(True, {}) == "yes"


def test_a_scale_winner_needs_a_decided_interval_against_every_other_model():
    """The width-64 test losses of the trained comparison (PT 4.373 / 4.366, UT 4.176 / 3.854): UT's mean is 0.354
    lower; with each model's seed SD at 6 df, UT's 0.168 and PT's 0.005, the Welch half-width is about
    t(0.975, ~6) x sqrt(0.168^2 / 2 + 0.005^2 / 2) = 0.291 < 0.354, so UT wins; with UT's SD 0.3 it is 0.52 and no
    one wins. One model alone wins nothing."""
    cells = pd.DataFrame({"series": ["pt", "ut"], "loss": [4.3695, 4.015]})
    seeds = {"pt": [4.373, 4.366], "ut": [4.176, 3.854]}
    learned = {("pt", "64"), ("ut", "64")}
    quiet_pt = {"pt": (0.005 ** 2, 6), "ut": (0.168 ** 2, 6)}
    assert framings.winner(cells, "64", learned, {}, None, seeds, quiet_pt)["winner"] == "ut"
    noisy = framings.winner(cells, "64", learned, {}, None, seeds, {**quiet_pt, "ut": (0.3 ** 2, 6)})
    assert noisy["winner"] is None
    assert noisy["reason"] == "undecided: ut has the lowest loss, but its 95 % interval against pt includes 0"
    alone = framings.winner(cells.iloc[:1], "64", learned, {}, None, {"pt": seeds["pt"]}, quiet_pt)
    assert alone["winner"] is None and alone["reason"] == "undecided: only pt ran at this scale"
    failed = pd.concat([cells, pd.DataFrame({"series": ["bert"], "loss": [math.inf]})], ignore_index=True)
    one_failed = framings.winner(failed, "64", learned, {}, None, seeds, quiet_pt)  # ut is lowest of those that ran
    assert one_failed["winner"] is None and one_failed["reason"] == "undecided: no finished run of bert at this scale"


def test_extrapolation_is_more_than_10_percent_outside_on_either_side():
    xb = np.repeat([1e6, 2e6, 4e6], 2)
    yb = 6.0 * xb ** -0.1
    rows = framings.compare_at(xb, 5.0 * xb ** -0.1, xb, yb, [0.905e6, 0.895e6, 4.39e6, 4.41e6])
    assert [r["in_range_b"] for r in rows] == [True, False, True, False]


def _table(pt: dict, bert: dict, seeds: int = 2, sd: float = 0.01, x: dict | None = None) -> pd.DataFrame:
    """A runs table of PT and BERT at scales 32 / 64 / 128 with their cell losses (nan: every seed failed) and seed
    noise ``sd``; x of every framing from ``x`` (default 1e6 / 2e6 / 4e6)."""
    rng, x = np.random.default_rng(0), x or {32: 1e6, 64: 2e6, 128: 4e6}
    return pd.DataFrame([{"series": m, "scale": s, "seed": k, "loss": law[s] + rng.normal(0, sd),
                          "params": x[s], "non_embedding_params": x[s], "train_flops": x[s] * 1e3}
                         for m, law in (("pt", pt), ("bert", bert)) for s in law for k in range(seeds)])


def test_one_seed_per_size_gives_no_interval_and_no_verdict():
    runs = _table({32: 5.0, 64: 4.8, 128: 4.6}, {32: 5.002, 64: 4.802, 128: 4.602}, seeds=1, sd=0.0)
    r = framings.framings(runs, ["pt"], ["bert"], _learned(runs), {})["total"]["pt-bert"]
    assert r["every_scale"] is None and r["no_noise_at"] == ["32", "64", "128"]
    for d in r["per_scale"].values():
        assert np.isnan(d["lo"]) and d["reason"] == framings.NO_NOISE
        assert d["diff"] == pytest.approx(-0.002, abs=1e-4)  # the fitted laws, not the cells
    assert "no seed spread, no interval (N = 32, 64, 128)" in framings.verdict_text(None, r["per_scale"])
    text = "\n".join(framings.report_lines({"framings": {"total": {"pt-bert": r}}}))
    assert "N=32: -0.0020 no interval undecided" in text and "nan" not in text  # never "[+nan, +nan]"
    two = _table({32: 5.0, 64: 4.8, 128: 4.6}, {32: 5.3, 64: 5.1, 128: 4.9}, seeds=2, sd=0.001)
    assert framings.framings(two, ["pt"], ["bert"], _learned(two), {})["total"]["pt-bert"][
        "every_scale"] is True  # with two seeds the same design decides


def test_a_scale_where_pt_has_no_finished_run_stays_undecided():
    runs = _table({32: 4.9, 64: 4.7, 128: math.nan}, {32: 5.2, 64: 5.0, 128: 4.8})
    learned = _learned(runs) - {("pt", "128")}
    r = framings.framings(runs, ["pt"], ["bert"], learned, {}, scales=[32, 64, 128])["total"]["pt-bert"]
    assert list(r["per_scale"]) == ["32", "64", "128"] and r["every_scale"] is None
    assert r["per_scale"]["128"]["reason"] == framings.NO_CONTEXT.format(models="pt")
    assert r["pt_lower_at"] == ["32", "64"]


def test_a_cell_that_learned_nothing_anchors_no_curve():
    """BERT at 32 learned nothing (loss 7.0): fitted without it, PT's x at 64 (0.6e6) lies below BERT's learned
    range (1e6 .. 4e6), so no verdict there; fitted with it, that cell would have put PT ~1 nat lower."""
    runs = _table({64: 5.30, 128: 4.75}, {32: 7.0, 64: 5.0, 128: 4.7},
                  x={32: 0.5e6, 64: 1e6, 128: 4e6})
    runs.loc[(runs["series"] == "pt") & (runs["scale"] == 64), "params"] = 0.6e6
    runs.loc[(runs["series"] == "pt") & (runs["scale"] == 128), "params"] = 1.5e6
    learned = _learned(runs) - {("bert", "32")}
    r = framings.framings(runs, ["pt"], ["bert"], learned, {})["total"]["pt-bert"]
    assert r["per_scale"]["64"]["decided"] == "extrapolated" and r["every_scale"] is None
    everything = framings.framings(runs, ["pt"], ["bert"], _learned(runs), {})["total"]["pt-bert"]
    with_it = everything["per_scale"]["64"]  # the nothing-learned cell would have put PT's x inside BERT's range,
    assert with_it["decided"] != "extrapolated" and with_it["diff"] < -0.5  # ~1 nat lower, and only the curve's
    assert "bert" in with_it["lack_of_fit"]  # misfit (7.0, 5.0, 4.7 on no power law) keeps it from a verdict


def test_a_study_without_a_finished_run_compares_nothing_and_does_not_fail():
    runs = _table({32: math.nan, 64: math.nan}, {32: math.nan, 64: math.nan})
    r = framings.framings(runs, ["pt"], ["bert"], set(), {}, scales=[32, 64])["total"]["pt-bert"]
    assert list(r["per_scale"]) == ["32", "64"] and r["every_scale"] is None
    assert r["per_scale"]["32"]["reason"] == framings.NO_CONTEXT.format(models="pt and bert")
