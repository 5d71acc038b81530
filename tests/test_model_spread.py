"""Each cell's own seed spread in a difference (``analysis.model_spread``), against scipy: Welch's interval of the two
cells' seeds at every scale, no interval for a one-seed cell, the seed count that would decide a measured difference,
and the exit table's per-seed cells."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ptsweep.analysis import claims
from ptsweep.analysis import framings
from ptsweep.analysis.model_spread import NO_SPREAD, cell_spreads, one_side_seeds, seeds_to_decide, spread_ci

PT = [4.373, 4.366, 4.371, 4.369]     # a model whose seeds agree
BERT = [4.472, 4.007, 4.3, 4.1]       # one whose seeds leave the plateau at different steps


def _runs(cells: dict[str, list[list[float]]]) -> pd.DataFrame:
    """A runs table (series, scale, loss): each model's seed losses at scales 32, 64, ..."""
    return pd.DataFrame([{"series": m, "scale": 32 * 2 ** i, "loss": x} for m, losses in cells.items()
                         for i, seeds in enumerate(losses) for x in seeds])


def test_one_cell_per_model_is_welchs_interval_from_scipy():
    sp = cell_spreads(_runs({"pt": [PT], "bert": [BERT]}))
    d = spread_ci(PT, BERT, sp[("pt", "32")], sp[("bert", "32")])
    ref = stats.ttest_ind(PT, BERT, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert d["lo"] == pytest.approx(ci.low, rel=1e-9) and d["hi"] == pytest.approx(ci.high, rel=1e-9)
    assert d["df"] == pytest.approx(ref.df, rel=1e-9) and d["diff"] == pytest.approx(np.mean(PT) - np.mean(BERT))
    assert d["sd_a"] == pytest.approx(np.std(PT, ddof=1)) and d["decided"] == "undecided"


def test_each_cell_is_charged_its_own_spread_at_every_scale():
    """A baseline whose seeds spread widely at one width only: the other width's difference is Welch's interval of
    its own two cells (scipy), not widened by the noisy width."""
    pt64, bert64 = [4.0, 4.1, 4.2], [5.0, 5.9, 4.1]
    runs = _runs({"pt": [PT, pt64], "bert": [[4.40, 4.41, 4.42, 4.41], bert64]})
    sp = cell_spreads(runs)
    assert sp[("bert", "32")] == (pytest.approx(np.var([4.40, 4.41, 4.42, 4.41], ddof=1)), 3)
    for scale, a, b in (("32", PT, [4.40, 4.41, 4.42, 4.41]), ("64", pt64, bert64)):
        d = spread_ci(a, b, sp[("pt", scale)], sp[("bert", scale)])
        ref = stats.ttest_ind(a, b, equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert (d["lo"], d["hi"], d["df"]) == (pytest.approx(ci.low), pytest.approx(ci.high), pytest.approx(ref.df))
    assert spread_ci(PT, [4.40, 4.41, 4.42, 4.41], sp[("pt", "32")], sp[("bert", "32")])["decided"] == "a_lower"


def test_a_one_seed_cell_gets_no_interval_and_says_why():
    """A cell's spread is its own: another scale's is no measure of it (that is what changes between scales)."""
    pt64 = [4.0, 4.1, 4.2]
    sp = cell_spreads(_runs({"pt": [PT, pt64, [3.9]], "bert": [[4.4], [4.5, 4.6], [4.0, 4.1]]}))
    assert sp[("pt", "64")] == (pytest.approx(np.var(pt64, ddof=1)), 2)
    assert np.isnan(sp[("pt", "128")][0]) and sp[("pt", "128")][1] == 0
    d = spread_ci([3.9], [4.0, 4.1], sp[("pt", "128")], sp[("bert", "128")])
    assert d["decided"] == "undecided" and np.isnan(d["lo"]) and d["reason"] == NO_SPREAD and d["no_noise"]
    assert d["diff"] == pytest.approx(3.9 - 4.05)
    assert framings.every_scale({"128": d})["no_noise_at"] == ["128"]
    assert framings.verdict_text(None, {"128": d}) == "undecided: no seed spread, no interval (N = 128)"
    cells = pd.DataFrame({"series": ["pt", "bert"], "loss": [3.9, 4.05]})
    won = framings.winner(cells, "128", {("pt", "128"), ("bert", "128")}, {}, None,
                          {"pt": [3.9], "bert": [4.0, 4.1]}, {m: sp[(m, "128")] for m in ("pt", "bert")})
    assert won["winner"] is None and won["reason"] == NO_SPREAD


@pytest.mark.parametrize("diff,sd_a,sd_b", [(-0.354, 0.005, 0.168), (0.13, 0.2, 0.33), (0.02, 0.01, 0.01)])
def test_seeds_to_decide_is_the_first_n_whose_welch_interval_excludes_the_difference(diff, sd_a, sd_b):
    va, vb = sd_a ** 2, sd_b ** 2
    n = seeds_to_decide(diff, va, vb)

    def half(m: int) -> float:  # the interval's half-width with m seeds per model at these spreads (scipy's t)
        df = (m - 1) * (va + vb) ** 2 / (va ** 2 + vb ** 2)
        return stats.t.ppf(0.975, df) * math.sqrt((va + vb) / m)

    assert n is not None and n >= 2 and half(n) < abs(diff) and (n == 2 or half(n - 1) >= abs(diff))


def _one_side_by_scan(diff, v_more, n_more, v_kept, n_kept, power):
    """Smallest total m >= max(n_more, 2) of one side whose Welch interval (scipy's t) at ``diff`` excludes 0."""
    for m in range(max(n_more, 2), 5000):
        ua, ub = v_more / m, v_kept / n_kept
        df = (ua + ub) ** 2 / (ua ** 2 / (m - 1) + ub ** 2 / (n_kept - 1))
        extra = stats.t.ppf(power, df) if power > 0.5 else 0.0
        if (stats.t.ppf(0.975, df) + extra) * math.sqrt(ua + ub) < abs(diff):
            return m
    return None


@pytest.mark.parametrize("diff,sd_a,n_a,sd_b,n_b", [(0.2, 0.2, 8, 0.15, 6), (0.13, 0.2, 4, 0.33, 3),
                                                    (0.3, 0.25, 4, 0.02, 4), (-0.05, 0.1, 2, 0.3, 4)])
def test_one_sides_seeds_are_the_first_count_whose_welch_interval_excludes_the_difference(diff, sd_a, n_a, sd_b, n_b):
    """Seeds of one side alone, the other kept: against a scan with scipy's t; the cheaper side is named, and a side
    whose kept partner alone is too wide (n_b = 4 at SD 0.3 against 0.05) decides at no count."""
    got = one_side_seeds(diff, (sd_a ** 2, n_a), (sd_b ** 2, n_b))
    scans = {side: [_one_side_by_scan(diff, v, n, vk, nk, p) for p in (0.5, 0.8)]
             for side, (v, n), (vk, nk) in (("a", (sd_a ** 2, n_a), (sd_b ** 2, n_b)),
                                            ("b", (sd_b ** 2, n_b), (sd_a ** 2, n_a)))}
    found = {side: c for side, c in scans.items() if c[0] is not None}
    if not found:
        assert got is None
        return
    side = min(found, key=lambda k: found[k][0])
    assert got == {"side": side, "seeds": found[side][0], "seeds_80": found[side][1]}
    assert got["seeds"] >= {"a": n_a, "b": n_b}[side] and (got["seeds_80"] is None or got["seeds_80"] >= got["seeds"])


def test_an_undecided_claim_names_the_seeds_of_the_noisier_model_alone():
    pt, bert = [4.10, 4.11, 4.12, 4.11], [4.0, 4.6, 3.9, 4.3]
    sp = cell_spreads(_runs({"pt": [pt], "bert": [bert]}))
    d = spread_ci(pt, bert, sp[("pt", "32")], sp[("bert", "32")])
    assert d["decided"] == "undecided" and d["one_side"]["side"] == "b"
    text = "\n".join(claims.claim_lines({"differences": {"pt-bert": {"32": d}}, "framings": {}}))
    assert f"; or {d['one_side']['seeds']} seeds of bert alone, the other side's 4 kept" in text


def test_no_seed_count_decides_a_zero_difference_and_equal_seeds_decide_at_two():
    assert seeds_to_decide(0.0, 0.01, 0.02) is None and seeds_to_decide(0.1, 0.0, 0.0) == 2


def test_an_undecided_claim_names_the_seeds_that_would_decide_it():
    sp = cell_spreads(_runs({"pt": [PT], "bert": [BERT]}))
    d = spread_ci(PT, BERT, sp[("pt", "32")], sp[("bert", "32")])
    summary = {"differences": {"pt-bert": {"64": d}}, "framings": {}}
    text = "\n".join(claims.claim_lines(summary))
    assert "**PT beats BERT at every scale** - as run: **undecided: the interval includes 0 (N = 64)**" in text
    assert f"; {d['seeds_to_decide']} seeds per model would decide this difference at these spreads" in text
    assert "**UT beats PT at every scale**: not tested" in text


def test_the_exit_table_says_when_a_cell_has_fewer_curves_than_seeds():
    summary = {"seeds": [0, 1], "budget_check": {"threshold": 1.0, "crossings": {
        "bert at scale 32": [1200.0, math.inf], "pt at scale 32": [2400.0]}}}
    rows = {line.split(" | ")[0].lstrip("| "): line for line in claims.exit_lines(summary) if line.startswith("| ")}
    assert rows["bert at scale 32"] == "| bert at scale 32 | 1,200, never | n/a |"
    assert rows["pt at scale 32"] == "| pt at scale 32 | 2,400 (1 of 2 seeds have a curve) | n/a |"


def test_the_seed_counts_give_about_even_and_80_percent_odds_in_simulation():
    """Welch tests on simulated seeds at the measured difference and spreads: n seeds decide about half the time,
    the 80 % count about 80 % of the time, and one seed fewer less often."""
    va, vb, diff = 0.05**2, 0.15**2, 0.12
    rng = np.random.default_rng(0)

    def odds(n: int) -> float:
        a, b = rng.normal(diff, 0.05, (20000, n)), rng.normal(0.0, 0.15, (20000, n))
        return float((stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05).mean())

    even, eighty = seeds_to_decide(diff, va, vb), seeds_to_decide(diff, va, vb, power=0.8)
    assert (even, eighty) == (9, 16)
    assert 0.5 <= odds(even) < 0.6 and odds(even - 1) < 0.5
    assert 0.8 <= odds(eighty) < 0.85 and odds(eighty - 1) < 0.8
    d = spread_ci([diff] * 3, [0.0, 0.3, -0.3], (va, 2), (vb, 2))
    assert d["decided"] == "undecided" and (d["seeds_to_decide"], d["seeds_80"]) == (9, 16)
    assert "; 9 seeds per model would decide this difference at these spreads (an even chance if it is the true " \
           "difference; 16 for 80 %)" in claims._difference(d, "bert")


def test_two_cells_of_identical_seeds_decide_nothing():
    """Seeds that agree exactly (a seed that changes nothing) leave no noise to judge a difference by."""
    d = spread_ci([4.0, 4.0], [4.5, 4.5], (0.0, 1), (0.0, 1))
    assert d["decided"] == "undecided" and np.isnan(d["lo"]) and d["diff"] == pytest.approx(-0.5)
    assert spread_ci([4.0, 4.0], [4.5, 4.7], (0.0, 1), (0.02, 1))["df"] == pytest.approx(1.0)  # one side: Welch
