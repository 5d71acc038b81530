"""The PT controls (named configs model=pt_no_inference / pt_no_child / pt_no_head / pt_no_topic): each
removes exactly what it says, checked by what the output can depend on (an independent property, not the code path)."""

from __future__ import annotations

import pytest
import torch

from ptsweep.config import PTConfig, compose
from ptsweep.models.pt import ProbabilisticTransformer

VOCAB = 50


def _model(**kw) -> ProbabilisticTransformer:
    torch.manual_seed(0)
    return ProbabilisticTransformer(PTConfig(width=64, **kw), VOCAB).double()


def _encode_pair(model, pos: int = 3, other: int = 7):
    """Encoder outputs of two sequences that differ only at position ``other``, read at position ``pos``."""
    ids = torch.randint(5, VOCAB, (1, 12))
    ids2 = ids.clone()
    ids2[0, other] = (ids[0, other] + 1 - 5) % (VOCAB - 5) + 5
    mask = torch.ones_like(ids, dtype=torch.bool)
    return model.encode(ids, mask)[0, pos], model.encode(ids2, mask)[0, pos]


@pytest.mark.parametrize("cfg", [{"n_iters": 0}, {"messages_off": ("child", "head")}])
def test_controls_without_ternary_messages_cannot_see_context(cfg) -> None:
    a, b = _encode_pair(_model(**cfg))
    assert torch.equal(a, b)


def test_full_pt_and_single_path_controls_do_see_context() -> None:
    for cfg in ({}, {"messages_off": ("child",)}, {"messages_off": ("head",)}, {"messages_off": ("topic",)}):
        a, b = _encode_pair(_model(**cfg))
        assert (a - b).abs().max() > 1e-6, cfg


def test_no_inference_output_is_the_unary() -> None:
    model = _model(n_iters=0)
    ids = torch.randint(5, VOCAB, (2, 9))
    assert torch.equal(model.encode(ids, torch.ones_like(ids, dtype=torch.bool)), model.unary[ids])


@pytest.mark.parametrize("path,param", [("topic", "B"), ("child", None), ("head", None)])
def test_switched_off_path_contributes_nothing(path: str, param: str | None) -> None:
    """The output equals a hand-built sum of the other messages of the same MFVI (one iteration, damped towards the
    initial logits l^(0) = S_w by the default beta of muP), and with the topic path off, B receives no gradient."""
    model = _model(n_iters=1, messages_off=(path,))
    ids = torch.randint(5, VOCAB, (1, 10))
    mask = torch.ones_like(ids, dtype=torch.bool)
    trace = model.inspect(ids, mask)
    beta = model.cfg.z_damping
    assert beta == 0.5                                     # the muP default this test pins
    new = sum(trace[0][f"msg_{m}"] for m in ("unary", "child", "head", "topic") if m != path)
    expected = beta * model.unary[ids] + (1 - beta) * new
    torch.testing.assert_close(trace[0]["z_logits"], expected)
    if param:
        model.encode(ids, mask).sum().backward()
        grad = getattr(model, param).grad
        assert grad is None or torch.count_nonzero(grad) == 0


@pytest.mark.parametrize("name,want", [("pt_no_inference", {"n_iters": 0}),
                                       ("pt_no_child", {"messages_off": ("child",)}),
                                       ("pt_no_head", {"messages_off": ("head",)}),
                                       ("pt_no_topic", {"messages_off": ("topic",)})])
def test_named_control_configs_compose(name: str, want: dict) -> None:
    cfg = compose([f"model={name}", "tracker=disabled"])
    base = compose(["model=pt", "tracker=disabled"])
    for key, value in want.items():
        assert tuple(getattr(cfg.model, key)) == tuple(value) if isinstance(value, tuple) else \
            getattr(cfg.model, key) == value
    assert cfg.model.name == "pt" and cfg.model.width == base.model.width
