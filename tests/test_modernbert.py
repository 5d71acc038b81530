"""ModernBERT-style baseline: shapes, the MLM loss against a brute-force cross-entropy, parameter counts and FLOPs
against the closed forms, rotary positions (relative, the only position signal), pre-LN structure, ModernBERT's init,
config errors, every preset composing with model=modernbert, width matching, and a short training run (CPU)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count
from transformers.models.modernbert.modeling_modernbert import (ModernBertAttention, ModernBertEncoderLayer,
                                                                ModernBertForMaskedLM, ModernBertMLP)

from ptsweep import train
from ptsweep.config import CONF_DIR, ModernBertConfig, PTConfig, compose, with_overrides
from ptsweep.errors import ConfigError
from ptsweep.models import build_model, mlm_logits, mlm_loss, sizing
from ptsweep.models.modernbert import ModernBertMLM
from ptsweep.parametrization import Role, build_optimizer, role_of
from ptsweep.tracking import LocalTracker

V = 500


def _model(d: int = 64, n_layers: int = 2, seed: int = 0, **kw) -> ModernBertMLM:
    torch.manual_seed(seed)
    return build_model(ModernBertConfig(width=d, n_layers=n_layers, max_positions=64, **kw), V, 32)


def _batch(b: int = 3, seq: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (b, seq), generator=g)
    labels = torch.full((b, seq), -100)
    pick = torch.rand(b, seq, generator=g) < 0.3
    pick[:, 0] = True
    labels[pick] = ids[pick]
    return ids, torch.ones(b, seq, dtype=torch.bool), labels


def test_forward_backward_shapes_and_every_parameter_gets_a_gradient():
    model = _model(64, 2)
    ids, mask, labels = _batch()
    hidden = model.encode(ids, mask)
    assert hidden.shape == (3, 16, 64)
    logits = mlm_logits(model, ids, mask, labels)
    assert logits.shape == (int((labels != -100).sum()), V)
    loss, n = mlm_loss(model, ids, mask, labels)
    loss.backward()
    assert n == logits.shape[0] and math.isfinite(loss.item())
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_mlm_loss_is_the_brute_force_masked_cross_entropy():
    """Loss = mean over labelled positions of -log softmax(logits)[target], with logits from the head at EVERY
    position (the head is position-wise), summed by a Python loop in float64."""
    model = _model(64, 2)
    ids, mask, labels = _batch(seed=3)
    loss, n = mlm_loss(model, ids, mask, labels)
    with torch.no_grad():
        hidden = model.encode(ids, mask)  # (B, L, d)
        all_logits = model.head(hidden.reshape(-1, 64)).reshape(3, 16, V).double()
    total, count = 0.0, 0
    for b in range(3):
        for i in range(16):
            if labels[b, i] != -100:
                row = all_logits[b, i]
                total += float(torch.logsumexp(row, 0) - row[labels[b, i]])
                count += 1
    assert n == count and loss.item() == pytest.approx(total / count, rel=1e-5)


@pytest.mark.parametrize("d,n_layers,d_ff,vocab", [(64, 1, 0, 500), (64, 3, 0, 777), (128, 2, 0, 1000),
                                                   (96, 2, 200, 500)])
def test_param_count_formula_matches_numel(d, n_layers, d_ff, vocab):
    cfg = ModernBertConfig(width=d, n_layers=n_layers, d_ff=d_ff, n_heads=d // 32, max_positions=64)
    model = build_model(cfg, vocab, 32)
    unique = sum(p.numel() for p in model.parameters())  # the tied decoder counted once
    counts = sizing.param_count(cfg, vocab)
    assert counts["total"] == unique
    assert counts["non_embedding"] == unique - model.embeddings.tok_embeddings.weight.numel()
    long = build_model(ModernBertConfig(width=d, n_layers=n_layers, d_ff=d_ff, n_heads=d // 32, max_positions=211),
                       vocab, 32)
    assert not any(211 in p.shape for p in long.parameters())  # rotary positions: no table
    assert sizing.param_count(long.cfg, vocab) == counts


def test_decoder_is_tied_to_the_token_table():
    """Rows of the token table that no input uses get a gradient only as the decoder: they must get one."""
    model = _model(64, 1)
    ids, mask, labels = _batch()
    ids = ids % 250  # inputs use rows 0..249 only
    labels[labels != -100] = 400
    mlm_loss(model, ids, mask, labels)[0].backward()
    grad = model.embeddings.tok_embeddings.weight.grad  # (V, d)
    assert grad[400].abs().sum() > 0 and grad[450].abs().sum() > 0  # the target row and any other row
    assert sum(p.numel() for p in model.parameters()) == sizing.param_count(model.cfg, V)["total"]


def test_analytic_flops_match_flop_counter():
    """FlopCounterMode counts the matmuls (2 x MACs); the CPU sdpa kernel, which it has no formula for, is counted
    with torch's own sdpa formula. Mask fraction exactly 0.25."""
    cfg = ModernBertConfig(width=64, n_layers=2, max_positions=64)
    model = build_model(cfg, V, 32)
    b, seq = 2, 32
    ids = torch.randint(0, V, (b, seq))
    labels = torch.full((b, seq), -100)
    labels[:, ::4] = ids[:, ::4]
    sdpa = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *args, **kw: sdpa_flop_count(q, k, v)}
    with FlopCounterMode(display=False, custom_mapping=sdpa) as counter:
        mlm_loss(model, ids, torch.ones(b, seq, dtype=torch.bool), labels)
    counts = counter.get_flop_counts()["Global"]
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu in counts  # attention was counted
    analytic = sizing.flops_per_token(cfg, V, seq, 0.25) / 3  # forward only
    assert counter.get_total_flops() / (b * seq) == pytest.approx(analytic, rel=1e-9)


