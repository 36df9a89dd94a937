"""The structured stage's run: the JSON workload (workloads/json_schema.py) through the gate's backend with
speculation off (k = 0) and on (k), each answer judged on its text (grammar/conformance.py). The embedded engine and a
launched server (--server-cmd) run both sides; a running server (--base-url) runs its own k only."""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from specbench.backends.reasoning import THINK_END
from specbench.grammar.conformance import judge
from specbench.runs.cell_key import CellKey
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner, TurnSettings
from specbench.runtime.hooks import EngineFault
from specbench.workloads.base import DataSource


# Finish reasons of a completed answer: "tool_calls" is a forced tool call's (OpenAI's, over HTTP).
COMPLETE_FINISH = ("stop", "tool_calls")


@dataclass(frozen=True)
class StructuredAnswer:
    sample_id: str
    category: str
    text: str
    finish_reason: str | None  # None: the request failed
    error: str | None  # why it failed (HTTP), else None
    is_valid: bool  # parses (JSON kinds)
    is_conformant: bool  # conforms to its schema / the tool call's parameters
    # Cut by length: its text is a prefix its grammar allows (checked with a fresh matcher over the target's
    # tokenizer); None where no tokenizer is at hand or the answer was not cut.
    is_prefix_valid: bool | None = None
    reasoned: str = ""  # how its reasoning came apart: "server" (reasoning_content), "inline" (split here), ""

    @property
    def is_ok(self) -> bool:
        """What the grammar promises: a completed answer conforms, an answer cut by length is a valid prefix."""
        if self.finish_reason in COMPLETE_FINISH:
            return self.is_conformant
        if self.finish_reason == "length":
            return self.is_prefix_valid is not False
        return False

    @property
    def is_server_error(self) -> bool:
        return self.error is not None and "http 5" in self.error


@dataclass(frozen=True)
class StructuredSide:
    num_steps: int
    answers: tuple[StructuredAnswer, ...]  # in sample order

    @property
    def num_conformant(self) -> int:
        return sum(a.is_conformant for a in self.answers)

    @property
    def num_ok(self) -> int:
        return sum(a.is_ok for a in self.answers)

    @property
    def finish_reasons(self) -> Counter:
        return Counter(a.finish_reason or "error" for a in self.answers)

    @property
    def num_inline_markers(self) -> int:
        """Answers judged whole that hold a reasoning end marker: a reasoning model's text from a server with no
        reasoning parser (the gate's --reasoning-parser think judges the part after it)."""
        return sum(not a.reasoned and THINK_END in a.text for a in self.answers)


@dataclass(frozen=True)
class StructuredRun:
    off: StructuredSide | None  # None: a running server's k is fixed (no speculation-off twin)
    on: StructuredSide


def run_structured(sweep: SweepConfig, num_steps: int, *, max_tokens: int, limit: int | None,
                   fault: EngineFault | None = None) -> StructuredRun:
    from specbench.backends import create_backend
    from specbench.workloads import get_workload

    workload = get_workload("json_schema", max_tokens=max_tokens)
    samples = workload.load(DataSource(None, "synthetic"), limit, sweep.engine.seed).samples
    is_two_sided = sweep.backend == "embedded" or sweep.server_cmd is not None
    config = dataclasses.replace(sweep, num_steps=(0, num_steps) if is_two_sided else (num_steps,),
                                 workload="json_schema")
    run_dir = Path(sweep.results_dir or tempfile.mkdtemp(prefix="specbench-structured-")).expanduser()
    run_dir.mkdir(parents=True, exist_ok=True)
    backend = create_backend(config, run_dir, fault)
    try:
        sides = [_side(backend, workload, samples, k, max_tokens, sweep)
                 for k in ((0, num_steps) if is_two_sided else (num_steps,))]
    finally:
        backend.close()
    return StructuredRun(sides[0] if is_two_sided else None, sides[-1])


def _side(backend, workload, samples, num_steps: int, max_tokens: int, sweep: SweepConfig) -> StructuredSide:
    concurrency = max(sweep.concurrency or (1,))
    backend.start_cell(CellKey(0, 0.0, concurrency, num_steps))
    has_template = getattr(backend.tokenizer, "chat_template", None) is not None
    planner = TurnPlanner(workload, backend.tokenizer, tokenize=backend.can_tokenize)
    settings = TurnSettings(temperature=0.0, max_tokens=max_tokens, top_p=1.0, top_k=-1,
                            chat_template=has_template, seed=sweep.engine.seed, repeat=0)
    turns = [planner.first_turn(sample, settings) for sample in samples]
    backend.begin_window()
    finished = backend.run_turns(iter(turns), concurrency, id_prefix=f"structured-k{num_steps}-")
    backend.end_window()
    by_id = {f.turn.sample.sample_id: f for f in finished}
    is_server_split = any(f.reasoning_text is not None for f in finished)  # a reasoning parser on the server
    library = _library(backend)
    answers = []
    for sample in samples:
        done = by_id[sample.sample_id]
        text, reasoned = judged_text(done.output.text or "", done.reasoning_text, sweep.reasoning_parser,
                                     is_server_split)
        verdict = judge(sample.grammar, text)
        failed = done.error is not None
        finish_reason = None if failed else done.output.finish_reason
        is_prefix_valid = None
        if finish_reason == "length" and library is not None:
            is_prefix_valid = is_valid_prefix(library, sample.grammar, text)
        answers.append(StructuredAnswer(sample.sample_id, sample.category, text, finish_reason, done.error,
                                        verdict.is_valid and not failed, verdict.is_conformant and not failed,
                                        is_prefix_valid, reasoned))
    return StructuredSide(num_steps, tuple(answers))


def judged_text(text: str, reasoning_text: str | None, reasoning_parser: str | None,
                is_server_split: bool = False) -> tuple[str, str]:
    """(the part of an answer its grammar governs, how its reasoning came apart). A server that split the reasoning
    off (`reasoning_content`: `reasoning_text`) sent the answer alone; `is_server_split`: it did so for another answer
    of the run, so this one's empty reasoning was simply not sent. With --reasoning-parser think and the reasoning
    inline, the answer is the text after the first </think>, as the engine's grammar starts there
    (grammar/reasoning.py): "" when none came (cut, or stopped, while thinking)."""
    if reasoning_text is not None:
        return text, "server"
    if reasoning_parser is None or is_server_split:
        return text, ""
    at = text.find(THINK_END)
    return ("" if at < 0 else text[at + len(THINK_END):]), "inline"


def _library(backend):
    """A grammar library over the backend's own tokenizer, or None (an HTTP server's stand-in, or no llguidance)."""
    from specbench.errors import SpecbenchError
    from specbench.grammar.library import GrammarLibrary

    tokenizer = backend.tokenizer if backend.can_tokenize else None
    if tokenizer is None or not hasattr(tokenizer, "backend_tokenizer"):  # llguidance needs a fast HF tokenizer
        return None
    try:
        return GrammarLibrary(tokenizer, len(tokenizer), frozenset())
    except SpecbenchError:
        return None


def is_valid_prefix(library, spec, text: str) -> bool:
    """Whether the grammar allows `text` as the start of an answer (re-tokenised: the grammar is over bytes)."""
    token_ids = library.tokenizer.encode(text, add_special_tokens=False)
    return library.matcher(spec).validate_tokens(token_ids) == len(token_ids)
