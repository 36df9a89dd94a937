"""The base of the mutants that bend a fast production path (issue 25): overlapped steps, rounds drafted ahead,
whole-round graphs, fused projections, the Triton verifier, the n-gram proposer, preemption.

Most bend from outside: `install` runs once on the built engine and wraps a public method or a function reference
held by that engine's own objects (engine, model layers, proposer, round graphs), so a clean engine pays nothing and
the production path stays exactly what users run. Where the bug sits inside the engine's own step (what an
overlapped launch is fed, what preemption leaves), production calls a named host-side hook there instead
(`PATH_HOOKS`, runtime/hooks.py; identity for a clean engine) and the mutant overrides it: no mutant patches a
private method. Drafting is left as production runs it
(whole-round graphs, rounds drafted ahead): forcing eager drafting would hide the very paths these bugs live on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specbench.faults.fault import Mutant


class PathMutant(Mutant):
    eager_drafting = False  # it bends its path in install() or through PATH_HOOKS


def wrap_method(obj: Any, name: str, make: Callable[[Callable], Callable]) -> None:
    """obj.name = make(obj.name) on this instance only (its class, and every other instance, stay clean)."""
    setattr(obj, name, make(getattr(obj, name)))


def recapture_target_graphs(engine) -> None:
    """The target's CUDA graphs were captured while the engine was built, through the clean forward: capture them
    again through the bent one. Off CUDA a "replay" reruns the forward, which is bent already."""
    graphs = engine.runner.graphs
    if graphs is None or not graphs.is_graph:
        return
    graphs.recapture()  # every query length the builder captured


def recapture_draft_graphs(engine) -> None:
    """The EAGLE / MTP proposer's draft-step and whole-round graphs were captured through the clean head while the
    engine was built: capture them again through the bent one (none off CUDA)."""
    proposer = engine.proposer
    plan = proposer.draft_graphs.plan
    if plan is None:
        return
    round_ks = sorted(proposer.round_graphs)
    proposer.round_graphs.clear()
    proposer.enable_cuda_graphs(plan)
    for k in round_ks:
        proposer.prepare_cuda_graphs(k)
