"""An engine on --recurrent-kernels triton (kernels/gated_delta_verify.py for uniform verify rows) gives the torch
engine's greedy tokens on the tiny Qwen3-Next, with the state oracle recomputing every running request's state from
its committed tokens after every step: plain decode (one-token rows), a draft LM at k = 3 (every round a uniform
verify of 4), n-gram (zero-draft rows beside drafting ones: ragged steps run the torch forms) at concurrency 10.
The state-fused-kept-shifted mutant (its kept states one token late) is caught by both. With
SPECBENCH_TEST_DEVICE=cuda the engines capture CUDA graphs, so the fused kernels run inside them."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.support.hf_greedy import tiny_prompt_ids  # noqa: E402
from tests.support.hybrid_runs import NGRAM, PROMPT_LENGTHS, hybrid_llm, output_tokens, run_with_oracle  # noqa: E402
from tests.support.tiny_hybrid import build_tiny_hybrid, build_tiny_qwen3_5  # noqa: E402
from tests.support.tiny_models import build_tiny_model  # noqa: E402

from specbench.errors import SpecbenchError  # noqa: E402
from specbench.faults import injection  # noqa: E402
from specbench.recurrent.kernel_choice import TRITON, TRITON_VERIFY_PATH, resolve_recurrent_kernels  # noqa: E402

MAX_TOKENS = 10


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("triton_verify_engine")
    build_tiny_hybrid(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    build_tiny_qwen3_5(root / "qwen3_5", seed=1)  # the split projections' column maps
    return root / "target", root / "draft"


def _options(case: str, draft) -> dict:
    return {"plain": {}, "draft": dict(method="draft", draft=str(draft), max_num_steps=3), "ngram": NGRAM}[case]


def _run(target, fault=None, **options):
    llm = hybrid_llm(target, fault=fault, **options)
    outs, worst, num_checked = run_with_oracle(llm, tiny_prompt_ids(PROMPT_LENGTHS), MAX_TOKENS)
    assert num_checked > 0
    return llm, output_tokens(outs), worst


@pytest.mark.slow  # the Triton interpreter on CPU: ~10-25 s a case
@pytest.mark.parametrize("case", ["plain", "draft", "ngram"])
def test_triton_verify_engine_gives_the_torch_engines_tokens(dirs, case):
    target, draft = dirs
    _, want, _ = _run(target, **_options(case, draft))
    llm, got, worst = _run(target, recurrent_kernels="triton", **_options(case, draft))
    assert got == want
    assert worst < 1e-4  # the state oracle: every slot == the state recomputed from the committed tokens
    assert TRITON_VERIFY_PATH in llm.engine.paths_taken()
    assert llm.engine.parts.recurrent_kernels == TRITON


@pytest.mark.slow
def test_triton_verify_engine_on_qwen3_5_gives_the_torch_engines_tokens(dirs):
    target, draft = dirs
    qwen3_5 = target.parent / "qwen3_5"
    _, want, _ = _run(qwen3_5, **_options("draft", draft))
    llm, got, worst = _run(qwen3_5, recurrent_kernels="triton", **_options("draft", draft))
    assert got == want
    assert worst < 1e-4
    assert TRITON_VERIFY_PATH in llm.engine.paths_taken()


@pytest.mark.slow
def test_kept_states_one_token_late_are_caught(dirs):
    target, draft = dirs
    options = _options("draft", draft)
    _, want, _ = _run(target, **options)
    _, got, worst = _run(target, fault=injection("state-fused-kept-shifted"), recurrent_kernels="triton", **options)
    assert got != want
    assert worst > 1e-2


def test_triton_kernels_are_refused_where_they_cannot_run(monkeypatch):
    import torch

    from specbench.kernels import gated_delta_verify
    from specbench.models.recurrent_kernels import check_triton_recurrent_kernels

    assert resolve_recurrent_kernels("triton", torch.device("cpu")) == TRITON  # where it runs: the check below
    monkeypatch.setattr(gated_delta_verify, "runs_interpreted", lambda: False)
    with pytest.raises(SpecbenchError, match="--recurrent-kernels triton runs on CUDA"):
        check_triton_recurrent_kernels(torch.device("cpu"))
    check_triton_recurrent_kernels(torch.device("cuda"))  # no error


def test_a_mamba2_hybrid_says_it_runs_the_torch_forms(tmp_path, capsys):
    """The choice applies to Gated DeltaNet layers: a Mamba-2 hybrid asked for triton kernels says so in one line
    and records what ran (torch), never a kernel choice its layers did not take."""
    from specbench.selftest.tiny_mamba2 import build_mamba2_pair

    target, _ = build_mamba2_pair(tmp_path / "bamba", seed=0)
    llm = hybrid_llm(target, recurrent_kernels="triton")
    assert llm.engine.parts.recurrent_kernels == "torch"
    assert "recurrent layers are Mamba-2 and run the torch forms" in capsys.readouterr().err
