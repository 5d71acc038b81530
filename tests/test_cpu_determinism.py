"""A CPU training step repeats bit for bit with two torch threads, for every model: the same seed and data give the
same run, whatever ``train.threads`` is (a run-folder key leaves it out). PT's unary gather once summed repeated
tokens' gradients in a varying order with 2+ threads (``self.unary[ids]``: ``index_put_`` with accumulation), and
two runs of one config drifted apart by ~0.03 nats of context gain in 300 steps. Its gradient is also checked
against a Python loop over the tokens."""

from __future__ import annotations

import pytest
import torch

from ptsweep.config import compose
from ptsweep.models import build_model, mlm_loss
from ptsweep.models.pt import ProbabilisticTransformer

V, B, L = 8192, 16, 64  # the demo's shapes: the racing accumulation showed at them on every call (2 cores)
REPEATS = 6
MODELS = {  # model name -> overrides of preset=demo
    "pt": ["model=pt", "model.width=32", "model.scaling=rank"],
    "pt-channels": ["model=pt", "model.width=64"],
    "bert": ["model=bert"],
    "ut": ["model=ut"],
    "modernbert": ["model=modernbert"],
}


@pytest.fixture
def two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def _batch(seed: int = 1):
    """ids (B, L) with 15 % [MASK] (one id repeated ~150 times, as in training), labels on the masked tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, L), generator=g)
    masked = torch.rand(B, L, generator=g) < 0.15
    labels = torch.where(masked, ids, -100)
    return ids.masked_fill(masked, 4), torch.ones(B, L, dtype=torch.long), labels


def _gradients(model, ids, mask, labels) -> dict[str, torch.Tensor]:
    model.zero_grad()
    loss, _ = mlm_loss(model, ids, mask, labels)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {"<loss>": loss.detach().clone(), **grads}


@pytest.mark.parametrize("name", MODELS)
def test_training_step_repeats_with_two_threads(two_threads, name):
    torch.manual_seed(0)
    model = build_model(compose(["preset=demo", *MODELS[name]]).model, V, L)
    ids, mask, labels = _batch()
    assert torch.get_num_threads() == 2 and int((ids == 4).sum()) > 100  # the conditions the race needs
    first = _gradients(model, ids, mask, labels)
    assert len(first) > 5
    for _ in range(REPEATS):
        again = _gradients(model, ids, mask, labels)
        differing = [n for n in first if not torch.equal(first[n], again[n])]
        assert not differing, f"{name}: gradients differ between identical calls: {differing}"


def test_pt_initial_logits_gradient_is_the_sum_over_repeated_tokens(two_threads):
    """d/dS_w of sum(l^(0) * U) (l^(0) = m * S_w[ids]) is, per vocabulary row, the sum of U over that row's real
    tokens: a Python loop in float64 against the model's float32 gradient."""
    torch.manual_seed(0)
    model = build_model(compose(["preset=demo", *MODELS["pt"]]).model, V, L)
    assert isinstance(model, ProbabilisticTransformer)
    ids, _, _ = _batch()
    mask = torch.ones(B, L)
    mask[3, 40:] = 0  # pads get no gradient
    upstream = torch.randn(B, L, model.unary.shape[1], generator=torch.Generator().manual_seed(2))
    model.zero_grad()
    (model.initial_logits(ids, mask[..., None]) * upstream).sum().backward()
    expected = torch.zeros(model.unary.shape, dtype=torch.float64)
    for b in range(B):
        for i in range(L):
            if mask[b, i]:
                expected[ids[b, i]] += upstream[b, i].double()
    torch.testing.assert_close(model.unary.grad.double(), expected, rtol=1e-5, atol=1e-5)
    assert float(expected[4].abs().sum()) > 0  # the repeated [MASK] row summed ~150 tokens
