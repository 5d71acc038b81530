"""The exceptions ptsweep raises for user-fixable problems; the CLI prints each as one line (imports nothing)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config key is unknown or has an impossible value. The message names the dotted key."""


class DataError(RuntimeError):
    """A corpus or tokenizer cannot be prepared. ``str(exc)`` is one line saying what to do instead."""

    def __init__(self, msg: str) -> None:
        super().__init__(" ".join(str(msg).split()))


class TrackerError(RuntimeError):
    """A tracker cannot start (e.g. W&B online without an API key). One-line, user-fixable message."""


class SweepError(ConfigError):
    """A user-fixable sweep problem (e.g. transfer.yaml missing). A ConfigError, so the CLI prints one line."""


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by Ctrl-C; finished trials are in the ledger and the study resumes on re-run."""


class SourceChanged(RuntimeError):
    """A Ray worker found other ptsweep source on disk than the driver saw when it submitted the trial."""
