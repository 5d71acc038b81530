"""MLM masking and batches (step 5 of :mod:`ptsweep.data`)."""

from __future__ import annotations

import functools

import numpy as np
import torch

from ptsweep.config import DataConfig
from ptsweep.data.cache import Corpus

_TAG_ORDER, _TAG_MASK, _TAG_VAL, _TAG_TEST = 0x0D, 0x3A, 0x7E, 0x5C


def mask_tokens(blocks: np.ndarray, corpus: Corpus, cfg: DataConfig,
                rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """BERT MLM corruption of ``blocks`` (B, L): exact ``round(mask_prob * n)`` selections per block among its n
    non-special tokens; 80% [MASK], 10% random non-special token, 10% unchanged (``cfg`` probabilities)."""
    ids = np.asarray(blocks, dtype=np.int64)  # (B, L)
    special = np.isin(ids, np.asarray(corpus.special_ids))  # (B, L)
    keys = rng.random(ids.shape)  # (B, L) uniform selection keys
    keys[special] = np.inf
    k = np.rint(cfg.mask_prob * (~special).sum(axis=1)).astype(np.int64)  # (B,)
    rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")  # (B, L) rank of each key
    selected = rank < k[:, None]  # (B, L)
    u = rng.random(ids.shape)  # (B, L) which corruption
    to_mask = selected & (u < cfg.mask_replace_prob)
    to_rand = selected & (u >= cfg.mask_replace_prob) & (u < cfg.mask_replace_prob + cfg.random_replace_prob)
    regular = corpus.regular_ids
    rand_ids = regular[rng.integers(0, len(regular), size=ids.shape)]  # (B, L)
    inputs = np.where(to_mask, corpus.mask_id, np.where(to_rand, rand_ids, ids))
    labels = np.where(selected, ids, -100)
    return {"input_ids": torch.from_numpy(inputs),
            "attention_mask": torch.ones(ids.shape, dtype=torch.bool),
            "labels": torch.from_numpy(labels)}


@functools.lru_cache(maxsize=4)
def _epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([_TAG_ORDER, seed, epoch]).permutation(n)


def batch_indices(n_blocks: int, step: int, batch_size: int, seed: int) -> np.ndarray:
    """Block indices of training batch ``step``: sample g = step * batch_size + i reads block
    perm_{seed, g // n_blocks}[g % n_blocks], so each epoch visits every block once (a batch may span two epochs)."""
    g = step * batch_size + np.arange(batch_size)  # (B,) global sample positions
    return np.array([_epoch_order(seed, int(e), n_blocks)[p] for e, p in zip(g // n_blocks, g % n_blocks)],
                    dtype=np.int64)


def train_batch(corpus: Corpus, cfg: DataConfig, step: int, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
    """Training batch ``step``: a pure function of (seed, step). Blocks follow a per-epoch permutation seeded by
    (seed, epoch) with epoch = (step * batch_size + i) // n_blocks; masks are seeded by (seed, step)."""
    idx = batch_indices(corpus.train.shape[0], step, batch_size, seed)  # (B,)
    blocks = np.asarray(corpus.train[np.sort(idx)])[np.argsort(np.argsort(idx))]  # sorted read from the memmap
    return mask_tokens(blocks, corpus, cfg, np.random.default_rng([_TAG_MASK, seed, step]))


def _fixed_mask_batches(corpus: Corpus, cfg: DataConfig, split: str, batch_size: int) -> list[dict[str, torch.Tensor]]:
    """The ``split`` blocks ('val' | 'test') masked once with the rng seeded by (the split's tag,
    ``cfg.val_mask_seed``), cut into batches of ``batch_size`` and memoised on the corpus."""
    mkey = (split, batch_size, cfg.val_mask_seed, cfg.mask_prob, cfg.mask_replace_prob, cfg.random_replace_prob)
    if mkey not in corpus._memo:
        blocks, tag = (corpus.val, _TAG_VAL) if split == "val" else (corpus.test, _TAG_TEST)
        full = mask_tokens(np.asarray(blocks), corpus, cfg, np.random.default_rng([tag, cfg.val_mask_seed]))
        corpus._memo[mkey] = [{k: v[i:i + batch_size] for k, v in full.items()}
                              for i in range(0, blocks.shape[0], batch_size)]
    return corpus._memo[mkey]


def val_batches(corpus: Corpus, cfg: DataConfig, batch_size: int) -> list[dict[str, torch.Tensor]]:
    """All validation blocks with FIXED masks seeded only by ``cfg.val_mask_seed`` (the masks do not depend on
    ``batch_size``). Cached on the corpus; treat the tensors as read-only."""
    return _fixed_mask_batches(corpus, cfg, "val", batch_size)


def test_batches(corpus: Corpus, cfg: DataConfig, batch_size: int) -> list[dict[str, torch.Tensor]]:
    """All TEST blocks with FIXED masks seeded by ``cfg.val_mask_seed`` (and a tag of their own); [] when the corpus
    has no test split. Cached on the corpus; treat the tensors as read-only."""
    return _fixed_mask_batches(corpus, cfg, "test", batch_size) if corpus.test.shape[0] else []
