"""fla-core's gated-delta-rule kernels (`recurrent_kernels="fla"`) against our torch kernels on CUDA, fp32: one
Gated DeltaNet layer's committed / decode / verify / mixed rows (outputs, slots and kept states close), then the tiny
hybrid target through two engines, torch and fla, on plain decoding, n-gram k = 3 and a draft LM k = 3 at
concurrency 8 with chunked prefill: greedy tokens equal except at near-ties of the torch engine (top-2 margin below
NEAR_TIE_MARGIN nats: fla's chunked form differs from ours by ~2e-3 relative), INV-STATE after every step, the fla
paths taken. Match rates, tie counts and the worst differences go to $SPECBENCH_TEST_REPORT.

The reference is our own engine on the torch kernels, never HF transformers: with fla importable, the GPU image's
transformers (5.17) sends CPU tensors into fla's kernels. Runs where CUDA is available and fla imports:
    PYTHONPATH=.:/tmp/fla python -m pytest tests/recurrent/test_hybrid_fla_cuda.py
"""

from __future__ import annotations

import pytest
import torch

from tests.support.fla_layer_cases import CASES, compare_rows
from tests.support.gpu_report import record_gpu_result
from tests.support.hybrid_runs import NGRAM, PROMPT_LENGTHS, hybrid_llm

from specbench import SamplingParams
from specbench.backends.near_tie import NEAR_TIE_MARGIN
from specbench.check.state_oracle import state_diffs
from specbench.recurrent.kernel_choice import CHUNK_PATH, FLA, RECURRENT_PATH, TORCH, fla_import_error

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(torch.cuda.is_available() and fla_import_error() is not None,
                       reason="needs fla-core importable (pip install fla-core, or PYTHONPATH=...:/tmp/fla)"),
]

MAX_TOKENS = 24
ENGINE = {"device": "cuda", "max_concurrency": 8, "num_kv_blocks": 512, "enable_chunked_prefill": True,
          "max_num_batched_tokens": 16}  # 16: prompts split into chunks, batched beside decode/verify rows
CHUNKED_CASES = ("committed", "mixed")  # rows through fla's chunked kernel (TF32 dots): ~2e-3 relative
STATE_ATOL_FLA = 2e-2  # INV-STATE on the fla engine: its oracle prefill runs the chunked kernel; a wrong rollback
# is off by O(0.1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_fla_rows_match_the_torch_kernels(case):
    diff = compare_rows(case, torch.device("cuda"))
    record_gpu_result(f"fla_rows_{case.name}", {k: getattr(diff, k) for k in diff.__dataclass_fields__})
    assert diff.slots_conv == 0 and diff.kept_conv == 0  # the conv is ours on both sides
    rel = 2e-2 if case.name in CHUNKED_CASES else 1e-4
    for name in ("output", "slots_recurrent", "kept_recurrent"):
        assert getattr(diff, name) <= rel * max(diff.scale, 1.0), (name, diff)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    from tests.support.tiny_hybrid import build_tiny_hybrid
    from tests.support.tiny_models import build_tiny_model

    root = tmp_path_factory.mktemp("qwen3_next_fla_cuda")
    build_tiny_hybrid(root / "target", seed=0)  # transformers builds the weights only: no HF forward here
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


@pytest.fixture(scope="module")
def prompts():
    from tests.support.hf_greedy import tiny_prompt_ids

    return tiny_prompt_ids(PROMPT_LENGTHS)


def _first_divergence(a: tuple[int, ...], b: tuple[int, ...]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None if len(a) == len(b) else min(len(a),
                                                                                                        len(b)))


def _run(target, prompts, kernels: str, passes: int = 1, **kwargs):
    """(the LLM, outputs in prompt order with top-2 logprobs, pass after pass, the worst INV-STATE difference, slots
    checked): the state oracle after every step; later passes on the same engine hit the prefix cache."""
    llm = hybrid_llm(target, recurrent_kernels=kernels, **ENGINE, **kwargs)
    assert llm.engine.parts.recurrent_kernels == kernels
    engine = llm.engine
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=2)
    outputs, ids, worst, num_checked = {}, [], 0.0, 0
    for _ in range(passes):
        ids += [engine.add_request(p, params) for p in prompts]
        while engine.has_unfinished():
            for out in engine.step():
                outputs[out.request_id] = out
            for diff in state_diffs(engine):
                num_checked += 1
                worst = max(worst, diff.conv_max_abs, diff.recurrent_max_abs)
    return llm, [outputs[i] for i in ids], worst, num_checked


@pytest.mark.parametrize("case", ["plain", "ngram", "draft", "prefix-hits"])
def test_gpu_fla_engine_matches_the_torch_engine(dirs, prompts, case, monkeypatch):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "1")  # the engines' own invariants too, whatever the shell says
    kwargs = {"plain": {}, "ngram": dict(NGRAM), "prefix-hits": {"passes": 2},
              "draft": {"method": "draft", "draft": str(dirs / "draft"), "max_num_steps": 3}}[case]
    if case == "prefix-hits":  # one shared 17-token prefix, run twice: snapshots written by fla's rounds, then hit
        prompts = [prompts[1][:17] + p for p in prompts]
    ref_llm, ref, ref_worst, _ = _run(dirs / "target", prompts, TORCH, **kwargs)
    llm, got, worst, num_checked = _run(dirs / "target", prompts, FLA, **kwargs)
    assert ref_worst < 1e-4, ref_worst
    assert num_checked > 0 and worst < STATE_ATOL_FLA, worst

    same = total = 0
    near_ties, divergent = [], []
    for r, (want, have) in enumerate(zip(ref, got)):
        at = _first_divergence(want.output_token_ids, have.output_token_ids)
        total += len(want.output_token_ids)
        same += len(want.output_token_ids) if at is None else at
        if at is None:
            continue
        top = want.logprobs[at].top  # the torch engine's top-2 where the fla engine chose differently
        margin = top[0][1] - top[1][1]
        (near_ties if margin < NEAR_TIE_MARGIN else divergent).append((r, at, round(margin, 4)))
    rate = same / total
    record_gpu_result(f"fla_engine_{case}", {"match_rate": rate, "near_ties": near_ties, "divergent": divergent,
                                             "inv_state_worst": worst})
    assert not divergent, f"fla engine diverged away from near-ties: {divergent} (match rate {rate:.3f})"
    if case in ("ngram", "draft"):
        assert sum(o.stats.num_draft_tokens for o in got) > 0
    if case == "prefix-hits":
        assert {"hybrid.snapshot_take", "hybrid.snapshot_restore"} <= llm.engine.paths_taken()
    taken = llm.engine.paths_taken()
    assert {CHUNK_PATH, RECURRENT_PATH, "prefill.chunked_mixed", "hybrid.state_commit"} <= taken, taken
    assert not {CHUNK_PATH, RECURRENT_PATH} & ref_llm.engine.paths_taken()
