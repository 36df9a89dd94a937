"""--limit on a category workload (MT-Bench, Spec-Bench) draws a seeded sample across categories, not the first N."""

from __future__ import annotations

from collections import Counter

from specbench.workloads import get_workload
from specbench.workloads.base import Sample
from specbench.workloads.data import resolve_data_source
from specbench.workloads.questions import sample_across_categories
from tests.support.tiny_models import data_dir


def _samples(num_per_category: int, categories: str = "abcd") -> tuple[Sample, ...]:
    # dataset order: all of a, then all of b, ... (MT-Bench's layout): the first N would be one category
    return tuple(Sample(sample_id=f"{c}{i}", category=c, turns=("q",)) for c in categories
                 for i in range(num_per_category))


def test_sample_spans_categories_evenly_is_seeded_and_keeps_dataset_order():
    samples = _samples(10)
    chosen = sample_across_categories(samples, 8, seed=0)
    assert Counter(s.category for s in chosen) == {"a": 2, "b": 2, "c": 2, "d": 2}
    assert list(chosen) == sorted(chosen, key=samples.index)
    assert chosen == sample_across_categories(samples, 8, seed=0)
    assert chosen != sample_across_categories(samples, 8, seed=1)
    assert sample_across_categories(samples, None, 0) == samples == sample_across_categories(samples, 40, 0)
    assert len(sample_across_categories(_samples(1), 3, 0)) == 3  # fewer than one per category: still N


def test_mt_bench_limit_covers_every_category():
    workload = get_workload("mt_bench")
    data = workload.load(resolve_data_source(data_dir()), 8, 0)
    assert len(data.samples) == 8 and len({s.category for s in data.samples}) == 8