def test_rotary_positions_break_permutation_equivariance(monkeypatch):
    """Without positions self-attention is permutation-equivariant: encode(ids[:, p]) = encode(ids)[:, p]. Rotary
    embeddings are ModernBERT's only position signal: with them the equality fails, with the rotation set to the
    identity (cos 1, sin 0) it holds."""
    model = _model(64, 2)
    ids, mask, _ = _batch(b=2, seq=12)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for layer in model.layers:  # sharper attention than at init (std 0.02: near-uniform), as after training
            layer.attn.Wqkv.weight.mul_(30.0)
        gap = (model.encode(ids[:, perm], mask) - model.encode(ids, mask)[:, perm]).abs().max().item()
    assert gap > 1e-2
    rotary_forward = model.rotary.forward

    def identity_rotation(x, position_ids, layer_type):
        cos, sin = rotary_forward(x, position_ids, layer_type)
        return torch.ones_like(cos), torch.zeros_like(sin)

    monkeypatch.setattr(model.rotary, "forward", identity_rotation)
    with torch.no_grad():
        gap0 = (model.encode(ids[:, perm], mask) - model.encode(ids, mask)[:, perm]).abs().max().item()
    assert gap0 < 1e-5


def test_rotary_is_relative_so_left_padding_changes_nothing():
    """Rotary attention depends on i - j only: shifting a sequence right by padding on the left (pads masked as keys)
    leaves every real token's hidden state unchanged. So does padding on the right."""
    model = _model(64, 2)
    ids, _, _ = _batch(b=1, seq=10, seed=5)
    pad = torch.zeros(1, 4, dtype=torch.long)
    keep = torch.ones(1, 10, dtype=torch.bool)
    drop = torch.zeros(1, 4, dtype=torch.bool)
    with torch.no_grad():
        plain = model.encode(ids, keep)
        left = model.encode(torch.cat([pad, ids], 1), torch.cat([drop, keep], 1))[:, 4:]
        right = model.encode(torch.cat([ids, pad], 1), torch.cat([keep, drop], 1))[:, :10]
    torch.testing.assert_close(left, plain, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(right, plain, atol=1e-5, rtol=1e-5)


def test_pre_ln_structure():
    """Each layer is x + Attn(LN(x)) then + MLP(LN(.)) (the first layer's attention reads the normed embedding
    directly), and the hidden states leave through a final LN (gain 1 at init: mean 0, variance 1 per token)."""
    model = _model(64, 3)
    assert all(isinstance(layer, ModernBertEncoderLayer) for layer in model.layers)
    assert isinstance(model.layers[0].attn_norm, torch.nn.Identity)
    seen: dict[str, list] = {"attn": [], "mlp": [], "layer": []}
    for layer in model.layers:
        layer.attn.register_forward_hook(lambda m, a, kw, out: seen["attn"].append((a[0], out[0])), with_kwargs=True)
        layer.mlp.register_forward_hook(lambda m, a, out: seen["mlp"].append((a[0], out)))
        layer.register_forward_hook(lambda m, a, out: seen["layer"].append((a[0], out)))
    ids, mask, _ = _batch()
    with torch.no_grad():
        out = model.encode(ids, mask)
        emb = model.embeddings(input_ids=ids)
    for i, layer in enumerate(model.layers):
        x, y = seen["layer"][i]
        attn_in, attn_out = seen["attn"][i]
        mlp_in, mlp_out = seen["mlp"][i]
        torch.testing.assert_close(attn_in, layer.attn_norm(x))  # pre-LN: the sublayer reads LN(x), not x
        torch.testing.assert_close(mlp_in, layer.mlp_norm(x + attn_out))
        torch.testing.assert_close(y, x + attn_out + mlp_out)  # the residual stream itself is never normed
    torch.testing.assert_close(seen["layer"][0][0], emb)
    torch.testing.assert_close(out, model.final_norm(seen["layer"][-1][1]))
    assert out.mean(-1).abs().max() < 1e-5 and (out.var(-1, unbiased=False) - 1).abs().max() < 1e-3


def test_roles_and_optimizer_groups_follow_bert():
    model = _model(64, 2)
    roles = {n: role_of(p) for n, p in model.named_parameters()}
    assert roles["embeddings.tok_embeddings.weight"] is Role.INPUT and roles["decoder_bias"] is Role.BIAS
    assert roles["layers.1.attn.Wqkv.weight"] is Role.HIDDEN and roles["final_norm.weight"] is Role.GAIN
    assert set(roles.values()) == {Role.INPUT, Role.HIDDEN, Role.GAIN, Role.BIAS}
    opt = build_optimizer(model, 64, "sp", 1e-3)
    assert {g["role"] for g in opt.param_groups} == {"input", "hidden", "gain", "bias"}
    assert all(g["lr_mult"] == 1.0 for g in opt.param_groups)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))


