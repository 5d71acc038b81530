"""PT's message statistics (``ptsweep.train.message_stats``, the probe of ``train.probes``) against an independent
recomputation, and the training loop writing them to the history only when asked.

The recomputation takes the distributions of a traced forward (Q_z, Q_h, Q_g: the inputs of each iteration's
messages) and rebuilds everything else with Python loops over tokens, channels and heads from the parameters S, U,
V, B and the config's weights and constants: the four messages into Z, the attention and topic logits, the damped Z
logits, their RMS over the real tokens, and the entropies by -sum p log p over the nonzero p.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from ptsweep import data as data_mod
from ptsweep import train
from ptsweep.config import PTConfig, compose
from ptsweep.errors import ConfigError
from ptsweep.models import build_model
from ptsweep.models.pt import ProbabilisticTransformer
from ptsweep.train import message_stats

from experiment_scripts import load_script

WEIGHTS = {"w_unary": 0.7, "w_child": 1.3, "w_head": 2.1, "w_topic_z": 0.4, "w_attn": 1.7, "w_topic_g": 0.9}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("WANDB_MODE", "disabled")


def brute_class(i: int, j: int) -> int:
    """k(i, j) of spec §4's table: d = j - i; 0..3 for d = +1, +2, +3, >=+4; 4..7 for -1, -2, -3, <=-4."""
    d = j - i
    mag = min(abs(d), 4)
    return mag - 1 if d > 0 else 4 + mag - 1


def tiny_model(**kw) -> ProbabilisticTransformer:
    """Width 8, C = 2, r = 4, M = 16, T = 3, the default 'mup_sp' (Z damping 0.5), random O(1) parameters."""
    cfg = PTConfig(width=8, base_width=8, base_channels=2, base_rank=4, topic_ratio=2, n_iters=3, **{**WEIGHTS, **kw})
    torch.manual_seed(0)
    model = ProbabilisticTransformer(cfg, vocab_size=13).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


def tiny_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two blocks of 7, the second with 3 pads (pad rows of Q_h are garbage and their child messages nonzero)."""
    ids = torch.randint(0, 13, (2, 7), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 4:] = False
    return ids, mask


def brute_messages(model, ids, mask, q_z, q_h, q_g) -> dict:
    """The four unweighted messages into Z and the H and G logits of one iteration, by loops (spec §6.3)."""
    c, const = model.cfg, model.const
    assert const.center == 0  # 'mup_sp' features are a_Z Q_z and a_G Q_g
    S, U, V, B = (t.detach() for t in (model.unary, model.U, model.V, model.B))
    n, m, chans = c.width, c.topics, c.channels
    p_hat, g_hat = const.a_z * q_z, const.a_g * q_g
    f64 = torch.float64
    out = {k: torch.zeros(*ids.shape, n, dtype=f64) for k in ("unary", "child", "head", "topic")}
    attn = torch.zeros(ids.shape[0], chans, ids.shape[1], ids.shape[1], dtype=f64)
    topic = torch.zeros(*ids.shape, m, dtype=f64)
    for b in range(ids.shape[0]):
        real = [i for i in range(ids.shape[1]) if mask[b, i]]
        for i in real:
            out["unary"][b, i] = S[ids[b, i]]
            out["topic"][b, i] = B.t() @ g_hat[b, i]
            topic[b, i] = c.w_topic_g * const.s_g * (B @ p_hat[b, i])
            for ch in range(chans):
                for j in real:
                    if j == i:
                        continue
                    k, k_rev = brute_class(i, j), brute_class(j, i)
                    q_i, v_j = U[k, ch].t() @ p_hat[b, i], V[k, ch].t() @ p_hat[b, j]
                    attn[b, ch, i, j] = c.w_attn * const.s_h * (q_i @ v_j)
                    out["child"][b, i] += q_h[b, ch, i, j] * (U[k, ch] @ (V[k, ch].t() @ p_hat[b, j]))
                    out["head"][b, i] += q_h[b, ch, j, i] * (V[k_rev, ch] @ (U[k_rev, ch].t() @ p_hat[b, j]))
    return {**out, "attn": attn, "topic_logits": topic}


def brute_rms(x: torch.Tensor, mask: torch.Tensor) -> float:
    """RMS over the real tokens' rows of x (B, L, D)."""
    vals = [float(v) ** 2 for b in range(x.shape[0]) for i in range(x.shape[1]) if mask[b, i] for v in x[b, i]]
    return math.sqrt(sum(vals) / len(vals))


def brute_entropy(p: torch.Tensor) -> float:
    return -sum(float(v) * math.log(float(v)) for v in p if v > 0)


