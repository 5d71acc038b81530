"""BERT / UT baselines and the sizing module: exact parameter counts, weight sharing, width matching, muP roles,
padding invariance, a training sanity check and the analytic FLOP count (CPU, tiny widths)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.bert.modeling_bert import BertLayer, BertSelfAttention

from ptsweep.config import BertConfig, PTConfig, UTConfig, from_dict
from ptsweep.models import build_model, mlm_loss
from ptsweep.models import sizing
from ptsweep.models.bert import BertMLM, UniversalTransformerMLM
from ptsweep.parametrization import Role, build_optimizer, role_of

V = 500
CONF = Path(__file__).resolve().parents[1] / "conf" / "model"


def _cfg(kind: str, d: int = 64, n_layers: int = 2, **kw):
    return {"bert": BertConfig, "ut": UTConfig}[kind](width=d, n_layers=n_layers, max_positions=64, **kw)


def _batch(b: int = 4, seq: int = 16, vocab: int = V, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (b, seq), generator=g)
    mask = torch.ones(b, seq, dtype=torch.bool)
    labels = torch.full((b, seq), -100)
    pick = torch.rand(b, seq, generator=g) < 0.3
    pick[:, 0] = True
    labels[pick] = ids[pick]
    return ids, mask, labels


def _pt_formula(cfg: PTConfig, vocab: int) -> int:
    """P_PT = 2VN + V + N + 2 K C r N + M N (spec §9)."""
    n = cfg.width
    return 2 * vocab * n + vocab + n + 2 * cfg.n_classes * cfg.channels * cfg.rank * n + cfg.topics * n


@pytest.mark.parametrize("kind", ["bert", "ut"])
@pytest.mark.parametrize("d,n_layers,vocab", [(64, 1, 500), (64, 3, 500), (96, 2, 777), (160, 4, 1000)])
def test_param_count_formula_matches_numel(kind, d, n_layers, vocab):
    cfg = _cfg(kind, d, n_layers)
    model = build_model(cfg, vocab, max_len=32)
    unique = sum(p.numel() for p in model.parameters())  # parameters() deduplicates the tied decoder
    counts = sizing.param_count(cfg, vocab)
    assert counts["total"] == unique
    tables = model.embeddings.word_embeddings.weight.numel() + model.embeddings.position_embeddings.weight.numel() \
        + model.embeddings.token_type_embeddings.weight.numel()
    assert counts["non_embedding"] == unique - tables


def test_decoder_is_tied_to_word_embedding():
    model = BertMLM(_cfg("bert"), V, 32)
    h = torch.randn(3, 64)
    before = model.head(h)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[7] += 1.0
    after = model.head(h)
    changed = (after - before).abs().amax(0) > 0
    assert changed[7] and changed.sum() == 1


def test_ut_shares_one_layer():
    cfg = _cfg("ut", 64, n_layers=3)
    model = UniversalTransformerMLM(cfg, V, 32)
    layers = [m for m in model.modules() if isinstance(m, BertLayer)]
    assert len(layers) == 1
    one_layer = sum(p.numel() for p in layers[0].parameters())
    assert one_layer == 12 * 64 * 64 + 13 * 64
    calls = []
    layers[0].register_forward_hook(lambda *_: calls.append(1))
    ids, mask, _ = _batch()
    with torch.no_grad():
        ref = model.encode(ids, mask)
        assert len(calls) == 3  # the same module object runs at every step
        layers[0].intermediate.dense.weight.mul_(1.5)
        assert not torch.allclose(model.encode(ids, mask), ref)
    # More steps: more FLOPs, same parameters except the timestep table (one row of d per step).
    deep = _cfg("ut", 64, n_layers=7)
    assert sizing.param_count(deep, V)["total"] - sizing.param_count(cfg, V)["total"] == 4 * 64
    assert sizing.flops_per_token(deep, V, 128) > sizing.flops_per_token(cfg, V, 128)
    assert sizing.flops_per_token(deep, V, 128) == sizing.flops_per_token(_cfg("bert", 64, 7), V, 128)


@pytest.mark.parametrize("vocab", [30522, 8192])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
@pytest.mark.parametrize("kind", ["bert", "ut"])
def test_match_width_within_5_percent(kind, scaling, vocab):
    for w in (64, 256, 512, 1024):
        target = _pt_formula(PTConfig(width=w, scaling=scaling), vocab)
        cfg = sizing.match_width_to_count(kind, target, vocab)
        assert isinstance(cfg, UTConfig if kind == "ut" else BertConfig)
        assert cfg.width % sizing.WIDTH_STEP == 0 and cfg.n_layers == 4
        got = sizing.param_count(cfg, vocab)["total"]
        assert abs(got / target - 1) <= 0.05
        for d in (cfg.width - sizing.WIDTH_STEP, cfg.width + sizing.WIDTH_STEP):  # closest on the grid
            other = sizing.param_count(type(cfg)(width=d, n_layers=4), vocab)["total"]
            assert abs(other - target) >= abs(got - target)


def test_match_width_uses_pt_param_count():
    pt = pytest.importorskip("ptsweep.models.pt")
    if not hasattr(pt, "pt_param_count"):
        pytest.skip("ptsweep.models.pt.pt_param_count not available yet")
    for w in (64, 256):
        pt_cfg = PTConfig(width=w)
        assert sizing.param_count(pt_cfg, 30522)["total"] == _pt_formula(pt_cfg, 30522)
        assert sizing.match_width("bert", pt_cfg, 30522) == sizing.match_width_to_count(
            "bert", _pt_formula(pt_cfg, 30522), 30522)


def test_match_width_impossible_raises():
    with pytest.raises(ValueError, match="within 5%"):
        sizing.match_width_to_count("bert", 1000, 30522)  # smaller than any BERT with this vocabulary
    with pytest.raises(ValueError, match="kind"):
        sizing.match_width_to_count("gpt", 10**6, 30522)


def test_default_heads_rule():
    assert [sizing.default_heads(d) for d in (32, 64, 96, 128, 256, 352, 360, 768, 1024)] == \
        [1, 1, 1, 2, 4, 4, 5, 12, 16]
    model = BertMLM(_cfg("bert", 128), V, 32)
    attn = [m for m in model.modules() if isinstance(m, BertSelfAttention)]
    assert all(m.num_attention_heads == 2 for m in attn)
    model = BertMLM(_cfg("bert", 128, n_heads=4), V, 32)
    assert all(m.num_attention_heads == 4 for m in model.modules() if isinstance(m, BertSelfAttention))


@pytest.mark.parametrize("kind", ["bert", "ut"])
def test_roles_and_optimizer(kind):
    sp = build_model(_cfg(kind, 64), V, 32)
    roles = {role_of(p) for p in sp.parameters()}  # raises if any parameter lacks a role
    assert roles == {Role.INPUT, Role.GAIN, Role.BIAS, Role.HIDDEN}
    assert role_of(sp.embeddings.word_embeddings.weight) is Role.INPUT
    opt = build_optimizer(sp, sp.width, sp.parametrization, lr=1e-3)
    assert all(g["lr_mult"] == 1.0 for g in opt.param_groups)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(sp.parameters()))
    attn = [m for m in sp.modules() if isinstance(m, BertSelfAttention)]
    assert all(m.scaling == m.attention_head_size ** -0.5 for m in attn)  # SP keeps HF's scale
    assert sp.logit_scale == 1.0

    mup = build_model(_cfg(kind, 64, parametrization="mup"), V, 32)
    opt = build_optimizer(mup, mup.width, mup.parametrization, lr=1e-3)
    mults = {g["role"]: g["lr_mult"] for g in opt.param_groups}
    assert mults["hidden"] == pytest.approx(1 / 64) and mults["input"] == 1.0
    assert all(m.scaling == 1.0 / m.attention_head_size for m in mup.modules() if isinstance(m, BertSelfAttention))
    w = mup.layers[0].intermediate.dense.weight if kind == "bert" else mup.layer.intermediate.dense.weight
    assert w.std().item() == pytest.approx(64 ** -0.5, rel=0.1)


def test_sp_init_is_hf_init():
    torch.manual_seed(0)
    model = BertMLM(_cfg("bert", 128), V, 32)
    assert model.layers[0].attention.self.query.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.embeddings.word_embeddings.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert torch.all(model.layers[0].output.LayerNorm.weight == 1)
    assert torch.all(model.decoder_bias == 0) and torch.all(model.layers[0].output.dense.bias == 0)


@pytest.mark.parametrize("kind", ["bert", "ut"])
def test_encode_head_shapes_and_padding_invariance(kind):
    model = build_model(_cfg(kind, 64), V, 32).eval()
    ids, mask, _ = _batch(b=3, seq=12)
    mask[1, 8:] = False
    mask[2, 5:] = False
    with torch.no_grad():
        h = model.encode(ids, mask)
        assert h.shape == (3, 12, 64)
        assert model.head(h[mask]).shape == (int(mask.sum()), V)
        other = ids.clone()
        other[~mask] = (other[~mask] + 17) % V  # change the padding tokens only
        h2 = model.encode(other, mask)
        assert torch.allclose(h[mask], h2[mask], atol=1e-5)
        short = model.encode(ids[2:3, :5], mask[2:3, :5])  # the same sequence without padding
        assert torch.allclose(short[0], h[2, :5], atol=1e-5)


def test_max_len_beyond_position_table_raises():
    with pytest.raises(ValueError, match="max_positions"):
        BertMLM(_cfg("bert"), V, max_len=65)


@pytest.mark.parametrize("kind", ["bert", "ut"])
def test_few_steps_reduce_mlm_loss(kind):
    torch.manual_seed(0)
    model = build_model(_cfg(kind, 64), V, 32)
    ids, mask, labels = _batch(b=8, seq=16)
    opt = build_optimizer(model, model.width, model.parametrization, lr=3e-3)
    losses = []
    for _ in range(15):
        loss, n = mlm_loss(model, ids, mask, labels)
        assert n == int((labels != -100).sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.parametrize("kind", ["bert", "ut"])
def test_analytic_flops_match_flop_counter(kind):
    """FlopCounterMode counts matmuls (2 x MACs), as does the formula; softmax/LN/GELU/biases are excluded by both.
    The counter has no formula for the CPU sdpa kernel, so the count runs with HF's eager attention (full mask)."""
    cfg = _cfg(kind, 64, n_layers=2)
    model = build_model(cfg, V, 32)
    model.hf_config._attn_implementation = "eager"
    b, seq = 2, 32
    ids = torch.randint(0, V, (b, seq))
    mask = torch.ones(b, seq, dtype=torch.bool)
    labels = torch.full((b, seq), -100)
    labels[:, ::4] = ids[:, ::4]  # mask_prob = 0.25
    with FlopCounterMode(display=False) as counter:
        mlm_loss(model, ids, mask, labels)
    measured = counter.get_total_flops() / (b * seq)
    analytic = sizing.flops_per_token(cfg, V, seq, 0.25) / 3  # forward only
    assert measured == pytest.approx(analytic, rel=0.10)