def test_sp_init_is_modernberts_own():
    """Every projection has the std Hugging Face's ModernBertForMaskedLM initialises it with (0.02 for Wqkv and MLP
    Wi, 0.02 / sqrt(2 L) for the residual writers), truncated at 2 std; embedding 0.02; LN gains 1."""
    model = _model(128, 2, seed=0)
    torch.manual_seed(1)
    reference = ModernBertForMaskedLM(model.hf_config)
    ours = dict(model.named_parameters())
    theirs = dict(reference.model.named_parameters())
    for name, p in theirs.items():
        if p.dim() == 2:
            assert ours[name].std().item() == pytest.approx(p.std().item(), rel=0.08), name
            assert ours[name].abs().max().item() <= 2 * 0.02 + 1e-7, name
        else:
            assert torch.equal(ours[name], p), name  # LN gains: ones
    trunc = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2)))  # N(0,1) cut at 2
    for m in model.modules():
        if isinstance(m, (ModernBertAttention, ModernBertMLP)):
            assert m.Wo.weight.std().item() == pytest.approx(trunc * 0.02 / math.sqrt(4), rel=0.08)
    assert model.head_transform.dense.weight.std().item() == pytest.approx(
        reference.head.dense.weight.std().item(), rel=0.08)
    assert (model.decoder_bias == 0).all()


