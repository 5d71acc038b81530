"""Value checks of the config schemas: each failure is a one-line ConfigError naming the dotted key."""

from __future__ import annotations

from ptsweep.errors import ConfigError


def require(cond: bool, key: str, msg: str) -> None:
    """Raise ``ConfigError("<key>: <msg>")`` unless ``cond``."""
    if not cond:
        raise ConfigError(f"{key}: {msg}")


def one_of(value: object, choices: tuple, key: str) -> None:
    """``value`` is one of ``choices`` (a field with a fixed set of string values)."""
    require(value in choices, key, f"must be one of {list(choices)}, got {value!r}")


def increasing_lr_grid(values) -> bool:
    """Whether ``values`` is an LR grid that can bracket an optimum: >= 3 increasing positive values."""
    return len(values) >= 3 and values[0] > 0 and all(a < b for a, b in zip(values, values[1:]))
