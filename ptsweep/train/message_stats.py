"""Training-time sizes of PT's MFVI messages (the probe 'message_stats'): what changes with width as PT trains.

At every evaluation, one no-grad traced forward of the first validation batch (``ProbabilisticTransformer.inspect``)
gives per MFVI iteration t (spec §6.3), RMS over real tokens (and labels, or valid pairs):

- ``<unary|child|head|topic>_rms`` of each weighted message into Z (0 for a path in ``model.messages_off``), and
  ``<child|head|topic>_ratio``: that over the weighted unary's;
- ``attn_logit_rms``, ``topic_logit_rms``, ``z_logit_rms`` and ``z_logit_std`` (l^(t) centred over the N labels);
- ``msg_coherence``: RMS(sum of the weighted messages)^2 / sum of their RMS^2 (1: uncorrelated);
- ``q_h_entropy``, ``q_g_entropy`` (nats), ``q_g_entropy_frac`` (over log M), ``q_z_entropy_frac`` (over log N).

Rows get ``msg/<name>`` for the last iteration and ``msg_mean/<name>`` for the mean over the T iterations.
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
    """The module docstring's numbers for one MFVI iteration: ``step`` is one entry of ``mfvi(trace=...)``,
    ``mask`` (B, L) the real tokens."""
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
    ``batch``."""
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
