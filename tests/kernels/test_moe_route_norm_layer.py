"""A block's MoE half with its norm in the routing kernel (models/moe_forward.py normed_moe_forward, path
moe.route_norm, opt-in: SPECBENCH_PENDING_FUSIONS=on) == the norm first, then the MoE layer's eager torch reference
(models/moe.py); the mutant of the path (faults/moe_route_norm_half_written.py) caught by the same comparison; the
path taken exactly where it applies (and nowhere by default).

fp32 under the CPU interpreter at tiny shapes (once on by default, the CUDA selftest's window + MoE rows reach it).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),  # the interpreter's padded rows
]

from specbench.attention.metadata import PADDING_SLOT  # noqa: E402
from specbench.execution_paths import PATH_NAMES, PathRecorder  # noqa: E402
from specbench.faults import moe_route_norm_half_written  # noqa: E402
from specbench.models.layers import OffsetRMSNorm, RMSNorm  # noqa: E402
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_config import MoeConfig  # noqa: E402
from specbench.models.moe_forward import ROUTER_NORM_MAX_TOKENS, normed_moe_forward  # noqa: E402
from specbench.models.moe_kernel_sets import ROUTE_NORM_PATH  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN = 64
CONFIGS = {
    "qwen3": MoeConfig(HIDDEN, 8, 2, 48),
    "qwen3-next-shared-gated": MoeConfig(HIDDEN, 8, 2, 48, shared_intermediate_size=32, is_shared_expert_gated=True),
}


@pytest.fixture(autouse=True)
def pending_fusions_on(monkeypatch):
    monkeypatch.setenv("SPECBENCH_PENDING_FUSIONS", "on")  # opt-in until a GPU run (models/pending_fusions.py)


class _Metadata:  # the MoE half reads the slot mapping only
    def __init__(self, slots: list[int]) -> None:
        self.slot_mapping = torch.tensor(slots, device=DEVICE)


def _setup(name: str, is_offset: bool, seed: int = 0):
    torch.manual_seed(seed)
    moe = MoeMLP(CONFIGS[name]).to(DEVICE)
    norm = (OffsetRMSNorm if is_offset else RMSNorm)(HIDDEN, 1e-6).to(DEVICE)
    with torch.no_grad():
        norm.weight.normal_(std=0.5)
        if moe.shared_expert is not None:
            for p in moe.shared_expert.parameters():
                p.normal_(std=0.2)
            moe.shared_expert_gate.weight.normal_(std=0.2)
    moe.fused_policy = norm.fused_policy = "on"  # the kernels on the CPU too (the interpreter)
    return moe, norm


def _reference(moe: MoeMLP, norm: RMSNorm, x, residual, is_real):
    stream = x if residual is None else x + residual
    return moe(norm.reference(stream), is_real), stream  # the eager experts on the torch norm


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return torch.allclose(got, want, rtol=1e-4, atol=1e-5 * want.abs().max().item())


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("is_offset, has_residual", [(False, False), (True, True)])
@pytest.mark.parametrize("num_tokens", [1, 4])
def test_norm_in_the_router_matches_norm_then_reference(name, is_offset, has_residual, num_tokens):
    moe, norm = _setup(name, is_offset, seed=num_tokens)
    x = torch.randn(num_tokens, HIDDEN, device=DEVICE) * 2
    residual = torch.randn(num_tokens, HIDDEN, device=DEVICE) if has_residual else None
    slots = list(range(num_tokens))
    if num_tokens > 1:
        slots[-1] = PADDING_SLOT  # a graph's padding row: no expert, and no effect on the real rows
    is_real = torch.tensor([s != PADDING_SLOT for s in slots], device=DEVICE)
    recorder = PathRecorder(PATH_NAMES)
    with recorder.collecting() as taken:
        half = normed_moe_forward(moe, norm, x, residual, _Metadata(slots), recorder)
    assert ROUTE_NORM_PATH in taken
    want, want_stream = _reference(moe, norm, x, residual, is_real)
    assert torch.equal(half.stream, want_stream)
    assert _close(half.hidden, want)


def test_mutant_is_caught_against_the_reference():
    moe, norm = _setup("qwen3", is_offset=False, seed=3)
    x = torch.randn(4, HIDDEN, device=DEVICE) * 2
    md = _Metadata([0, 1, 2, 3])
    is_real = torch.ones(4, dtype=torch.bool, device=DEVICE)
    want, _ = _reference(moe, norm, x, None, is_real)
    assert _close(normed_moe_forward(moe, norm, x, None, md).hidden, want)  # clean
    moe_route_norm_half_written.bend(moe)
    assert not _close(normed_moe_forward(moe, norm, x, None, md).hidden, want)  # bent: caught


def test_path_taken_only_where_it_applies():
    # Past ROUTER_NORM_MAX_TOKENS, with the torch policy, or under another norm kind the norm runs first (no path).
    moe, norm = _setup("qwen3", is_offset=False)
    recorder = PathRecorder(PATH_NAMES)
    n = ROUTER_NORM_MAX_TOKENS + 1
    x = torch.randn(n, HIDDEN, device=DEVICE)
    with recorder.collecting() as taken:
        got = normed_moe_forward(moe, norm, x, None, _Metadata(list(range(n))), recorder)
    assert ROUTE_NORM_PATH not in taken
    assert _close(got.hidden, _reference(moe, norm, x, None, torch.ones(n, dtype=torch.bool, device=DEVICE))[0])
    moe.fused_policy = "off"
    with recorder.collecting() as taken:
        normed_moe_forward(moe, norm, x[:2], None, _Metadata([0, 1]), recorder)
    assert ROUTE_NORM_PATH not in taken


def test_off_by_default_and_a_bad_value_is_one_error(monkeypatch):
    from specbench.errors import SpecbenchError

    moe, norm = _setup("qwen3", is_offset=False)
    x = torch.randn(2, HIDDEN, device=DEVICE)
    recorder = PathRecorder(PATH_NAMES)
    monkeypatch.delenv("SPECBENCH_PENDING_FUSIONS")
    with recorder.collecting() as taken:
        normed_moe_forward(moe, norm, x, None, _Metadata([0, 1]), recorder)
    assert ROUTE_NORM_PATH not in taken
    monkeypatch.setenv("SPECBENCH_PENDING_FUSIONS", "yes")
    with pytest.raises(SpecbenchError, match="SPECBENCH_PENDING_FUSIONS='yes'; supported: off, on"):
        normed_moe_forward(moe, norm, x, None, _Metadata([0, 1]), recorder)
