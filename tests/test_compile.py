"""``train.compile``: the compiled encoder trains like the eager one (CPU, mode 'default'; 'reduce-overhead' needs
CUDA graphs and is refused on the CPU with one line); the setting's spellings."""

from __future__ import annotations

import pytest
import torch

from ptsweep.config import PTConfig, TrainConfig
from ptsweep.errors import ConfigError
from ptsweep.models import build_model
from ptsweep.parametrization import build_optimizer
from ptsweep.train import accumulate_gradients
from ptsweep.train.state import compile_encoder

V, B, L = 60, 4, 16


def _losses(mode: str, steps: int = 2) -> tuple[list[float], torch.nn.Module]:
    """Losses of ``steps`` AdamW steps of a small PT on fixed random batches. One MFVI iteration: inductor's CPU
    compile of the forward and backward graphs takes ~2 min per iteration on 2 loaded cores, and each iteration is
    the same code."""
    torch.manual_seed(0)
    model = build_model(PTConfig(width=32, base_width=32, base_channels=2, base_rank=4, n_iters=1), V, L)
    compile_encoder(model, mode, torch.device("cpu"))
    opt = build_optimizer(model, model.width, model.parametrization, lr=3e-3, device_type="cpu")
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        ids = torch.randint(5, V, (B, L), generator=g)
        labels = torch.where(torch.rand(B, L, generator=g) < 0.3, ids, torch.full_like(ids, -100))
        batch = {"input_ids": ids, "attention_mask": torch.ones(B, L, dtype=torch.bool), "labels": labels}
        opt.zero_grad(set_to_none=True)
        losses.append(float(accumulate_gradients(model, batch, 0, torch.device("cpu"), "fp32")))
        opt.step()
    return losses, model


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_compiled_encoder_losses_equal_the_eager_ones() -> None:
    eager, eager_model = _losses("none")
    compiled, model = _losses("default")
    assert not hasattr(eager_model.encode, "_torchdynamo_orig_callable")
    assert hasattr(model.encode, "_torchdynamo_orig_callable")  # really compiled: a dynamo-wrapped function
    assert eager[0] != eager[-1]  # the steps trained
    assert compiled == pytest.approx(eager, rel=1e-4)


def test_reduce_overhead_on_the_cpu_is_a_config_error() -> None:
    model = build_model(PTConfig(width=32, base_width=32, base_channels=2, base_rank=4, n_iters=1), V, L)
    with pytest.raises(ConfigError, match="train.compile=reduce-overhead needs a CUDA device"):
        compile_encoder(model, "reduce-overhead", torch.device("cpu"))


@pytest.mark.parametrize("value,mode", [(False, "none"), (True, "default"), ("none", "none"),
                                        ("default", "default"), ("reduce-overhead", "reduce-overhead")])
def test_compile_setting_spellings(value, mode) -> None:
    tc = TrainConfig(compile=value)
    tc.validate()
    assert tc.compile_mode == mode


def test_unknown_compile_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="train.compile"):
        TrainConfig(compile="max-speed").validate()
