"""ptsweep/analysis/folder_table.py (study folders side by side, one variant each) against by-hand seed
means and percents and scipy's paired t interval."""

import statistics

import pytest
from scipy import stats

from ptsweep.analysis import folder_table
from test_weight_grid_script import _write

BASE = {0: 4.5665, 1: 4.5545, 2: 4.5695}
BASE_HIGH = {0: 4.6627, 1: 4.5907, 2: 4.5986}
FAST = {0: 4.5010, 1: 4.5062, 2: 4.5008}


@pytest.fixture()
def studies(tmp_path):
    base, fast = tmp_path / "base", tmp_path / "fast"
    for s in range(3):
        _write(base, s, BASE[s])
        _write(base, s, BASE_HIGH[s], lr=0.04)
        _write(fast, s, FAST[s])
    _write(fast, 0, 9.0, width=32)  # another width: left out
    return base, fast


def _row(lines: list[str], name: str, lr: str) -> list[str]:
    return next(line.removesuffix(" |").split(" | ") for line in lines if line.startswith(f"| {name} | {lr} |"))


def _interval(a: dict, b: dict) -> str:
    lo, hi = stats.ttest_rel([a[s] for s in range(3)], [b[s] for s in range(3)]).confidence_interval(0.95)
    return f"[{lo:+.3f}, {hi:+.3f}] (3)"


def test_each_folder_against_the_first_and_against_its_own_reference_eta(studies):
    lines = folder_table.table(list(studies), 128, 0.02)
    fast = _row(lines, "fast", "0.02")
    assert fast[2] == "4.5010 / 4.5062 / 4.5008" and fast[3] == f"{sum(FAST.values()) / 3:.4f} (3)"
    diff = sum(FAST[s] - BASE[s] for s in range(3)) / 3
    pct = 100 * diff / (sum(BASE.values()) / 3)
    se = statistics.stdev(FAST[s] - BASE[s] for s in range(3)) / 3 ** 0.5
    assert fast[5] == f"{diff:+.4f} ± {se:.4f} {_interval(FAST, BASE)}, {pct:+.1f} %"
    assert fast[6] == "-"  # its eta is the reference eta
    high = _row(lines, "base", "0.04")
    diff = sum(BASE_HIGH[s] - BASE[s] for s in range(3)) / 3
    assert high[5] == "-"  # the reference folder is not paired with itself
    assert high[6].startswith(f"{diff:+.4f} ± ") and high[6].endswith(f"{_interval(BASE_HIGH, BASE)}, +1.2 %")
    assert not any(line.startswith("| fast | 0.04 |") for line in lines)


def test_a_folder_with_two_variants_is_a_one_line_error(studies, capsys):
    base, _ = studies
    _write(base, 0, 4.53, w_unary=2.0)
    with pytest.raises(SystemExit) as e:
        folder_table.main([str(base), "--width", "128"])
    assert str(e.value).startswith(f"folder_table: {base} holds 2 variants at width 128")
    with pytest.raises(SystemExit) as e:
        folder_table.main([str(base / "missing")])
    assert str(e.value) == f"folder_table: no such study folder: {base / 'missing'}"


def test_variant_picks_one_variant_in_every_folder(studies, capsys):
    """A folder holding w_unary 1 and 2: --variant w_unary=2 keeps the 2s (paired with the first folder's 2s),
    'default' the runs that changed nothing; a malformed --variant is a one-line error."""
    base, fast = studies
    twos = {0: 4.53, 1: 4.52, 2: 4.55}
    fast_twos = {0: 4.50, 1: 4.53, 2: 4.52}
    for s in range(3):
        _write(base, s, twos[s], w_unary=2.0)
        _write(fast, s, fast_twos[s], w_unary=2.0)
    lines = folder_table.table([base, fast], 128, 0.02, folder_table.parse_variant("w_unary=2"))
    assert _row(lines, "base", "0.02")[3] == f"{sum(twos.values()) / 3:.4f} (3)"
    assert not any(line.startswith("| base | 0.04 |") for line in lines)  # the 0.04 runs are w_unary 1
    diff = sum(fast_twos[s] - twos[s] for s in range(3)) / 3
    assert _row(lines, "fast", "0.02")[5].startswith(f"{diff:+.4f} ± ")
    assert _row(lines, "fast", "0.02")[5].endswith(f"{_interval(fast_twos, twos)}, {100 * diff / 4.5333:+.1f} %")
    lines = folder_table.table([base, fast], 128, 0.02, folder_table.parse_variant("default"))
    assert _row(lines, "fast", "0.02")[2] == "4.5010 / 4.5062 / 4.5008"
    assert _row(lines, "base", "0.04")[3] == f"{sum(BASE_HIGH.values()) / 3:.4f} (3)"
    with pytest.raises(SystemExit) as e:
        folder_table.main([str(base), "--variant", "w_unary"])
    assert str(e.value) == "folder_table: --variant 'w_unary': expected field=value[,field=value] or 'default'"


def test_folders_joined_with_plus_are_one_study_and_may_not_overlap(studies, tmp_path):
    """A rule run through one option at eta* (folder 'fast') and another at 2 eta* (folder 'high'): its basin is
    high - fast paired by seed; joined with a folder holding the same (eta, seed), a one-line error."""
    base, fast = studies
    high = tmp_path / "high"
    for s in range(3):
        _write(high, s, BASE_HIGH[s], lr=0.04)
    lines = folder_table.table([base, folder_table.parse_study(f"{fast}+{high}")], 128, 0.02)
    row = _row(lines, "fast+high", "0.04")
    diff = sum(BASE_HIGH[s] - FAST[s] for s in range(3)) / 3
    pct = 100 * diff / (sum(FAST.values()) / 3)
    assert row[6].startswith(f"{diff:+.4f} ± ") and row[6].endswith(f"{_interval(BASE_HIGH, FAST)}, {pct:+.1f} %")
    assert row[5].lstrip("+-").startswith("0.0000 ± 0.0000")  # at 0.04 the joined study's runs are the base folder's
    assert _row(lines, "fast+high", "0.02")[2] == "4.5010 / 4.5062 / 4.5008"
    at = folder_table.table([folder_table.parse_study(f"{fast}@0.02+{base}@0.04")], 128, 0.02)  # each its one eta
    assert _row(at, "fast@0.02+base@0.04", "0.04")[6] == row[6]
    late = tmp_path / "late"  # more seeds of the same eta in another folder: merged
    _write(late, 3, 4.5100)
    merged = folder_table.table([folder_table.parse_study(f"{fast}+{late}")], 128, 0.02)
    assert _row(merged, "fast+late", "0.02")[2] == "4.5010 / 4.5062 / 4.5008 / 4.5100"
    with pytest.raises(SystemExit) as e:
        folder_table.main([f"{fast}+{base}"])
    assert str(e.value) == "folder_table: fast+base: eta 0.02 seed 0 is in two of its folders"
    with pytest.raises(SystemExit) as e:
        folder_table.main([f"{fast}+{tmp_path / 'none'}"])
    assert str(e.value) == f"folder_table: no such study folder: {tmp_path / 'none'}"