@pytest.mark.parametrize("overrides, key", [
    (["model.width=100", "model.n_heads=8"], "model.n_heads"),
    (["model.width=96", "model.n_heads=32"], "model.n_heads"),  # head dim 3: odd, rotary needs pairs
    (["model.width=65"], "model.width"),                         # d_ff = 3 d / 2 is fractional
    (["model.d_ff=-1"], "model.d_ff"),
    (["model.rope_theta=1.0"], "model.rope_theta"),
    (["model.parametrization=mup"], "model.parametrization"),
    (["model.scaling=rank"], "model.scaling"),                   # a PT key
])
def test_impossible_shapes_are_one_line_errors(overrides, key):
    with pytest.raises(ConfigError) as e:
        compose(["model=modernbert", *overrides])
    assert str(e.value).startswith(key) and "\n" not in str(e.value)


def test_odd_default_head_dim_and_short_position_budget_are_one_line_errors():
    with pytest.raises(ValueError, match="odd head dim 65"):
        build_model(ModernBertConfig(width=130, n_layers=1), V, 32)  # default heads: 2 of 65
    with pytest.raises(ValueError, match="max_positions=16"):
        build_model(ModernBertConfig(width=64, n_layers=1, max_positions=16), V, 32)


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF_DIR / "preset").glob("*.yaml")))
def test_model_modernbert_composes_with_every_preset(preset):
    cfg = compose([f"preset={preset}", "model=modernbert"])
    assert type(cfg.model) is ModernBertConfig and cfg.model.name == "modernbert"
    assert cfg.model.max_positions >= cfg.data.seq_len
    with torch.device("meta"):
        model = build_model(cfg.model, cfg.data.vocab_size, cfg.data.seq_len)
    assert sum(p.numel() for p in model.parameters()) == sizing.param_count(cfg.model, cfg.data.vocab_size)["total"]


# ------------------------------------------------------------------------------------------------------------------
# Width matching and the sizing table
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["demo", "paper"])
def test_match_shape_is_the_closest_rule_shape_and_the_table_counts_the_built_model(preset):
    """Brute force over every rule shape (d = 64 h, h <= L <= 2h, h <= 16): none is closer than match_shape's; the
    sizing table's ModernBERT rows are the counts of the model built on the meta device."""
    cfg = compose([f"preset={preset}", "model.scaling=rank"] if preset == "demo" else [f"preset={preset}"])
    vocab, seq = cfg.data.vocab_size, cfg.data.seq_len
    scales = cfg.sweep.scales[:4]
    for match in sizing.MATCH_KEYS:
        for s in scales:
            pt = with_overrides(cfg, {"model.width": s}).model
            target = sizing.measure(pt, match, vocab, seq)
            errors = {(h, n): abs(math.log(sizing.measure(ModernBertConfig(width=64 * h, n_layers=n, n_heads=h),
                                                          match, vocab, seq) / target))
                      for h in range(1, 17) for n in range(h, 2 * h + 1)}
            try:
                got = sizing.match_shape("modernbert", pt, vocab, seq, match=match)
            except ValueError as e:  # refused: no rule shape within the factor (demo's width 32 by non-embedding)
                assert min(errors.values()) > math.log1p(sizing.MAX_MISMATCH) and "modernbert" in str(e)
                continue
            assert type(got) is ModernBertConfig and got.width == 64 * got.n_heads
            assert got.n_heads <= got.n_layers <= 2 * got.n_heads
            assert errors[(got.n_heads, got.n_layers)] == pytest.approx(min(errors.values()), abs=1e-12)
    rows = sizing.sizing_table(cfg.model, scales, vocab, seq, models=("pt", "modernbert"))
    assert [r["model"] for r in rows] == ["pt", "modernbert"] * len(scales)
    for r in rows[1::2]:
        mc = ModernBertConfig(width=r["width"], n_layers=r["n_layers"], n_heads=r["n_heads"])
        with torch.device("meta"):
            model = build_model(mc, vocab, seq)
        total = sum(p.numel() for p in model.parameters())
        table = model.embeddings.tok_embeddings.weight.numel()
        assert (r["params"], r["non_embedding_params"]) == (total, total - table)


