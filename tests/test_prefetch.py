"""Batches built one step ahead on a background thread are today's ``data.train_batch``, bit for bit, also across
an interruption and resume of ``train.run``; the prefetcher's thread hands over errors and ends when closed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from ptsweep import data as D
from ptsweep import train
from ptsweep.config import compose
from ptsweep.tracking import LocalTracker
from ptsweep.train import loop
from ptsweep.train.prefetch import BatchPrefetcher


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def small(cache_dir: Path, out_dir: Path, *overrides: str):
    """Smoke preset on Shakespeare, V = 1000, 32-token blocks: a corpus of a few hundred blocks, so the run's batches
    cross an epoch boundary (two permutations)."""
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}", f"data.cache_dir={cache_dir}",
                    "data.max_train_tokens=12000", *overrides])


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k


@pytest.mark.parametrize("start", [0, 7])
def test_prefetched_batches_equal_train_batch(cache_dir: Path, tmp_path: Path, start: int) -> None:
    cfg = small(cache_dir, tmp_path)
    corpus = D.prepare(cfg.data)
    steps = 2 * corpus.train.shape[0] // cfg.train.batch_size + 3  # beyond the second epoch
    make = lambda s: D.train_batch(corpus, cfg.data, s, cfg.train.batch_size, cfg.seed)  # noqa: E731
    with BatchPrefetcher(make, start, steps) as pf:
        for s in range(start, steps):
            _assert_same(pf.get(s), make(s))
        with pytest.raises(RuntimeError, match="past the last step"):
            pf.get(steps)


def test_training_sees_train_batch_of_every_step_across_a_resume(cache_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The batches the loop trains on (recorded where it passes them to accumulate_gradients), stopped after 5 steps
    and resumed from the checkpoint, are train_batch(seed, step) for steps 0..15 in order."""
    seen: list[dict] = []
    real = loop.accumulate_gradients

    def recording(model, batch, *args):
        seen.append({k: v.clone() for k, v in batch.items()})
        return real(model, batch, *args)

    monkeypatch.setattr(loop, "accumulate_gradients", recording)
    cfg = small(cache_dir, tmp_path, "train.stop_after_steps=5", "model=bert", "train.eval_every=16")
    assert cfg.train.prefetch
    first = train.run(cfg, LocalTracker(), run_dir=tmp_path / "run")
    assert first["status"] == "stopped" and len(seen) == 5
    resumed = train.run(small(cache_dir, tmp_path, "train.resume=true", "model=bert", "train.eval_every=16"),
                        LocalTracker(), run_dir=tmp_path / "run")
    assert resumed["status"] == "ok" and resumed["start_step"] == 5
    steps = train.num_steps(cfg)
    assert len(seen) == steps == 16
    corpus = D.prepare(cfg.data)
    for s, got in enumerate(seen):
        _assert_same(got, D.train_batch(corpus, cfg.data, s, cfg.train.batch_size, cfg.seed))


def test_an_error_building_a_batch_is_raised_at_its_step() -> None:
    def make(s: int) -> dict:
        if s == 3:
            raise ValueError("bad block")
        return {"x": torch.full((2,), s)}

    with BatchPrefetcher(make, 0, 10) as pf:
        assert [int(pf.get(s)["x"][0]) for s in range(3)] == [0, 1, 2]
        with pytest.raises(ValueError, match="bad block"):
            pf.get(3)


def test_steps_must_be_taken_in_order() -> None:
    with BatchPrefetcher(lambda s: {"x": torch.tensor(s)}, 2, 5) as pf:
        with pytest.raises(RuntimeError, match="asked for step 3, next prepared step is 2"):
            pf.get(3)


def test_the_prefetcher_builds_depth_steps_ahead_and_its_thread_ends_when_closed() -> None:
    made: list[int] = []
    pf = BatchPrefetcher(lambda s: made.append(s) or {"x": torch.tensor(s)}, 0, 1000, depth=2)
    deadline = time.time() + 10
    while len(made) < 2 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert made == [0, 1]  # depth steps ahead, no further
    assert int(pf.get(0)["x"]) == 0
    while len(made) < 3 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert made == [0, 1, 2]  # one more once a batch is taken
    pf.close()
    assert not any(t.name.startswith("batch-prefetch") and t.is_alive() for t in threading.enumerate())