def test_describe_and_yaml_configs():
    for name, schema in (("bert", BertConfig), ("ut", UTConfig)):
        data = yaml.safe_load((CONF / f"{name}.yaml").read_text())
        cfg = from_dict({"model": data}).model
        assert type(cfg) is schema and cfg.width == 256 and cfg.n_layers == 4 and cfg.n_heads == 0
        info = sizing.describe(cfg, 30522, 128)
        assert info["params"] == sizing.param_count(cfg, 30522)["total"]
        assert info["n_heads"] == 4 and info["head_dim"] == 64 and info["d_ff"] == 1024
        assert info["shared_layer"] == (name == "ut")
        assert info["flops_per_token"] == sizing.flops_per_token(cfg, 30522, 128)


# ------------------------------------------------------------------------------------------------------------------
# Baseline families (sizing.match_shape): every shape of the sizing tables counted on the built model
# ------------------------------------------------------------------------------------------------------------------
PAPER_SCALES = [256, 512, 768, 1024, 1536, 2048, 3072]


def _built_counts(cfg, vocab: int) -> tuple[int, int]:
    """(total, non-embedding) of the model built on the meta device (no memory): sum(p.numel()) over its unique
    parameters, minus the vocabulary / position tables (BERT, UT) or S, W_out, b_out (PT)."""
    with torch.device("meta"):
        model = build_model(cfg, vocab, max_len=128)
    total = sum(p.numel() for p in model.parameters())
    if isinstance(cfg, PTConfig):
        tables = model.unary.numel() + model.head_weight.numel() + model.head_bias.numel()
    else:
        e = model.embeddings
        tables = e.word_embeddings.weight.numel() + e.position_embeddings.weight.numel() \
            + e.token_type_embeddings.weight.numel()
    return total, total - tables


