"""experiments/baseline-rule/rule_regret.py: the regret of the extrapolated baseline LR paired by seed, against the
per-seed differences computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from experiment_scripts import load_script


def _module():
    return load_script("experiments/baseline-rule/rule_regret.py")


def test_paired_regret_is_the_mean_per_seed_difference_with_a_t_interval():
    rule = {0: 6.24, 1: 6.25, 2: 6.30, 3: 6.21}
    search = {0: 6.23, 1: 6.41, 2: 6.28, 3: 6.26, 4: 6.5}  # seed 4 has no rule run: left out of the pairs
    rows = [{"side": "rule", "model": "bert", "scale": 128, "seed": s, "loss": v} for s, v in rule.items()]
    rows += [{"side": "search", "model": "bert", "scale": 128, "seed": s, "loss": v} for s, v in search.items()]
    out = _module().paired_regret(pd.DataFrame(rows)).iloc[0]
    d = np.array([rule[s] - search[s] for s in range(4)])
    se = d.std(ddof=1) / 2.0
    assert out["n_seeds"] == 4 and out["regret"] == pytest.approx(d.mean()) and out["se"] == pytest.approx(se)
    assert out["hi"] - out["regret"] == pytest.approx(3.182446 * se, rel=1e-5)  # t(0.975, df 3)
    assert out["lo"] == pytest.approx(2 * out["regret"] - out["hi"])


def test_one_seed_gives_no_interval():
    rows = [{"side": side, "model": "ut", "scale": 64, "seed": 0, "loss": v} for side, v in (("rule", 6.1),
                                                                                             ("search", 6.0))]
    out = _module().paired_regret(pd.DataFrame(rows)).iloc[0]
    assert out["n_seeds"] == 1 and out["regret"] == pytest.approx(0.1) and math.isnan(out["lo"])
