"""The tokenizer of a corpus (step 3 of :mod:`ptsweep.data`); a trained WordPiece is cached under
``<cache_dir>/tokenizers/``."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Iterator

from tokenizers import Tokenizer

from ptsweep.config import DataConfig
from ptsweep.data.corpora import Documents, hf_offline, hub_reachable, iter_texts
from ptsweep.data.keys import locked, sha_key
from ptsweep.errors import DataError
from ptsweep.io import replace_atomically, resolve_path
from ptsweep.wordpiece import SPECIAL_TOKENS, train_wordpiece

log = logging.getLogger(__package__)  # "ptsweep.data": one logger for the package

TOKENIZER_TRAIN_CHARS = 200_000_000  # the fallback WordPiece sees at most this much training text


def _load_named_tokenizer(name: str) -> Tokenizer:
    """A tokenizer from a local path or the HF hub (cache only when offline). Raises on any failure."""
    p = Path(name).expanduser()
    if p.exists():
        if p.is_dir() and (p / "tokenizer.json").is_file():
            return Tokenizer.from_file(str(p / "tokenizer.json"))
        if p.is_file() and p.suffix == ".json":
            return Tokenizer.from_file(str(p))
        vocab = p / "vocab.txt" if p.is_dir() else p
        if vocab.is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            return BertWordPieceTokenizer(str(vocab), lowercase=True)._tokenizer
        raise DataError(f"data.tokenizer: {p} holds no tokenizer.json or vocab.txt")
    from huggingface_hub import hf_hub_download

    offline = hf_offline()
    if not offline and not hub_reachable():
        raise ConnectionError("huggingface.co unreachable")
    path = hf_hub_download(name, "tokenizer.json", local_files_only=offline, etag_timeout=5)
    return Tokenizer.from_file(path)


def load_tokenizer(cfg: DataConfig, docs: Documents) -> tuple[Tokenizer, str, bool]:
    """(tokenizer, name actually used, loaded_from_cache); ``loaded_from_cache`` is False only when the fallback
    WordPiece was trained in this call (it is cached for the next)."""
    if cfg.tokenizer != "wordpiece":
        try:
            return _load_named_tokenizer(cfg.tokenizer), cfg.tokenizer, True
        except DataError:
            raise
        except Exception as exc:
            if not cfg.tokenizer_fallback:
                why = "not in the Hugging Face cache and the hub is offline" if hf_offline() else \
                    f"not cached and the hub is unreachable ({type(exc).__name__})"
                raise DataError(f"data.tokenizer={cfg.tokenizer}: {why}; download it once with `hf download "
                                f"{cfg.tokenizer} tokenizer.json` (older clients: `huggingface-cli download "
                                f"{cfg.tokenizer}`), or point data.tokenizer at a local tokenizer.json "
                                f"(data.tokenizer_fallback=true trains a different WordPiece instead)") from None
            reason = "offline (HF_HUB_OFFLINE)" if hf_offline() else f"unreachable ({type(exc).__name__})"
            log.warning("tokenizer '%s' %s: FALLBACK to a WordPiece (vocab %d) trained on the %s training split",
                        cfg.tokenizer, reason, cfg.vocab_size, cfg.name)
    key = sha_key("wordpiece", docs.identity, cfg.vocab_size, SPECIAL_TOKENS, "bert-lowercase", TOKENIZER_TRAIN_CHARS,
                  "deterministic-bpe-v1")[:16]
    name = f"wordpiece-{cfg.vocab_size}-{docs.name}-{key[:8]}"
    path = resolve_path(cfg.cache_dir) / "tokenizers" / f"{docs.name}-{key}.json"
    with locked(path):
        if path.is_file():
            return Tokenizer.from_file(str(path)), name, True
        t0 = time.time()
        tok = train_wordpiece(_capped_texts(docs.train, docs.text_field, TOKENIZER_TRAIN_CHARS), cfg.vocab_size)
        replace_atomically(path, lambda tmp: tok.save(str(tmp)))
        log.info("trained %s in %.1fs -> %s", name, time.time() - t0, path)
    return tok, name, False


def _capped_texts(docs: Any, text_field: str, max_chars: int) -> Iterator[str]:
    n = 0
    for batch in iter_texts(docs, text_field):
        for t in batch:
            yield t
            n += len(t)
            if n >= max_chars:
                return
