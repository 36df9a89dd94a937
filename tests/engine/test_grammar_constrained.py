"""Constrained decoding under speculation (issue 46): every method x k at temperature 0 gives output its grammar
allows, token for token the plain constrained engine's; preemption restores the grammar state (trees: test_grammar_trees.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("llguidance")

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402
from tests.support.grammar_cases import bounded_specs, output_problem  # noqa: E402

SPECS = bounded_specs()
MAX_TOKENS = 48


@pytest.fixture(scope="module")
def eagle_head(tiny_pair, tmp_path_factory) -> str:
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    return build_tiny_eagle_head(tiny_pair[0], tmp_path_factory.mktemp("grammar_eagle") / "head")


def _engine(tiny_pair, engine_env, method: str, k: int, draft: str | None = None, **options):
    device, dtype = engine_env
    kwargs = dict(dtype=dtype, device=device, block_size=4, kv_cache_gb=0.05, max_concurrency=4)
    if method != "none":
        kwargs.update(method=method, max_num_steps=3)
    if method == "draft":
        kwargs["draft"] = tiny_pair[1]
    if draft is not None:
        kwargs["draft"] = draft
    kwargs.update(options)
    engine = LLM(tiny_pair[0], **kwargs).engine
    if method != "none":
        engine.set_num_steps(k)
    return engine


def _run(engine, prompts, params):
    for prompt, p in zip(prompts, params):
        engine.add_request(prompt, p)
    return sorted(engine.run_until_done(), key=lambda o: int(o.request_id.split("-")[1]))


def _params(specs):
    return [SamplingParams(max_tokens=MAX_TOKENS, grammar=spec) for spec in specs]


@pytest.fixture(scope="module")
def plain_outputs(tiny_pair, engine_env, prompt_ids):
    engine = _engine(tiny_pair, engine_env, "none", 0)
    specs = list(SPECS.values())
    prompts = prompt_ids[: len(specs)]
    return engine, prompts, specs, _run(engine, prompts, _params(specs))


def test_plain_constrained_engine_gives_what_each_grammar_allows(plain_outputs):
    engine, _, specs, outputs = plain_outputs
    library = engine.step_runner.grammar.library
    problems = [output_problem(library, spec, out) for spec, out in zip(specs, outputs)]
    assert problems == [None] * len(specs)
    assert any(out.finish_reason == "stop" for out in outputs)  # at least some documents complete


@pytest.mark.parametrize("method,k", [("ngram", 0), ("ngram", 3), ("draft", 0), ("draft", 3)])
def test_speculation_keeps_the_plain_constrained_output(tiny_pair, engine_env, plain_outputs, method, k):
    _, prompts, specs, plain = plain_outputs
    engine = _engine(tiny_pair, engine_env, method, k)
    outputs = _run(engine, prompts, _params(specs))
    assert [o.output_token_ids for o in outputs] == [o.output_token_ids for o in plain]
    assert [o.finish_reason for o in outputs] == [o.finish_reason for o in plain]
    paths = engine.paths_taken()
    assert "grammar.mask" in paths and "grammar.violation" not in paths
    if k:
        assert f"proposer.{method}" in paths


@pytest.mark.parametrize("k", [0, 3])
def test_eagle3_keeps_the_plain_constrained_output(tiny_pair, engine_env, plain_outputs, eagle_head, k):
    _, prompts, specs, plain = plain_outputs
    engine = _engine(tiny_pair, engine_env, "eagle3", k, draft=eagle_head)
    outputs = _run(engine, prompts, _params(specs))
    assert [o.output_token_ids for o in outputs] == [o.output_token_ids for o in plain]
    assert "grammar.violation" not in engine.paths_taken()


@pytest.mark.parametrize("options", [dict(async_scheduling=True), dict(enable_chunked_prefill=True,
                                                                      max_num_batched_tokens=8)],
                         ids=["async_mixed_batch", "chunked_prefill"])
def test_unconstrained_neighbours_and_other_step_kinds_keep_the_output(tiny_pair, engine_env, plain_outputs,
                                                                       options):
    """Constrained and free requests in one batch, under overlapped decoding (constrained batches run synchronously)
    and chunked prefill (masks in mixed steps): the constrained ones as the plain engine's, the free ones as an
    engine without any constraint."""
    _, prompts, specs, plain = plain_outputs
    free = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    params = [p for spec in specs for p in (SamplingParams(max_tokens=MAX_TOKENS, grammar=spec), free)]
    doubled = [p for prompt in prompts for p in (prompt, prompt)]
    engine = _engine(tiny_pair, engine_env, "ngram", 3, **options)
    outputs = _run(engine, doubled, params)
    if "enable_chunked_prefill" in options:
        assert "prefill.chunked_mixed" in engine.paths_taken()
    reference = _run(_engine(tiny_pair, engine_env, "none", 0), prompts, [free] * len(prompts))
    assert [o.output_token_ids for o in outputs[0::2]] == [o.output_token_ids for o in plain]
    assert [o.output_token_ids for o in outputs[1::2]] == [o.output_token_ids for o in reference]


def test_drafting_under_the_mask_keeps_output_and_raises_acceptance(tiny_pair, engine_env, plain_outputs):
    _, prompts, specs, plain = plain_outputs
    rate = {}
    for is_masked in (True, False):
        engine = _engine(tiny_pair, engine_env, "draft", 3)
        engine.step_runner.grammar.is_drafting_masked = is_masked
        outputs = _run(engine, prompts, _params(specs))
        assert [o.output_token_ids for o in outputs] == [o.output_token_ids for o in plain]
        drafted = sum(o.stats.num_draft_tokens for o in outputs)
        rate[is_masked] = sum(o.stats.num_accepted_tokens for o in outputs) / drafted
    assert rate[True] > rate[False]


def test_preemption_rebuilds_the_grammar_from_committed_tokens(tiny_pair, engine_env, plain_outputs):
    _, prompts, specs, plain = plain_outputs
    engine = _engine(tiny_pair, engine_env, "ngram", 3, num_kv_blocks=30, max_concurrency=4)
    outputs = _run(engine, prompts, _params(specs))
    assert sum(s.num_preempted for s in engine.step_stats) > 0
    assert {"preemption", "grammar.rebuild"} <= engine.paths_taken()
    assert [o.output_token_ids for o in outputs] == [o.output_token_ids for o in plain]


def test_sampled_constrained_output_is_allowed(tiny_pair, engine_env, prompt_ids):
    engine = _engine(tiny_pair, engine_env, "draft", 3)
    specs = list(SPECS.values())
    params = [SamplingParams(max_tokens=MAX_TOKENS, grammar=s, temperature=1.0, seed=i) for i, s in enumerate(specs)]
    outputs = _run(engine, prompt_ids[: len(specs)], params)
    library = engine.step_runner.grammar.library
    assert [output_problem(library, s, o) for s, o in zip(specs, outputs)] == [None] * len(specs)


def test_a_bad_schema_fails_before_queueing(tiny_pair, engine_env, prompt_ids):
    from specbench.grammar.spec import GrammarSpec

    engine = _engine(tiny_pair, engine_env, "none", 0)
    with pytest.raises(SpecbenchError, match="invalid regex grammar"):
        engine.add_request(prompt_ids[0], SamplingParams(grammar=GrammarSpec.regex("(unclosed")))
    assert not engine.has_unfinished()