@pytest.mark.parametrize("vocab,scales,seq_len", [(30522, PAPER_SCALES, 128), (8192, [64, 128, 256], 64)])
def test_every_sizing_table_shape_counts_match_built_model(vocab, scales, seq_len):
    """sizing_table under each sweep.match (paper and demo presets): the counts it prints are those of the built
    models, and every baseline follows the rule (BERT d = 64 h, h <= L <= 2h; UT: BERT's depth)."""
    seen = set()
    for match in sizing.MATCH_KEYS:
        rows = sizing.sizing_table(PTConfig(), scales, vocab, seq_len, 0.15, match)
        assert len(rows) == 3 * len(scales) and not any("error" in r for r in rows)
        by = {(r["scale"], r["model"]): r for r in rows}
        for r in rows:
            if r["model"] == "pt":
                cfg = PTConfig(width=r["width"])
            else:
                assert r["width"] % 64 == 0 and r["n_heads"] == r["width"] // 64
                cfg = (BertConfig if r["model"] == "bert" else UTConfig)(
                    width=r["width"], n_layers=r["n_layers"], n_heads=r["n_heads"])
            if r["model"] == "bert":
                assert r["n_heads"] <= r["n_layers"] <= 2 * r["n_heads"]
            if r["model"] == "ut":
                assert r["n_layers"] == by[(r["scale"], "bert")]["n_layers"]
            key = (type(cfg).__name__, cfg.width, getattr(cfg, "n_layers", 0))
            if key not in seen:
                seen.add(key)
                assert _built_counts(cfg, vocab) == (r["params"], r["non_embedding_params"]), key
            assert r["flops_per_token"] == sizing.flops_per_token(cfg, vocab, seq_len, 0.15)