def brute_stats(model, ids, mask) -> list[dict]:
    """Every statistic of every iteration, recomputed from the traced Q_z, Q_h, Q_g (module docstring)."""
    trace: list[dict] = []
    with torch.no_grad():
        model.eval()
        model.mfvi(ids, mask, trace)
    c = model.cfg
    w = {"unary": c.w_unary, "child": c.w_child, "head": c.w_head, "topic": c.w_topic_z}
    w.update({k: 0.0 for k in c.messages_off})  # a path switched off enters Z with nothing
    logits, beta = model.unary.detach()[ids] * mask[..., None], c.z_damping
    real = [(b, i) for b in range(ids.shape[0]) for i in range(ids.shape[1]) if mask[b, i]]
    out = []
    for step in trace:
        msgs = brute_messages(model, ids, mask, step["q_z"], step["q_h"], step["q_g"])
        logits = beta * logits + (1 - beta) * sum(w[k] * msgs[k] for k in w)
        s = {f"{k}_rms": brute_rms(w[k] * msgs[k], mask) for k in w}
        s.update({f"{k}_ratio": s[f"{k}_rms"] / s["unary_rms"] for k in ("child", "head", "topic")})
        s["msg_coherence"] = brute_rms(sum(w[k] * msgs[k] for k in w), mask) ** 2 / \
            sum(s[f"{k}_rms"] ** 2 for k in w)
        pair_vals = [float(msgs["attn"][b, ch, i, j]) ** 2 for b, i in real for ch in range(c.channels)
                     for j in range(ids.shape[1]) if mask[b, j] and j != i]
        s["attn_logit_rms"] = math.sqrt(sum(pair_vals) / len(pair_vals))
        s["topic_logit_rms"] = brute_rms(msgs["topic_logits"], mask)
        s["z_logit_rms"] = brute_rms(logits, mask)
        s["z_logit_std"] = math.sqrt(sum(float(logits[b, i].var(unbiased=False)) for b, i in real) / len(real))
        s["q_h_entropy"] = sum(brute_entropy(step["q_h"][b, ch, i]) for b, i in real
                               for ch in range(c.channels)) / (len(real) * c.channels)
        s["q_g_entropy"] = sum(brute_entropy(step["q_g"][b, i]) for b, i in real) / len(real)
        s["q_g_entropy_frac"] = s["q_g_entropy"] / math.log(c.topics)
        s["q_z_entropy_frac"] = sum(brute_entropy(step["q_z"][b, i]) for b, i in real) / len(real) / math.log(8)
        out.append(s)
    return out


@pytest.mark.parametrize("off", [(), ("topic",)])
def test_message_stats_match_a_brute_force_recomputation(off) -> None:
    model = tiny_model(messages_off=off)
    ids, mask = tiny_batch()
    want = brute_stats(model, ids, mask)
    model.train()
    got = message_stats.measure(model, {"input_ids": ids, "attention_mask": mask.long()}, torch.device("cpu"))
    assert model.training  # the training mode is restored
    assert len(want) == 3 and set(got) == {f"{p}/{k}" for p in ("msg", "msg_mean") for k in want[0]}
    for key in want[0]:
        assert got[f"msg/{key}"] == pytest.approx(want[-1][key], rel=1e-9, abs=1e-12), key
        assert got[f"msg_mean/{key}"] == pytest.approx(sum(s[key] for s in want) / 3, rel=1e-9, abs=1e-12), key
    # every term matters: the messages differ in size, the distributions are neither uniform nor one-hot
    assert 0.05 < got["msg/child_ratio"] != got["msg/head_ratio"] and 0 < got["msg/q_g_entropy_frac"] < 1
    assert got["msg/topic_ratio"] == (0.0 if off else pytest.approx(want[-1]["topic_ratio"])) and \
        (off or got["msg/topic_ratio"] > 0.01)
    assert got["msg/z_logit_rms"] != got["msg_mean/z_logit_rms"]  # the iterations differ


def test_the_message_stats_probe_checks_the_model() -> None:
    for overrides, words in ((["model=bert"], "message_stats measures PT's messages; model is bert"),
                             (["model.n_iters=0"], "message_stats needs model.n_iters >= 1")):
        with pytest.raises(ConfigError, match=f"train.probes: {words}"):
            compose(["preset=smoke", "train.probes=[message_stats]", *overrides])
    with pytest.raises(ConfigError, match="train.probes: must be one of"):
        compose(["preset=smoke", "train.probes=[grad_norms]"])
    assert compose(["preset=smoke"]).train.probes == ["update_sizes"]  # off by default


def _smoke_run(cache_dir: Path, out: Path, on: bool, rows_tracker) -> tuple[dict, object, list[dict]]:
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={out}", f"data.cache_dir={cache_dir}",
                   f"train.probes=[update_sizes{',message_stats' if on else ''}]"])
    tracker = rows_tracker()
    m = train.run(cfg, tracker)
    history = [json.loads(line) for line in (Path(m["run_dir"]) / "history.jsonl").read_text().splitlines()]
    return m, tracker, history


