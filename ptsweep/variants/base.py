"""What a variant of PT is: a frozen dataclass of its settings (one ``model.variants`` entry) that checks them
against the model config and attaches itself to the model at a hook point of ``models/pt.py``."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ptsweep.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Variant:
    """Base of the variants: ``name`` is the entry's ``name``; the dataclass fields are its settings."""

    name: ClassVar[str] = ""

    def __post_init__(self) -> None:  # an integer given for a float setting is that float (one hash per value)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "float" and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, f.name, float(value))

    def require(self, cond: bool, msg: str) -> None:
        """ConfigError ``model.variants: <name>: <msg>`` unless ``cond``."""
        if not cond:
            raise ConfigError(f"model.variants: {self.name}: {msg}")

    def check(self, cfg) -> None:
        """The settings' values against the PT config ``cfg`` (one-line ConfigErrors)."""

    def attach(self, model) -> None:
        """Set this variant's hook(s) on ``model`` (a ProbabilisticTransformer, before its optimizer is built)."""
        raise NotImplementedError
