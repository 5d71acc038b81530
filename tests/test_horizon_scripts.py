"""experiments/lr-horizon/compare_horizons.py: beta of two lr-horizon studies over the budgets both fitted and their
difference, from each horizon.json's seed optima, and the loss at each one's eta* paired by seed."""

import json

import numpy as np
import pytest
from experiment_scripts import load_script
from scipy import stats

from ptsweep.analysis import horizon

compare_horizons = load_script("experiments/lr-horizon/compare_horizons.py")


def _doc(study: str, width: int, steps: list[int], optima: list[list[float | None]],
         losses: list[dict[str, float]] | None = None) -> dict:
    """A horizon.json of PT: seed optima per budget, eta* 0.02 and each seed's loss there (5.0 unless given)."""
    losses = losses or [{str(s): 5.0 for s in range(len(o))} for o in optima]
    return {"sweep": "lr-horizon", "study": study, "data": "shakespeare", "fits": {"pt": {
        "model": {"name": "pt", "width": width}, "steps": steps, "seed_optima": optima,
        "eta_opt": [0.02] * len(steps), "seed_loss_at_opt": losses}}}


A = _doc("w32", 32, [1200, 4800, 19200], [[0.025, 0.024], [0.018, None], [0.011, 0.0105]],
         [{"0": 5.0, "1": 5.02}, {"0": 4.7, "1": 4.66}, {"0": 4.5, "1": 4.55}])
B = _doc("w128", 128, [300, 1200, 4800], [[0.03, 0.031], [0.026, 0.022], [0.016, 0.017]],
         [{"0": 5.5, "1": 5.4}, {"0": 4.9, "1": 4.85}, {"0": 4.6, "1": 4.62}])
B["fits"]["pt"]["model"]["anchor"] = 32  # muP beyond its anchor


def test_compare_horizons_fits_the_common_budgets_seed_optima_and_leaves_out_edge_seeds(tmp_path, capsys):
    lines = compare_horizons.compare(A, B)
    want = horizon.slope_difference(([1200, 1200, 4800], [0.025, 0.024, 0.018]),
                                    ([1200, 1200, 4800, 4800], [0.026, 0.022, 0.016, 0.017]))
    assert lines[0] == "pt, seed optima over 1,200, 4,800 steps:" and "w32 (pt width 32, shakespeare)" in lines[1]
    assert "w128 (pt width 128 anchored at 32, shakespeare)" in lines[2]
    assert f"beta {want['beta_a']:+.3f}" in lines[1] and f"beta {want['beta_b']:+.3f}" in lines[2]
    lo, hi = want["ci"]
    assert lines[3].startswith(f"  B - A: {want['diff']:+.3f}, 95 % interval [{lo:+.3f}, {hi:+.3f}] (t, 3 df)")
    assert lines[3].endswith("no difference seen; the interval bounds what these seeds can exclude")
    assert lines[4].startswith("pt, validation loss at each study's eta* (B - A paired by seed")
    for line, a, b in zip(lines[5:], ([5.0, 5.02], [4.7, 4.66]), ([4.9, 4.85], [4.6, 4.62])):
        d = np.subtract(b, a)  # seeds 0 and 1, paired
        se = d.std(ddof=1) / np.sqrt(2)
        half = stats.t.ppf(0.975, 1) * se
        assert line.endswith(f"B - A {d.mean():+.4f} ± {se:.4f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}] (2), "
                             f"{100 * d.mean() / np.mean(a):+.1f} %")
    assert lines[5].startswith("  1,200 steps: A 0.02 5.010, B 0.02 4.875;") and lines[6].startswith("  4,800 steps:")
    assert len(lines) == 7
    far = _doc("steep", 128, [1200, 4800], [[0.03, 0.0301], [0.0031, 0.003]])
    assert compare_horizons.compare(A, far)[3].endswith("the exponents differ")
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p, d in zip(paths, (A, B)):
        p.write_text(json.dumps(d))
    compare_horizons.main([str(paths[0]), str(paths[1])])
    assert capsys.readouterr().out.splitlines() == lines


THIN = _doc("thin", 128, [1200, 4800], [[0.02], [0.01]])


@pytest.mark.parametrize("a, b, steps, match", [
    (A, _doc("one", 128, [300, 1200], [[0.03], [0.02]]), None, r"both studies fitted the budgets \[1200\]"),
    (A, B, [300, 1200], "compare at >= 2 of them"),
    (A, {"study": "old", "fits": {"pt": {"steps": [1200]}}}, None, "old has no seed optima and losses of pt"),
])
def test_compare_horizons_refuses_in_one_line(a, b, steps, match):
    with pytest.raises(SystemExit, match=match) as e:
        compare_horizons.compare(a, b, steps=steps)
    assert "\n" not in str(e.value)


def test_compare_horizons_without_enough_seed_optima_says_why_and_still_prices_each_budget():
    edge = _doc("edge", 128, [1200, 4800], [[0.02, 0.021], [None, None]])  # both seeds against a collapse at 4,800
    lines = compare_horizons.compare(THIN, THIN)
    assert lines[0] == ("pt, seed optima over 1,200, 4,800 steps: no beta to compare (horizon fit: comparing two "
                        "slopes needs >= 5 points in all; seed optima per budget: A 1,200: 1 of 1, 4,800: 1 of 1; "
                        "B 1,200: 1 of 1, 4,800: 1 of 1; a seed whose best LR sits on a grid edge or just under a "
                        "collapse has none)")
    lines = compare_horizons.compare(A, edge)
    assert lines[0].startswith("pt, seed optima over 1,200, 4,800 steps: no beta to compare (horizon fit: need >= 2 "
                               "distinct budgets; seed optima per budget: A 1,200: 2 of 2, 4,800: 1 of 2; B 1,200: 2 "
                               "of 2, 4,800: 0 of 2;")
    assert lines[1].startswith("pt, validation loss at each study's eta*") and len(lines) == 4