def test_training_writes_message_stats_to_the_history_only_when_asked(cache_dir: Path, tmp_path: Path,
                                                                      rows_tracker) -> None:
    m, tracker, history = _smoke_run(cache_dir, tmp_path / "on", on=True, rows_tracker=rows_tracker)
    evals = [r for r in history if "val_loss" in r]
    assert [r["step"] for r in evals] == [0, 8, 16]  # the initial evaluation and every train.eval_every
    for r in evals:
        assert r["msg/child_ratio"] > 0 and math.isfinite(r["msg_mean/attn_logit_rms"])
        assert 0 < r["msg/q_g_entropy_frac"] <= 1
    assert not any(k.startswith("msg") for r in history if "train_loss" in r for k in r)
    assert [r for _, r in tracker.rows if "val_loss" in r][-1]["msg/head_ratio"] == evals[-1]["msg/head_ratio"]
    assert m["history"][-1]["msg/unary_rms"] == evals[-1]["msg/unary_rms"]
    # the last row is the trained model's, measured on the first validation batch
    cfg = compose(["preset=smoke", f"data.cache_dir={cache_dir}"])
    corpus = data_mod.prepare(cfg.data)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    model.load_state_dict(torch.load(Path(m["run_dir"]) / train.CHECKPOINT, weights_only=False)["model"])
    batch = data_mod.val_batches(corpus, cfg.data, cfg.train.batch_size)[0]
    again = message_stats.measure(model, batch, torch.device("cpu"))
    assert evals[-1]["msg/child_ratio"] == pytest.approx(again["msg/child_ratio"], rel=1e-5)
    assert evals[-1]["msg/q_h_entropy"] == pytest.approx(again["msg/q_h_entropy"], rel=1e-5)
    assert evals[-1]["msg/child_ratio"] != evals[0]["msg/child_ratio"]  # training moved them

    m_off, tracker_off, history_off = _smoke_run(cache_dir, tmp_path / "off", on=False, rows_tracker=rows_tracker)
    assert any("val_loss" in r for r in history_off)
    assert not any(k.startswith("msg") for r in history_off for k in r)
    assert not any(k.startswith("msg") for _, r in tracker_off.rows for k in r)
    assert m_off["val_loss"] == m["val_loss"]  # result-neutral: the statistics change no number of the run


def _script():
    """experiments/weight-drift/message_sizes.py as a module."""
    return load_script("experiments/weight-drift/message_sizes.py")


def test_message_sizes_script_runs_the_lr_transfer_trial_and_divides_width_128_by_32(tmp_path: Path) -> None:
    ms = _script()
    cfg = compose(ms.overrides("pt_no_topic", 128, tmp_path))
    m = cfg.model
    assert (m.channels, m.rank, m.base_width, m.parametrization, m.messages_off) == (4, 32, 32, "mup_sp", ("topic",))
    assert cfg.optim.lr == 0.02 and cfg.train.tokens / (cfg.train.batch_size * cfg.data.seq_len) == 1200
    assert cfg.train.eval_every == 200 and "message_stats" in cfg.train.probes and cfg.data.vocab_size == 8192
    stats = {k: 1.0 for k in ms.SHOWN}
    for width, scale, steps in ((32, 1.0, (0, 200, 400)), (128, 2.0, (0, 200))):
        run = tmp_path / f"w{width}"
        run.mkdir()
        rows = [{"step": s, "train_loss": 5.0} for s in steps] + \
            [{"step": s, "val_loss": 5.0 - width / 1000, **{f"msg/{k}": scale * (1 + s) for k in stats}} for s in steps]
        (run / "history.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
        (run / "final.json").write_text(json.dumps({"status": "ok", "val_loss": 5.0 - width / 1000,
                                                    "context_gain": 1.0, "context_gain_se": 0.1}))
    frames = [ms.read_run(tmp_path / f"w{w}", "pt", w) for w in (32, 128)]
    df = pd.concat([f for f, _ in frames], ignore_index=True)
    assert len(df) == 5  # the evaluation rows only
    growth = ms.growth_table(df)
    assert len(growth) == 2 + 2  # header, rule, the two steps both widths evaluated
    assert growth[2] == "| 0 | " + " | ".join(["2"] * len(ms.SHOWN)) + " |"
    finals = ms.finals_table({("pt", 32): frames[0][1], ("pt_no_topic", 32): {**frames[1][1], "val_loss": 5.1}})
    assert finals[-1].startswith("| pt - pt_no_topic | 32 | -0.1320 |")
