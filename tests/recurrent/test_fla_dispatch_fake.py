"""The "fla" recurrent-kernel dispatch on CPU, with fla-core's two entry points stood in by plain torch loops written
to fla's contract (tests/support/fake_fla.py; the real kernels need CUDA, tests/recurrent/test_hybrid_fla_cuda.py):
the layer packs committed rows into one varlen call, runs plain decode and uniform verifies as one batch per
position, a mixed forward's verify rows one request at a time, and writes outputs, slots and kept states where the
torch kernels do; an engine switched to it gives the torch engine's greedy tokens and records the fla paths."""

from __future__ import annotations

import pytest
import torch

from tests.support import fake_fla
from tests.support.fla_layer_cases import CASES, compare_rows
from tests.support.hybrid_runs import MAX_TOKENS, NGRAM, PROMPT_LENGTHS, hybrid_llm
from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.tiny_hybrid import build_tiny_hybrid

from specbench import SamplingParams
from specbench.recurrent.kernel_choice import CHUNK_PATH, FLA, RECURRENT_PATH, set_recurrent_kernels

# calls each case makes: committed rows in one varlen chunk call; decode one recurrent call; a verify of k + 1 = 4
# one per position; the mixed forward one per position of each verify request (1 + 4) and one chunk call
EXPECTED_CALLS = {"committed": {"chunk": 1}, "decode": {"recurrent": 1}, "verify": {"recurrent": 4},
                  "mixed": {"recurrent": 5, "chunk": 1}}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fla_rows_match_the_torch_kernels(case):
    with fake_fla.installed() as calls:
        diff = compare_rows(case, torch.device("cpu"))
        assert dict(calls) == EXPECTED_CALLS[case.name]
    # fp32, the same arithmetic in another order (the torch side's committed rows run the chunked form)
    for name in ("output", "slots_conv", "slots_recurrent", "kept_conv", "kept_recurrent"):
        assert getattr(diff, name) <= 2e-5 * max(diff.scale, 1.0), (name, diff)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_fla")
    build_tiny_hybrid(root / "target", seed=0)
    return root / "target"


def shared_prefix_prompts() -> list[list[int]]:
    """Every prompt behind one 17-token prefix (4 blocks of 4 and one token): the second pass hits the prefix cache
    and resumes the recurrent state from snapshots the fla rounds wrote."""
    prompts = tiny_prompt_ids(PROMPT_LENGTHS)
    return [prompts[1][:17] + p for p in prompts]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["plain", "ngram-chunked", "prefix-hits"])
def test_an_engine_on_the_fla_dispatch_gives_the_torch_engines_tokens(target, case):
    kwargs = {} if case != "ngram-chunked" else {**NGRAM, "enable_chunked_prefill": True,
                                                  "max_num_batched_tokens": 16}
    prompts = shared_prefix_prompts() if case == "prefix-hits" else tiny_prompt_ids(PROMPT_LENGTHS)
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    passes = 2 if case == "prefix-hits" else 1  # the second pass on the same engine hits the cache
    # eager: a CUDA graph captured at build replays the kernels of its capture, not the ones set afterwards
    kwargs["enforce_eager"] = True
    ref = hybrid_llm(target, **kwargs)
    want = [[o.output_token_ids for o in ref.generate(prompts, params)] for _ in range(passes)]
    llm = hybrid_llm(target, **kwargs)
    with fake_fla.installed() as calls:
        assert set_recurrent_kernels(llm.engine.runner.model, FLA) == 2  # the tiny target's two DeltaNet layers
        got = [[o.output_token_ids for o in llm.generate(prompts, params)] for _ in range(passes)]
    assert got == want
    assert calls["chunk"] > 0 and calls["recurrent"] > 0
    assert {CHUNK_PATH, RECURRENT_PATH} <= llm.engine.paths_taken()
    if case == "prefix-hits":
        assert {"hybrid.snapshot_take", "hybrid.snapshot_restore"} <= llm.engine.paths_taken()
