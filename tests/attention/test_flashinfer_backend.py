"""The flashinfer attention backend on CPU: metadata -> plan inputs, the not-importable fallback, and the backend's
wiring against a torch stand-in for flashinfer's wrappers (the real kernels run in test_flashinfer_gpu.py)."""

from __future__ import annotations

import random
import re
import sys

import pytest
import torch


from tests.support import fake_flashinfer  # noqa: E402

from specbench.attention import build_metadata, create_backend  # noqa: E402
from specbench.attention import flashinfer_backend  # noqa: E402
from specbench.attention.flashinfer_plan import paged_kv_plan_inputs  # noqa: E402
from specbench.attention.metadata import slot_of  # noqa: E402
from specbench.engine.builder import resolve_kernel_choice  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402

CPU = torch.device("cpu")


def test_plan_inputs_hand_computed():
    # block_size 4; request 0 owns one block more than its 5 keys need, which flashinfer must not see.
    md = build_metadata(positions=[3, 4, 3, 7, 8], num_query=[2, 1, 2], seq_lens=[5, 4, 9],
                        block_tables=[[7, 2, 11], [3], [9, 0, 5]], block_size=4, device=CPU)
    inp = paged_kv_plan_inputs(md)
    assert inp.qo_indptr.tolist() == [0, 2, 3, 5]
    assert inp.kv_indptr.tolist() == [0, 2, 3, 6]
    assert inp.kv_indices.tolist() == [7, 2, 3, 9, 0, 5]
    assert inp.kv_last_page_len.tolist() == [1, 4, 1]
    assert not inp.is_decode
    for t in (inp.qo_indptr, inp.kv_indptr, inp.kv_indices, inp.kv_last_page_len):
        assert t.dtype == torch.int32 and t.device.type == "cpu"


def test_plan_inputs_decode_only_when_every_request_has_one_query():
    decode = build_metadata(positions=[4, 0], num_query=[1, 1], seq_lens=[5, 1], block_tables=[[1, 0], [2]],
                            block_size=4, device=CPU)
    verify = build_metadata(positions=[4, 0, 1], num_query=[1, 2], seq_lens=[5, 2], block_tables=[[1, 0], [2]],
                            block_size=4, device=CPU)
    assert paged_kv_plan_inputs(decode).is_decode
    assert not paged_kv_plan_inputs(verify).is_decode


def random_metadata(rng: random.Random, device=CPU):
    block_size = rng.choice([1, 2, 4, 16])
    num_reqs = rng.randint(1, 6)
    seq_lens = [rng.randint(1, 70) for _ in range(num_reqs)]
    num_query = [rng.choice([1, min(s, 4), rng.randint(1, s)]) for s in seq_lens]
    needed = [-(-s // block_size) for s in seq_lens]
    spare = [rng.randint(0, 2) for _ in range(num_reqs)]  # tables may run past the keys written so far
    pool = list(range(sum(needed) + sum(spare) + 3))
    rng.shuffle(pool)
    tables, start = [], 0
    for n in (a + b for a, b in zip(needed, spare)):
        tables.append(pool[start:start + n])
        start += n
    positions = [s - n + j for s, n in zip(seq_lens, num_query) for j in range(n)]
    return build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=tables,
                          block_size=block_size, device=device)


@pytest.mark.parametrize("seed", range(20))
def test_plan_inputs_address_exactly_each_requests_keys(seed):
    md = random_metadata(random.Random(seed))
    inp = paged_kv_plan_inputs(md)
    bs = md.block_size
    indptr, indices, last = inp.kv_indptr.tolist(), inp.kv_indices.tolist(), inp.kv_last_page_len.tolist()
    assert inp.qo_indptr.tolist() == list(md.query_start_loc_cpu)
    for r, (table, seq_len) in enumerate(zip(md.block_tables_cpu, md.seq_lens_cpu)):
        pages = indices[indptr[r]:indptr[r + 1]]
        assert 1 <= last[r] <= bs
        assert (len(pages) - 1) * bs + last[r] == seq_len  # flashinfer's key count per request
        # the slot flashinfer reads for key p is the slot the KV store wrote for position p
        assert [pages[p // bs] * bs + p % bs for p in range(seq_len)] == [slot_of(table, p, bs)
                                                                            for p in range(seq_len)]
    assert inp.is_decode == all(n == 1 for n in (b - a for a, b in zip(md.query_start_loc_cpu,
                                                                       md.query_start_loc_cpu[1:])))


# --- choosing the backend: one stderr line and auto's choice where flashinfer cannot run ---

def test_not_importable_falls_back_to_triton_with_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # makes `import flashinfer` raise ImportError
    monkeypatch.setattr("specbench.engine.builder._triton_usable", lambda device: True)
    assert resolve_kernel_choice("flashinfer", torch.device("cuda"), "attention backend") == "triton"
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"flashinfer is not importable \(ModuleNotFoundError: .*flashinfer.*\); "
                        r"using the triton attention backend", lines[0]), lines[0]


def test_not_importable_without_triton_falls_back_to_torch(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flashinfer", None)
    monkeypatch.setattr("specbench.engine.builder._triton_usable", lambda device: False)
    assert resolve_kernel_choice("flashinfer", torch.device("cuda"), "attention backend") == "torch"
    assert capsys.readouterr().err.strip().endswith("using the torch attention backend")


def test_cpu_device_falls_back_to_torch(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flashinfer", fake_flashinfer.as_module())
    assert resolve_kernel_choice("flashinfer", CPU, "attention backend") == "torch"
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["flashinfer runs on CUDA only (device is cpu); using the torch attention backend"]


def test_importable_on_cuda_is_chosen_silently(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "flashinfer", fake_flashinfer.as_module())
    assert resolve_kernel_choice("flashinfer", torch.device("cuda"), "attention backend") == "flashinfer"
    assert capsys.readouterr().err == ""


def test_incomplete_flashinfer_is_reported(monkeypatch):
    module = fake_flashinfer.as_module()
    del module.BatchDecodeWithPagedKVCacheWrapper
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    reason = flashinfer_backend.flashinfer_import_error()
    assert reason == "flashinfer 0.0-fake lacks BatchDecodeWithPagedKVCacheWrapper"


def test_flashinfer_is_an_attention_backend_only():
    with pytest.raises(SpecbenchError, match="supported: auto, torch, triton$"):
        resolve_kernel_choice("flashinfer", CPU, "verifier")
    with pytest.raises(SpecbenchError, match="supported: auto, torch, triton, flashinfer"):
        resolve_kernel_choice("xformers", CPU, "attention backend")


def test_create_backend_without_flashinfer_says_which_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", None)
    with pytest.raises(SpecbenchError, match="needs the flashinfer-python package"):
        create_backend("flashinfer")
