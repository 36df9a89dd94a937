"""The selftest's constrained rows (issue 46): each method once more with every prompt decoding under a grammar, its
greedy check only (check/greedy_constrained.py: validity and identity with the plain constrained reference), where
the grammar mutants run. Needs the `grammar` extra (llguidance); without it the rows are skipped, saying so.

Grammars a tiny random model reaches the end of in a few tokens (an enum and a small integer; a short list of
yes/no), three requests per prompt (constrained_requests). Two of them first reason: each grammar starts after a
one-token marker read off the prompt's own unconstrained reference output (a stand-in for "</think>" the drafter
proposes: the rows after a drafted marker must be masked, grammar.reasoning_end_in_drafts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specbench.check.setup import CheckSetup
from specbench.grammar.spec import GrammarSpec

SCHEMA = {"type": "object", "properties": {"role": {"enum": ["admin", "user", "guest"]},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["role", "n"], "additionalProperties": False}
PATTERN = r"(yes|no)(, (yes|no)){1,3}"  # repeated items: n-gram drafts its own earlier ones, often rejected
# Output tokens per constrained request: a schema document is ~12 tokens of the tiny tokenizer, a reasoning section
# 2-4 more; most requests finish (EOS), the rest are judged as prefixes.
MAX_TOKENS = 20
# Where a prompt's marker is looked for in its reference output (first fit wins from the prompt's start, which
# cycles: a marker is a draft, not the token a round's verify emits, at some positions and not others, per drafter).
MARKER_STARTS = (1, 3)
MARKER_SPAN = 4
NO_EXTRA = "llguidance missing: constrained rows skipped (pip install 'specbench-cli[grammar]')"


def is_available() -> bool:
    from specbench.extras import is_installed

    return is_installed("grammar")


def _marker(tokenizer, output: Sequence[int], start: int) -> str | None:
    """A token of `output` at one of the MARKER_SPAN positions from `start` that is not seen before it and encodes
    back to itself alone (the reasoning gate matches token ids): its text, or None. The search stops at a special
    token (EOS among them: the constrained request, EOS honoured, would stop there, before any marker)."""
    specials = set(tokenizer.all_special_ids)
    for p in range(start, min(start + MARKER_SPAN, len(output))):
        token = output[p]
        if specials & set(output[:p + 1]):
            return None
        text = tokenizer.decode([token])
        if token not in output[:p] and tokenizer.encode(text, add_special_tokens=False) == [token]:
            return text
    return None


def constrained_requests(tokenizer, prompts: Sequence[Sequence[int]], reference: Sequence[Sequence[int]]
                         ) -> tuple[tuple[tuple[int, ...], ...], tuple[GrammarSpec, ...]]:
    """([3 * num_prompts] prompts, their grammars): per prompt (`reference`: its unconstrained reference output) one
    request whose prompt ends with an example document of its grammar (n-gram drafts from it: valid drafts the target
    often rejects, so the grammar must roll back), and two that reason first, under the other grammar, each to its own
    marker (one per MARKER_STARTS: a weak drafter's marker is accepted as a draft at a few of them only)."""
    out_prompts, specs = [], []
    for i, (prompt, output) in enumerate(zip(prompts, reference)):
        kinds = (SCHEMA_KIND, REGEX_KIND) if i % 2 == 0 else (REGEX_KIND, SCHEMA_KIND)
        example = tokenizer.encode(EXAMPLES[kinds[0]], add_special_tokens=False)
        out_prompts += [tuple(prompt) + tuple(example)] + [tuple(prompt)] * len(MARKER_STARTS)
        specs += [_spec(kinds[0], None)] + [_spec(kinds[1], _marker(tokenizer, output, s)) for s in MARKER_STARTS]
    return tuple(out_prompts), tuple(specs)


SCHEMA_KIND, REGEX_KIND = "json_schema", "regex"
EXAMPLES = {SCHEMA_KIND: '{"n":5,"role":"guest"} ', REGEX_KIND: "yes, yes, no "}


def _spec(kind: str, marker: str | None) -> GrammarSpec:
    return GrammarSpec.json_schema(SCHEMA, marker) if kind == SCHEMA_KIND else GrammarSpec.regex(PATTERN, marker)


def constrained_setup(setup: CheckSetup, reference: Sequence[Sequence[int]], tokenizer_dir: str) -> CheckSetup:
    """`setup` with its requests under grammars (constrained_requests), the tiny tokenizer (tiny_tokenizer.py) in its
    engines."""
    from specbench.models.tokenizer import load_tokenizer

    prompts, grammars = constrained_requests(load_tokenizer(tokenizer_dir), setup.prompts, reference)
    return replace(setup.with_engine(tokenizer=tokenizer_dir), prompts=prompts, grammars=grammars,
                   max_tokens=MAX_TOKENS)
