"""The engine's --cpu-threads reaches every thread that steps it: OpenMP keeps the thread count per thread, so a
setting made on the main thread alone would miss `specbench serve`'s engine thread (docs/benchmarks/
cpu-embedded-vs-serve.md)."""

from __future__ import annotations

import threading

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.runtime.cpu_threads import CpuThreads


@pytest.fixture
def set_calls(monkeypatch) -> list[tuple[int, int]]:
    """(num_threads, thread ident) of every torch.set_num_threads call; torch's real setting is left alone."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append((n, threading.get_ident())))
    return calls


def _on_thread(fn) -> int:
    thread = threading.Thread(target=fn)
    thread.start()
    thread.join(30)
    return thread.ident


def test_the_count_is_set_once_on_each_new_stepping_thread(set_calls):
    threads = CpuThreads(1)
    threads.on_step()
    threads.on_step()  # the same thread again: already set
    other = _on_thread(threads.on_step)
    assert set_calls == [(1, threading.get_ident()), (1, other)]


def test_no_count_leaves_torch_alone(set_calls):
    threads = CpuThreads(None)
    threads.on_step()
    _on_thread(threads.on_step)
    assert set_calls == []


@pytest.mark.parametrize("bad", [0, -2])
def test_a_count_below_one_is_refused(bad):
    with pytest.raises(SpecbenchError, match=r"cpu_threads \(--cpu-threads\) must be an integer in \[1, 4096\]"):
        EngineConfig(cpu_threads=bad)


def test_an_engine_stepped_on_another_thread_sets_the_count_there(tiny_pair, prompt_ids, set_calls):
    engine = LLM(tiny_pair[0], dtype="fp32", device="cpu", block_size=4, max_concurrency=2, kv_cache_gb=0.05,
                 cpu_threads=1).engine
    assert set_calls == []  # building the engine sets nothing: only stepping threads matter
    engine.add_request(prompt_ids[0], SamplingParams(max_tokens=3, ignore_eos=True))
    outputs: list = []
    stepper = _on_thread(lambda: outputs.extend(engine.run_until_done()))  # as serve's engine thread does
    assert len(outputs) == 1 and len(outputs[0].output_token_ids) == 3
    assert set_calls == [(1, stepper)]
