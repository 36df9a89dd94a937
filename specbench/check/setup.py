"""What a check runs on, and how it builds engines (debug invariants on or off per engine, as a config value)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from specbench.check.path_log import PathLog
from specbench.check.result import NOT_COVERED
from specbench.config import EngineConfig
from specbench.faults import injection
from specbench.grammar.spec import GrammarSpec
from specbench.llm import LLM
from specbench.speculation.draft_shape import CHAIN, DraftShape


@dataclass(frozen=True)
class CheckSetup:
    engine: EngineConfig  # the speculative engine under test; its max_num_steps is the k checked
    prompts: tuple  # [num_prompts] str or tuple of token ids
    max_tokens: int = 16
    # The fault the engines under test carry (specbench.faults; None: the production engine). References never do.
    inject: str | None = None
    # Where engines under test record the execution paths they took (check/battery.py gives each check its own).
    paths: PathLog | None = field(default=None, compare=False)
    # The drafts' shape on the engines under test (a tree: eagle_topk > 1, every decode round a tree round); the
    # references decode plainly whatever it is.
    draft_shape: DraftShape = CHAIN
    # [num_prompts] each prompt's grammar (constrained decoding, grammar/): the greedy check's requests decode under
    # it, EOS honoured, against the plain constrained reference; () = unconstrained (EOS ignored).
    grammars: tuple[GrammarSpec, ...] = ()

    @property
    def is_constrained(self) -> bool:
        return bool(self.grammars)

    def with_engine(self, **changes) -> CheckSetup:
        return replace(self, engine=replace(self.engine, **changes))

    def with_inject(self, inject: str | None) -> CheckSetup:
        return replace(self, inject=inject)


def build_llm(setup: CheckSetup, *, speculative: bool = True, invariants: bool = False, **overrides) -> LLM:
    """The setup's engine with `overrides` (EngineConfig fields); speculative=False gives the clean plain-decoding
    reference (no fault, no draft), whose execution paths are not coverage (check/path_log.py). `invariants`: the
    engine's debug_invariants (the battery's rule: on only in the invariant sweep), set explicitly whatever the
    environment says."""
    config = replace(setup.engine, debug_invariants=invariants, **overrides)
    if not speculative:
        config = replace(config, method="none", draft=None, max_num_steps=0)
    llm = LLM(config, fault=injection(setup.inject) if speculative else None)
    if speculative and setup.draft_shape.is_tree:
        llm.engine.set_draft_shape(setup.draft_shape)
    if speculative and setup.paths is not None:
        setup.paths.add_engine(llm.engine.paths)
    return llm


def prompt_list(setup: CheckSetup) -> list:
    return [p if isinstance(p, str) else list(p) for p in setup.prompts]


def forced_preemption_overrides(setup: CheckSetup, tokenizer, max_num_steps: int | None = None) -> dict:
    """Engine overrides whose KV pool admits a full batch of prompts but not their growth, so running requests are
    preempted; never smaller than what the longest request needs alone (it must be able to finish). `tokenizer`:
    the engine's, for text prompts (sized by their characters, a pool held them all with room to grow: issue 40's
    "with forced preemption (0 preemptions)"). Where the prompts cannot overfill any pool (one prompt; a windowed
    target releasing blocks as it goes), the run still preempts nothing: preemption_coverage says so."""
    def blocks(num_tokens: int) -> int:
        return -(-num_tokens // setup.engine.block_size)

    lengths = [num_prompt_tokens(p, tokenizer) for p in setup.prompts]
    extra = setup.max_tokens + (max_num_steps or setup.engine.max_num_steps) + 1
    alone = max(blocks(n + extra) for n in lengths) + 1
    batch = sum(sorted(blocks(n + 1) for n in lengths)[: setup.engine.max_concurrency]) + 1
    # Caching off: a preempted request recomputes everything it has, the path a state kept across preemption (a
    # drafter's, say) corrupts; recomputing on its own cached blocks is the shared-prefix scenario's and the engine
    # tests' (check/prefix_scenario.py, tests/engine/test_prefix_caching.py).
    return {"num_kv_blocks": max(alone, batch), "enable_prefix_caching": False}


def num_prompt_tokens(prompt, tokenizer) -> int:
    """A prompt's length in tokens: token ids as given, text encoded as LLMEngine.encode does."""
    if not isinstance(prompt, str):
        return len(prompt)
    return len(tokenizer(prompt, add_special_tokens=True)["input_ids"])


def num_preemptions(llm: LLM) -> int:
    return sum(s.num_preempted for s in llm.engine.step_stats)


class PreemptionCoverage(NamedTuple):
    is_missing: bool  # the run was meant to preempt and did not: the row says so (NOT_COVERED), it does not fail
    note: str  # for the row's detail; "" when it preempted


def preemption_coverage(llm: LLM) -> PreemptionCoverage:
    """Did a run meant to force preemption preempt? A check that says "with forced preemption" and passes without
    one preemption claims coverage it did not get. An engine releasing blocks outside its attention windows
    (every target layer windowed, no draft KV: engine/scheduler.py) holds about a window per request however long
    it grows, so no pool forces it: that is said, not failed."""
    if num_preemptions(llm) > 0:
        return PreemptionCoverage(False, "")
    if llm.engine.scheduler.kv_windows:
        return PreemptionCoverage(False, "no pool can force preemption here (every layer windowed: blocks are "
                                         f"released as requests grow): {NOT_COVERED}")
    return PreemptionCoverage(True, f"the forced-preemption run preempted nothing (too few or too short requests to "
                                    f"overfill a pool each can finish in: more --max-tokens): {NOT_COVERED}")

