"""Training-time sizes of PT's MFVI messages (the probe 'message_stats', ``train.probes``): what changes with width
as PT trains.

At every evaluation the loop runs one no-grad, traced forward of the first validation batch in eval mode and fp32
(``ProbabilisticTransformer.mfvi(trace=...)``, the dense path) and logs, per MFVI iteration t (spec §6.3):

- ``<unary|child|head|topic>_rms``: the RMS over real tokens and the N labels of each WEIGHTED message into Z,
  w * msg (the four terms of the Z logits l^(t), ``combine_z``); a path in ``model.messages_off`` enters Z with
  nothing, so its RMS is 0;
- ``<child|head|topic>_ratio``: that RMS over the weighted unary's (how much each message moves Z against the
  token's own evidence);
- ``attn_logit_rms``: RMS of the attention logits w_attn s_H F over valid pairs (both real, j != i) and channels;
- ``topic_logit_rms``: RMS of the topic logits w_topic_g s_G B P^ over real tokens and the M labels;
- ``z_logit_rms``: RMS of the new Z logits l^(t) (after damping) over real tokens; ``z_logit_std``: the same of
  l^(t) centred over the N labels (what the softmax sees: it ignores a shift per token);
- ``msg_coherence``: RMS(sum of the weighted messages)^2 / sum of their RMS^2: 1 when the messages are
  uncorrelated, above 1 when they point the same way, below when they cancel;
- ``q_h_entropy``: the entropy of Q_h over heads j (nats), mean over channels and real tokens with a valid head;
- ``q_g_entropy`` (nats) and ``q_g_entropy_frac`` (over log M): of the topic posterior, mean over real tokens;
- ``q_z_entropy_frac``: the entropy of the Q_z the iteration starts from, over log N.

Rows get ``msg/<name>`` for the last iteration and ``msg_mean/<name>`` for the mean over the T iterations. Off the
hot path: one forward of one batch per evaluation, nothing kept for backward.
"""

from __future__ import annotations

import math

import torch

from ptsweep.metrics import token_entropy

MESSAGES = ("unary", "child", "head", "topic")
"""The four messages into Z, in ``combine_z``'s order; the ratios are the last three over the first."""


def rms(x: torch.Tensor, keep: torch.Tensor) -> float:
    """Root mean square of the entries of ``x`` where ``keep`` (broadcast to x's shape) is True."""
    return float(x.detach()[keep.expand_as(x)].double().pow(2).mean().sqrt())


def iteration_stats(model, step: dict, mask: torch.Tensor) -> dict[str, float]:
    """The module docstring's numbers for one MFVI iteration of ``model``: ``step`` is one trace entry of
    ``mfvi(trace=...)`` (msg_*, attn_logits, topic_logits, z_logits, q_z, q_h, q_g), ``mask`` (B, L) the real
    tokens."""
    tokens = mask[..., None]                                          # (B, L, 1)
    weights = model.message_weights()                                 # the paths that enter Z, with their weight
    out = {f"{name}_rms": rms(weights[name] * step[f"msg_{name}"], tokens) if name in weights else 0.0
           for name in MESSAGES}
    for name in MESSAGES[1:]:
        out[f"{name}_ratio"] = out[f"{name}_rms"] / out["unary_rms"]
    total = rms(sum(w * step[f"msg_{name}"] for name, w in weights.items()), tokens)
    out["msg_coherence"] = total ** 2 / sum(out[f"{name}_rms"] ** 2 for name in MESSAGES)
    pairs = model.valid_pairs(mask)                                   # (B, 1, L, L)
    out["attn_logit_rms"] = rms(step["attn_logits"], pairs)
    out["topic_logit_rms"] = rms(step["topic_logits"], tokens)
    out["z_logit_rms"] = rms(step["z_logits"], tokens)
    out["z_logit_std"] = rms(step["z_logits"] - step["z_logits"].mean(-1, keepdim=True), tokens)
    rows = pairs.any(-1)                                              # (B, 1, L): a real token with a valid head
    q_h_entropy = token_entropy(step["q_h"])                         # (B, C, L): over the heads j
    out["q_h_entropy"] = float(q_h_entropy[rows.expand_as(q_h_entropy)].double().mean())
    q_g_entropy = token_entropy(step["q_g"])[mask].double().mean()
    out["q_g_entropy"] = float(q_g_entropy)
    out["q_g_entropy_frac"] = float(q_g_entropy) / math.log(step["q_g"].shape[-1])
    q_z_entropy = token_entropy(step["q_z"])[mask].double().mean()
    out["q_z_entropy_frac"] = float(q_z_entropy) / math.log(step["q_z"].shape[-1])
    return out


def measure(model, batch: dict, device: torch.device) -> dict[str, float]:
    """``msg/<name>`` (last MFVI iteration) and ``msg_mean/<name>`` (mean over iterations) of ``model`` on
    ``batch`` (input_ids, attention_mask): the trace of ``model.inspect`` (no grad, eval mode, fp32; the model's
    training mode restored)."""
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device).bool()
    per_iter = [iteration_stats(model, step, mask) for step in model.inspect(ids, mask)]
    last = {f"msg/{k}": v for k, v in per_iter[-1].items()}
    mean = {f"msg_mean/{k}": sum(s[k] for s in per_iter) / len(per_iter) for k in per_iter[-1]}
    return {**last, **mean}


class MessageStats:
    """The probe 'message_stats': :func:`measure` of ``model`` on ``batch`` after every evaluation."""

    def __init__(self, model, batch: dict, device: torch.device):
        self.model, self.batch, self.device = model, batch, device

    def before_logged_step(self) -> None:
        pass

    def on_logged_step(self) -> dict:
        return {}

    def on_evaluation(self) -> dict[str, float]:
        return measure(self.model, self.batch, self.device)
