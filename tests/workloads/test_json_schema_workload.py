"""The JSON workload: a few dozen cases of every shape, each request constrained by its case's grammar, each schema
one llguidance compiles."""

from __future__ import annotations

from collections import Counter

import pytest

from specbench.workloads import get_workload
from specbench.workloads.base import DataSource


def test_cases_cover_every_shape_and_carry_their_grammar():
    workload = get_workload("json_schema", max_tokens=64)
    samples = workload.load(DataSource(None, "synthetic"), None, 0).samples
    assert len(samples) >= 30 and len({s.sample_id for s in samples}) == len(samples)
    assert set(Counter(s.category for s in samples)) == {"record", "nested", "enum", "array", "numeric", "tool_call"}
    params = workload.sampling_params(samples[0])
    assert params.grammar == samples[0].grammar and params.max_tokens == 64 and params.temperature == 0.0
    assert {s.grammar.kind for s in samples} == {"json_schema", "tool_call"}


def test_every_schema_compiles():
    pytest.importorskip("llguidance")
    from specbench.grammar.library import GrammarLibrary
    from tests.support.tiny_models import EOS_ID, VOCAB_SIZE, load_tiny_tokenizer

    library = GrammarLibrary(load_tiny_tokenizer(), VOCAB_SIZE, frozenset({EOS_ID}))
    for sample in get_workload("json_schema").load(DataSource(None, "synthetic"), None, 0).samples:
        library.matcher(sample.grammar)
