"""transfer.yaml, the file tune-small writes and verify-transfer / scaling-curves read: where it is, reading it, and
its provenance - the settings a transferred configuration was tuned under (:func:`transfer_settings`), and the check
that the sweep reading it runs under the same ones (:func:`check_transfer`; docs/running.md, "Provenance").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from ptsweep.config import TRANSFER_KEYS, RunConfig, to_dict
from ptsweep.errors import SweepError
from ptsweep.sweeps import horizon_rule

TUNE_STUDY = "tune-small"
"""Default study name of tune-small: where verify-transfer / scaling-curves look for transfer.yaml."""


def config_point(cfg: RunConfig) -> dict[str, float]:
    """The config's own values of the 7 transferable keys (dotted key -> value; ``TRANSFER_KEYS`` order)."""
    return {k: float(getattr(getattr(cfg, k.split(".")[0]), k.split(".")[1])) for k in TRANSFER_KEYS}


def read_transfer(cfg: RunConfig) -> tuple[dict[str, float], dict, Path]:
    """(the 7 transferred values by dotted key, provenance, path) from ``sweep.transfer_file`` (default
    ``<out_dir>/tune-small/transfer.yaml``), or the config's own values under ``sweep.transfer_from=config``;
    SweepError if the file is missing or was tuned under other settings (:func:`check_transfer`)."""
    import yaml

    if cfg.sweep.transfer_from == "config":
        return config_transfer(cfg)
    if cfg.sweep.transfer_from == "grid":
        raise SweepError("sweep.transfer_from=grid: only scaling-curves tunes PT's LR on a grid; this sweep reads "
                         "transfer.yaml (file) or the config's own values (config)")
    path = Path(cfg.sweep.transfer_file or Path(cfg.out_dir) / TUNE_STUDY / "transfer.yaml").resolve()
    if not path.exists():
        raise SweepError(f"sweep.transfer_file: {path} not found - run `make tune-small` first "
                         f"(or point sweep.transfer_file=... to a transfer.yaml)")
    doc = yaml.safe_load(path.read_text()) or {}
    values = doc.get("values", doc)
    missing = [k for k in TRANSFER_KEYS if k not in values]
    if missing:
        raise SweepError(f"sweep.transfer_file: {path} lacks {', '.join(missing)}")
    provenance = dict(doc.get("provenance", {}))
    provenance["mismatch"] = check_transfer(cfg, provenance, path)
    # another budget: optim.lr by the horizon rule, or as tuned with a warning (``horizon_rule``)
    return horizon_rule.apply(cfg, {k: float(values[k]) for k in TRANSFER_KEYS}, provenance, path), provenance, path


def config_transfer(cfg: RunConfig) -> tuple[dict[str, float], dict, None]:
    """(the config's own 7 values, provenance, None) for ``sweep.transfer_from=config``: no transfer.yaml, so no
    settings to check."""
    provenance = {"source": "config", "num_samples": 0, "width": int(cfg.model.width), "mismatch": {},
                  "note": "the config's own values (sweep.transfer_from=config), not tuned by tune-small"}
    return config_point(cfg), provenance, None


_MODEL_SKIP = {"width", *(k.split(".", 1)[1] for k in TRANSFER_KEYS if k.startswith("model."))}
_DATA_KEYS = ("name", "hf_dataset", "files", "val_files", "text_field", "tokenizer", "vocab_size", "seq_len",
              "max_train_tokens", "val_fraction", "mask_prob", "mask_replace_prob", "random_replace_prob")
_TRAIN_KEYS = ("tokens", "batch_size")
_OPTIM_KEYS = ("schedule", "warmup_frac", "min_lr_frac", "betas", "eps", "weight_decay", "grad_clip")
LEGACY_KEYS = {"scaling": "model.scaling", "parametrization": "model.parametrization", "data": "data.name",
               "vocab_size": "data.vocab_size", "seq_len": "data.seq_len", "token_budget": "train.tokens"}
"""Top-level provenance keys of transfer.yaml files written before ``settings`` existed -> dotted config keys."""


def transfer_settings(cfg: RunConfig) -> dict[str, Any]:
    """Dotted key -> value of every setting a transferred configuration depends on: every PT model setting except
    the width and the 7 transferred values, the corpus and tokenizer, the token budget and batch size, and the
    optimizer's schedule."""
    d = to_dict(cfg)
    out: dict[str, Any] = {}
    for k, v in sorted(d["model"].items()):
        if k not in _MODEL_SKIP:
            out[f"model.{k}"] = v
    for section, keys in (("data", _DATA_KEYS), ("train", _TRAIN_KEYS), ("optim", _OPTIM_KEYS)):
        for k in keys:
            if k in d.get(section, {}):
                out[f"{section}.{k}"] = d[section][k]
    unused = {"local": ("data.hf_dataset",), "minipile": ("data.files", "data.val_files", "data.text_field")}
    for k in unused.get(out.get("data.name"), ("data.hf_dataset", "data.files", "data.val_files", "data.text_field")):
        out.pop(k, None)
    return json.loads(json.dumps(out))  # tuples -> lists: the form they take after a YAML round trip


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _setting_text(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def check_transfer(cfg: RunConfig, provenance: Mapping[str, Any], path: Path | str) -> dict[str, dict]:
    """{dotted key: {"tuned": recorded, "now": current}} of every setting in transfer.yaml's ``provenance`` that
    differs from ``cfg``'s (the budget is the horizon rule's under rule 'power'); a one-line SweepError unless
    ``sweep.allow_transfer_mismatch``."""
    current = transfer_settings(cfg)
    recorded = dict(provenance.get("settings") or {})
    if not recorded:  # a file written before ``settings`` existed: the few keys it has at top level
        recorded = {dk: provenance[k] for k, dk in LEGACY_KEYS.items() if k in provenance}
    mismatch = {k: {"tuned": recorded[k], "now": current[k]} for k in sorted(recorded)
                if k in current and not _same(recorded[k], current[k])}
    if horizon_rule.active(cfg):  # the budget is the horizon rule's to handle, not a mismatch
        mismatch.pop(horizon_rule.BUDGET_KEY, None)
    if mismatch and not cfg.sweep.allow_transfer_mismatch:
        what = ", ".join(f"{k} (tuned: {_setting_text(m['tuned'])}, now: {_setting_text(m['now'])})"
                         for k, m in mismatch.items())
        raise SweepError(f"transfer.yaml mismatch: {what} - {path} was tuned under other settings; re-run "
                         f"tune-small with these settings, or set sweep.allow_transfer_mismatch=true to proceed on "
                         f"purpose{horizon_rule.risk_note(mismatch)}")
    return mismatch
