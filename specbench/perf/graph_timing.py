"""Kernel timings the way a decode step runs them: many calls captured in one CUDA graph, then replayed."""

from __future__ import annotations

from collections.abc import Callable

import torch


def graphed_ms(fn: Callable[[int], object], num_calls: int) -> float:
    """Median ms of one call, from a graph of `fn(0) .. fn(num_calls - 1)`.

    Callers pass a layer index so every call reads different weights, as a step does: nothing stays in L2.
    """
    from triton.testing import do_bench  # GPU-only, and triton fixes its interpreter mode on first import

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(num_calls):  # compiles and warms up outside the capture
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(num_calls):
            fn(i)
    return do_bench(graph.replay, warmup=30, rep=200, return_mode="median") / num_calls
