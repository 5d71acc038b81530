"""experiments/lr-horizon/compare_beta.py: beta of two lr-horizon studies over the budgets both fitted, and their
difference, from each horizon.json's seed optima."""

import json

import pytest
from experiment_scripts import load_script

from ptsweep.analysis import horizon

compare_beta = load_script("experiments/lr-horizon/compare_beta.py")


def _doc(study: str, width: int, steps: list[int], optima: list[list[float | None]]) -> dict:
    return {"sweep": "lr-horizon", "study": study, "data": "shakespeare", "fits": {"pt": {
        "model": {"name": "pt", "width": width}, "steps": steps, "seed_optima": optima}}}


A = _doc("w32", 32, [1200, 4800, 19200], [[0.025, 0.024], [0.018, None], [0.011, 0.0105]])
B = _doc("w128", 128, [300, 1200, 4800], [[0.03, 0.031], [0.026, 0.022], [0.016, 0.017]])


def test_compare_beta_fits_the_common_budgets_seed_optima_and_leaves_out_edge_seeds(tmp_path, capsys):
    lines = compare_beta.compare(A, B)
    want = horizon.slope_difference(([1200, 1200, 4800], [0.025, 0.024, 0.018]),
                                    ([1200, 1200, 4800, 4800], [0.026, 0.022, 0.016, 0.017]))
    assert lines[0] == "pt, seed optima over 1,200, 4,800 steps:" and "w32 (pt width 32, shakespeare)" in lines[1]
    assert f"beta {want['beta_a']:+.3f}" in lines[1] and f"beta {want['beta_b']:+.3f}" in lines[2]
    lo, hi = want["ci"]
    assert lines[3].startswith(f"  B - A: {want['diff']:+.3f}, 95 % interval [{lo:+.3f}, {hi:+.3f}] (t, 3 df)")
    assert lines[3].endswith("no difference seen; the interval bounds what these seeds can exclude")
    far = _doc("steep", 128, [1200, 4800], [[0.03, 0.0301], [0.0031, 0.003]])
    assert compare_beta.compare(A, far)[3].endswith("the exponents differ")
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for p, d in zip(paths, (A, B)):
        p.write_text(json.dumps(d))
    compare_beta.main([str(paths[0]), str(paths[1])])
    assert capsys.readouterr().out.splitlines() == lines


THIN = _doc("thin", 128, [1200, 4800], [[0.02], [0.01]])


@pytest.mark.parametrize("a, b, steps, match", [
    (A, _doc("one", 128, [300, 1200], [[0.03], [0.02]]), None, r"both studies fitted the budgets \[1200\]"),
    (A, B, [300, 1200], "compare at >= 2 of them"),
    (A, {"study": "old", "fits": {"pt": {"steps": [1200]}}}, None, "old has no seed optima of pt"),
    (THIN, THIN, None, "compare_beta: horizon fit: comparing two slopes needs >= 5 points"),
])
def test_compare_beta_refuses_in_one_line(a, b, steps, match):
    with pytest.raises(SystemExit, match=match) as e:
        compare_beta.compare(a, b, steps=steps)
    assert "\n" not in str(e.value)
