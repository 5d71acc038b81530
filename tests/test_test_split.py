"""The held-out test split: disjoint from validation, fixed masks, scored at the end of every finished run."""

from __future__ import annotations

import math

import numpy as np

from ptsweep import data
from ptsweep.config import compose


def test_split_test_blocks_rule():
    assert data.split_test_blocks(100, 32, 16) == 16
    assert data.split_test_blocks(40, 32, 16) == 8     # validation keeps priority
    assert data.split_test_blocks(20, 32, 16) == 0
    assert data.split_test_blocks(100, 32, 0) == 0


def test_test_blocks_are_disjoint_from_validation_and_masks_are_fixed(tmp_path):
    cfg = compose(["preset=smoke", "data.max_val_blocks=16", "data.max_test_blocks=8"])
    c = data.prepare(cfg.data)
    assert c.val.shape[0] == 16 and c.test.shape[0] == 8
    val_rows = {bytes(np.asarray(r)) for r in c.val}
    assert not any(bytes(np.asarray(r)) in val_rows for r in c.test)
    train_rows = {bytes(np.asarray(r)) for r in np.asarray(c.train)[:2000]}
    assert not any(bytes(np.asarray(r)) in train_rows for r in c.test)
    a = data.test_batches(c, cfg.data, 4)
    c._memo.clear()
    b = data.test_batches(c, cfg.data, 4)
    assert len(a) == 2 and all((x["labels"] == y["labels"]).all() for x, y in zip(a, b))
    # without a test split nothing changes: the validation blocks are the same
    cfg0 = compose(["preset=smoke", "data.max_val_blocks=16", "data.max_test_blocks=0"])
    c0 = data.prepare(cfg0.data)
    assert c0.test.shape[0] == 0 and data.test_batches(c0, cfg0.data, 4) == []
    assert (np.asarray(c0.val) == np.asarray(c.val)).all()


def test_finished_run_reports_test_loss(tmp_path):
    from ptsweep import train
    from ptsweep.tracking import make_tracker

    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "train.tokens=1024",
                   "train.eval_batches=1", "data.max_val_blocks=16", "data.max_test_blocks=8"])
    m = train.run(cfg, make_tracker(cfg.tracker), run_dir=tmp_path / "r")
    assert m["status"] == "ok" and math.isfinite(m["test_loss"]) and m["test_loss_se"] > 0
    assert m["test_blocks"] == 8 and m["val_blocks"] == 16  # the final validation uses every block, not 1 batch
    assert math.isfinite(m["test_unigram_loss"]) and math.isfinite(m["val_loss_subset"])
    assert m["test_gain_over_unigram"] == m["test_unigram_loss"] - m["test_loss"] or abs(
        m["test_gain_over_unigram"] - (m["test_unigram_loss"] - m["test_loss"])) < 1e-9