def test_demo_shapes_and_width_matching_at_fixed_depth():
    """The demo's matched shapes (rank paradigm, V 8192, blocks of 64): PT width 32 -> d 64, L 1; 64 -> d 128, L 2;
    match_width finds a fixed-depth width within 5 %; an unknown kind names the known ones."""
    cfg = compose(["preset=demo", "model.scaling=rank"])
    shapes = [sizing.match_shape("modernbert", with_overrides(cfg, {"model.width": w}).model, 8192, 64)
              for w in (32, 64)]
    assert [(m.width, m.n_layers, m.n_heads) for m in shapes] == [(64, 1, 1), (128, 2, 2)]
    pt = PTConfig(width=256)
    mc = sizing.match_width("modernbert", pt, 30522, n_layers=4)
    assert type(mc) is ModernBertConfig
    assert sizing.param_count(mc, 30522)["total"] / sizing.param_count(pt, 30522)["total"] == pytest.approx(1, abs=.05)
    with pytest.raises(ValueError, match="modernbert"):
        sizing.match_shape("gpt", pt, 30522, 128)
    info = sizing.describe(ModernBertConfig(width=128, n_layers=2), 8192, 64)
    assert info["d_ff"] == 192 and info["n_heads"] == 2 and info["shared_layer"] is False


# ------------------------------------------------------------------------------------------------------------------
# Training through ptsweep.train
# ------------------------------------------------------------------------------------------------------------------
def test_short_training_run_lowers_validation_loss(cache_dir: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cfg = compose(["preset=smoke", "model=modernbert", "tracker=disabled", f"out_dir={tmp_path}",
                   f"data.cache_dir={cache_dir}", "data.vocab_size=2000", "data.seq_len=64",
                   "data.max_train_tokens=400000", "data.max_val_blocks=16", "optim.lr=2e-3", "train.tokens=40000",
                   "train.batch_size=8", "train.eval_every=1000000", "train.log_every=10"])
    m = train.run(cfg, LocalTracker())
    assert m["status"] == "ok", m
    assert m["val_loss"] < 0.9 * m["val_loss_init"], (m["val_loss_init"], m["val_loss"])
    assert m["params"] == sizing.param_count(cfg.model, m["vocab_size"])["total"]  # the run trained this model
    assert m["flops_per_token"] == sizing.flops_per_token(cfg.model, m["vocab_size"], 64, cfg.data.mask_prob)


# ------------------------------------------------------------------------------------------------------------------
# scaling-curves (Ray, smoke size)
# ------------------------------------------------------------------------------------------------------------------
def test_scaling_curves_matches_searches_and_trains_modernbert(tmp_path: Path, ray_local, monkeypatch) -> None:
    """sweep.models=[modernbert] at smoke scales 64 and 128: at 64 no rule shape is within a factor 1.5 of PT's
    count (a failed row with the refusal); at 128 the matched shape is searched and trained as ModernBERT."""
    import json

    import pandas as pd

    from ptsweep.sweeps import scaling_curves

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.models=[modernbert]",
                   "sweep.scales=[64,128]", "sweep.baseline.lr_widen=0"])
    sdir = scaling_curves.run(cfg)
    runs = pd.read_parquet(sdir / "runs.parquet").set_index("scale")
    assert list(runs["model"]) == ["modernbert", "modernbert"]
    assert runs.loc[64, "status"] == "failed" and "no modernbert shape" in runs.loc[64, "error"]
    row = runs.loc[128]
    assert row["status"] == "ok" and math.isfinite(row["test_loss"])
    pt = with_overrides(cfg, {"model.width": 128}).model
    vocab = cfg.data.vocab_size  # smoke's WordPiece: V = 1000
    shape = sizing.match_shape("modernbert", pt, vocab, cfg.data.seq_len)
    assert (row["width"], row["n_layers"], row["n_heads"]) == (shape.width, shape.n_layers, shape.n_heads)
    assert row["params"] == sizing.param_count(shape, vocab)["total"]
    trial = json.loads((sdir / "trials" / row["trial_key"] / "trial.json").read_text())
    assert trial["overrides"]["model.name"] == "modernbert"
    assert set(pd.read_parquet(sdir / "lr_search.parquet")["model"]) == {"modernbert"}
