"""The run planner: its PT memory model against measured saved-tensor bytes, micro-batch choice, paper plan."""

import pytest
import torch

from ptsweep import planner
from ptsweep.cli import main
from ptsweep.config import PTConfig, compose
from ptsweep.models import build_model, mlm_loss


def _saved_bytes_per_seq(cfg, vocab, length, batches=(1, 3), frac=0.15):
    """Unique storages autograd saves in one forward (saved_tensors_hooks), difference between two batch sizes."""
    out = []
    for bsz in batches:
        torch.manual_seed(0)
        model = build_model(cfg, vocab, length)
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(5, vocab, (bsz, length), generator=g)
        labels = torch.full_like(ids, -100)
        labels[:, : round(frac * length)] = ids[:, : round(frac * length)]
        seen = {}

        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                seen[st.data_ptr()] = st.nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss, _ = mlm_loss(model, ids, torch.ones_like(ids, dtype=torch.bool), labels)
        del loss
        out.append(sum(seen.values()))
    return (out[1] - out[0]) / (batches[1] - batches[0])


@pytest.mark.parametrize("width,length,impl", [(128, 64, "blockwise"), (256, 128, "blockwise"), (128, 32, "dense"),
                                               (256, 128, "auto")])
def test_pt_saved_memory_model_within_15_percent(width, length, impl):
    cfg = PTConfig(width=width, attention_impl=impl)
    vocab = 1000
    measured = _saved_bytes_per_seq(cfg, vocab, length)
    predicted = planner.activation_bytes(cfg, vocab, length, mask_prob=round(0.15 * length) / length)["saved"]
    assert abs(predicted - measured) <= 0.15 * measured, (predicted, measured)


def test_micro_batch_is_the_largest_even_split_that_fits():
    gb = 1e9
    assert planner.micro_batch(256, 0.1 * gb, 10 * gb, 80) == 256          # 25.6 GB of activations fit in 72 - 10
    assert planner.micro_batch(256, 0.5 * gb, 10 * gb, 80) == 86           # 3 micro-batches of <= 86 rows
    assert planner.micro_batch(256, 100 * gb, 10 * gb, 80) == 0            # not even one sequence


def test_paper_plan_covers_three_sweeps_and_width_3072_fits_80gb(capsys):
    cfg = compose(["preset=paper"])
    rows = planner.plan(cfg, gpu_mem_gb=80.0)
    assert {r.sweep for r in rows} == set(planner.SWEEPS)
    big = [r for r in rows if r.model == "pt" and r.width == 3072]
    assert big and all(r.micro_batch >= 1 for r in big)
    assert all(r.static_bytes + r.micro_batch * r.act_per_seq_bytes <= 80e9 for r in big)
    assert all(r.gpu_hours > 0 for r in rows)
    # verify-transfer: 3 seeds of the base point + n_required(0.05, 0.05) = 59 perturbed points
    assert sum(r.count for r in rows if r.sweep == "verify-transfer") == 3 + 59
    assert main(["plan", "preset=paper", "sweep=verify-transfer", "--gpu-mem", "40"]) == 0
    out = capsys.readouterr().out
    assert "verify-transfer:" in out and "GPU-hours" in out and "tune-small:" not in out
    assert "MFU 0.3" in out and "989" in out


def test_unknown_sweep_is_a_one_line_error(capsys):
    assert main(["plan", "--sweep", "nope"]) == 2
    assert "sweep: unknown sweep 'nope'" in capsys.readouterr().err
