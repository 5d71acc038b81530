"""Where sweep trials run (``trials.placement``) and the token cache the driver hands them (``data.token_cache``):
GPUs by width, a 0-GPU trial on the CPU, the memory cap, and a corpus opened without its documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptsweep import data as D
from ptsweep.config import compose, with_overrides
from ptsweep.errors import ConfigError, DataError
from ptsweep.identity import config_hash
from ptsweep.trials import trainable
from ptsweep.trials.fields import TRIAL_FIELD
from ptsweep.trials.placement import cap_gpu_memory, gpus_for_width, trial_device


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def test_paper_preset_packs_four_width_256_trials_per_gpu() -> None:
    paper = compose(["preset=paper"])
    assert gpus_for_width(paper, 256) == 0.25 and gpus_for_width(paper, 1536) == 1.0
    assert paper.ray.max_failures >= 2
    assert gpus_for_width(compose(["preset=smoke", "ray.gpus_per_trial=0.5"]), 64) == 0.5  # packing off


def test_resources_of_a_planned_trial_follow_its_own_width() -> None:
    pytest.importorskip("ray")
    cfg = compose(["preset=paper"])
    planned = {"a": {"overrides": {"model.width": 1536}}, "b": {"overrides": {"optim.lr": 1e-3}}}
    resources = trainable._resources(cfg, 256, planned)
    gpus = {k: resources({TRIAL_FIELD: k}).bundles[0]["GPU"] for k in ("a", "b")}
    assert gpus == {"a": 1.0, "b": 0.25}
    assert resources({"optim.lr": 1e-3}).bundles[0] == {"CPU": 4.0, "GPU": 0.25}  # a search's proposal


@pytest.mark.parametrize("setting,gpus,device", [("auto", 0.0, "cpu"), ("auto", 1.0, "auto"), ("auto", 0.25, "auto"),
                                                 ("cpu", 0.0, "cpu"), ("cuda:0", 1.0, "cuda:0")])
def test_trial_device(setting: str, gpus: float, device: str) -> None:
    assert trial_device(setting, gpus) == device


def test_a_cuda_device_without_a_gpu_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="train.device=cuda: this trial was given no GPU"):
        trial_device("cuda", 0.0)


def test_no_memory_cap_without_a_fraction_or_cuda() -> None:
    assert cap_gpu_memory(1.0) is None and cap_gpu_memory(0.0) is None
    assert cap_gpu_memory(0.25) is None  # this machine has no CUDA


def _small(cache_dir: Path, *overrides: str):
    return compose(["preset=smoke", "tracker=disabled", f"data.cache_dir={cache_dir}", *overrides])


def test_token_cache_opens_the_same_corpus_without_loading_documents(cache_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _small(cache_dir)
    built = D.prepare(cfg.data)
    assert (Path(built.cache_path) / "tokenizer.json").is_file()

    def no_documents(*a, **k):
        raise AssertionError("load_documents called although data.token_cache is set")

    monkeypatch.setattr(D, "load_documents", no_documents)
    with pytest.raises(AssertionError, match="load_documents called"):  # the patch is where prepare looks
        D.prepare(cfg.data)
    handed = with_overrides(cfg, {"data.token_cache": built.cache_path, "data.cache_dir": "/nonexistent"})
    opened = D.prepare(handed.data)
    for split in ("train", "val", "test"):
        assert np.array_equal(getattr(opened, split), getattr(built, split)), split
    assert (opened.vocab_size, opened.special_ids, opened.name, opened.tokenizer_name) == \
        (built.vocab_size, built.special_ids, built.name, built.tokenizer_name)
    assert opened.tokenizer.to_str() == built.tokenizer.to_str()
    assert config_hash(handed) == config_hash(cfg)  # where the cache lies changes no result


def test_token_cache_that_does_not_fit_is_a_one_line_data_error(cache_dir: Path, tmp_path: Path) -> None:
    cfg = _small(cache_dir)
    built = D.prepare(cfg.data)
    with pytest.raises(DataError, match=r"not a prepared token cache \(missing meta.json"):
        D.prepare(with_overrides(cfg, {"data.token_cache": str(tmp_path)}).data)
    with pytest.raises(DataError, match="blocks of 32 tokens, but data.seq_len=64"):
        D.prepare(with_overrides(cfg, {"data.token_cache": built.cache_path, "data.seq_len": 64}).data)


def test_driver_resolves_one_cache_per_data_config(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _small(cache_dir)
    other = with_overrides(cfg, {"data.seq_len": 64})
    moved = with_overrides(cfg, {"data.cache_dir": str(cache_dir) + "/.", "optim.lr": 1e-4})
    prepared: list[int] = []
    real = D.prepare
    monkeypatch.setattr(D, "prepare", lambda c: prepared.append(c.seq_len) or real(c))
    caches = trainable.token_caches([cfg, other, moved])
    assert len(caches) == 2 and prepared == [32, 64]  # the cache folder and the LR do not name another cache
    monkeypatch.undo()
    assert caches[trainable.data_identity(cfg)] == D.prepare(cfg.data).cache_path
    assert caches[trainable.data_identity(other)] == D.prepare(other.data).cache_path != D.prepare(cfg.data).cache_path