@pytest.mark.parametrize("match", sizing.MATCH_KEYS)
def test_match_shape_is_the_closest_rule_shape(match):
    vocab, seq_len = 30522, 128
    for w in PAPER_SCALES:
        pt = PTConfig(width=w)
        target = sizing.measure(pt, match, vocab, seq_len)
        bert = sizing.match_shape("bert", pt, vocab, seq_len, match=match)
        ut = sizing.match_shape("ut", pt, vocab, seq_len, match=match)
        got = abs(math.log(sizing.measure(bert, match, vocab, seq_len) / target))
        assert got <= math.log(1.075)  # the paper preset's shapes all match within 7.5 %
        direct = {"total": lambda c: sizing.param_count(c, vocab)["total"],
                  "non_embedding": lambda c: sizing.param_count(c, vocab)["non_embedding"],
                  "flops": lambda c: sizing.flops_per_token(c, vocab, seq_len)}[match]
        for cfg in (bert, ut):
            assert direct(cfg) / direct(pt) == pytest.approx(1.0, abs=0.075)
        h = bert.width // 64
        for hh in range(max(1, h - 2), h + 3):  # no rule shape nearby is closer
            for n in range(hh, 2 * hh + 1):
                other = BertConfig(width=64 * hh, n_layers=n, n_heads=hh)
                assert abs(math.log(sizing.measure(other, match, vocab, seq_len) / target)) >= got - 1e-12
        assert ut.n_layers == bert.n_layers and ut.width % 64 == 0
        got_ut = abs(math.log(sizing.measure(ut, match, vocab, seq_len) / target))
        for d in (ut.width - 64, ut.width + 64):
            other = UTConfig(width=d, n_layers=ut.n_layers, n_heads=d // 64)
            assert abs(math.log(sizing.measure(other, match, vocab, seq_len) / target)) >= got_ut
        if match == "flops":  # the same FLOPs formula: the UT gets the BERT's shape
            assert (ut.width, ut.n_layers) == (bert.width, bert.n_layers)
        if match == "total":
            assert ut.width > bert.width  # one shared layer: wider at the same count


def test_match_shape_refuses_far_targets_and_unknown_keys(monkeypatch):
    monkeypatch.setattr(sizing, "MAX_HEADS", 1)  # only d = 64: far too small for PT at width 1024
    with pytest.raises(ValueError, match="factor"):
        sizing.match_shape("bert", PTConfig(width=1024), 30522, 128)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="kind"):
        sizing.match_shape("gpt", PTConfig(), 30522, 128)
    with pytest.raises(ValueError, match="match"):
        sizing.match_shape("bert", PTConfig(), 30522, 128, match="embedding")


def test_bench_with_a_width_no_baseline_matches_is_one_line_before_any_timing(tmp_path, capsys):
    """``bench/bench_models.py --width 64`` (no BERT width within 5% of PT's count at V = 1000) says so in one line
    and exits 2 before timing anything (was a multiprocessing traceback after PT had been timed)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import bench_models
    finally:
        sys.path.pop(0)
    code = bench_models.main(["--width", "64", "--vocab", "1000", "--tracker", "disabled", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no bert width" in err[0] and "--width 64" in err[0], err
    assert not any(tmp_path.iterdir())  # nothing timed, nothing written
