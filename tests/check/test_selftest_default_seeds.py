"""The selftest's default seeds: on CUDA every tiny-model variant (each reaches a CUDA fast path), on CPU two."""

from specbench.selftest import parallel
from specbench.selftest.parallel import default_seeds
from specbench.selftest.tiny import VARIANTS, variant_for_seed


def test_cpu_runs_the_first_two_seeds():
    assert default_seeds("cpu") == (0, 1)


def test_cuda_runs_one_seed_per_variant(monkeypatch):
    monkeypatch.setattr(parallel, "device_class", lambda kind: "cuda")
    seeds = default_seeds("cpu")  # resolved as if it were a CUDA device
    assert sorted(variant_for_seed(s) for s in seeds) == sorted(VARIANTS)
