"""Qwen3-Next's gated attention on the fused kernels (models/gated_attention_fused.py, path
hybrid.gated_attention_fused, opt-in: SPECBENCH_PENDING_FUSIONS=on) gives the eager engine's greedy tokens on the tiny Qwen3-Next (fp32; the kernels under
the CPU interpreter, or on CUDA with SPECBENCH_TEST_DEVICE=cuda), plain and with a draft LM at k = 3 (verify rounds
of 4 tokens, batched over 3 requests), the state oracle clean; both mutants of the path caught by the same comparison.
The MoE twin, plain, takes the routing kernel's norm (moe.route_norm) in its 3-token decode steps."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
              pytest.mark.filterwarnings("ignore:invalid value encountered in divide")]

from tests.support.hf_greedy import tiny_prompt_ids  # noqa: E402
from tests.support.hybrid_runs import hybrid_llm, output_tokens, run_with_oracle  # noqa: E402
from tests.support.tiny_hybrid import build_tiny_hybrid  # noqa: E402
from tests.support.tiny_models import build_tiny_model  # noqa: E402

from specbench.faults import injection  # noqa: E402
from specbench.models import gated_attention_fused  # noqa: E402
from specbench.models.moe_kernel_sets import ROUTE_NORM_PATH  # noqa: E402

PROMPT_LENGTHS = (6, 13, 9)
MAX_TOKENS = 8


@pytest.fixture(autouse=True)
def pending_fusions_on(monkeypatch):
    monkeypatch.setenv("SPECBENCH_PENDING_FUSIONS", "on")  # opt-in until a GPU run (models/pending_fusions.py)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gated_attention_fused")
    build_tiny_hybrid(root / "target", seed=0)
    build_tiny_hybrid(root / "moe", seed=3, moe=True)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


def _run(target, fault=None, **options):
    llm = hybrid_llm(target, fault=fault, **options)
    outs, worst, num_checked = run_with_oracle(llm, tiny_prompt_ids(PROMPT_LENGTHS), MAX_TOKENS)
    assert num_checked > 0
    return llm, output_tokens(outs), worst


def _draft(dirs) -> dict:
    return {"method": "draft", "draft": str(dirs / "draft"), "max_num_steps": 3}


_EAGER: dict[tuple, list[list[int]]] = {}  # the eager engine's tokens, run once per target and method


def _eager_tokens(target, **options) -> list[list[int]]:
    key = (str(target), tuple(sorted(options.items())))
    if key not in _EAGER:
        _EAGER[key] = _run(target, fused_kernels="off", **options)[1]
    return _EAGER[key]


@pytest.mark.slow  # the Triton interpreter runs every fused layer: ~10 s a case
@pytest.mark.parametrize("case", ["plain", "draft", "moe-plain"])
def test_fused_gated_attention_gives_the_eager_engines_tokens(dirs, case):
    target = dirs / ("moe" if case == "moe-plain" else "target")
    options = _draft(dirs) if case == "draft" else {}
    want = _eager_tokens(target, **options)
    llm, got, worst = _run(target, fused_kernels="on", **options)
    assert got == want
    assert worst < 1e-4  # the state oracle
    taken = llm.engine.paths_taken()
    assert gated_attention_fused.PATH in taken
    # the MoE twin's decode steps (3 tokens) take the routing kernel's norm; the dense target has no MoE layer
    assert (ROUTE_NORM_PATH in taken) == (case == "moe-plain")


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["gated-attention-kv-slot-shift", "gated-attention-gate-shift"])
def test_each_mutant_of_the_fused_path_is_caught(dirs, fault):
    options = _draft(dirs)
    want = _eager_tokens(dirs / "target", **options)
    _, got, _ = _run(dirs / "target", fault=injection(fault), fused_kernels="on", **options)
    assert got != want
