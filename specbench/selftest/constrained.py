"""The selftest's constrained rows (issue 46): each method once more with every prompt decoding under a grammar, its
greedy check only (check/greedy_constrained.py: validity and identity with the plain constrained reference), where
the grammar mutants run. Needs the `grammar` extra (llguidance); without it the rows are skipped, saying so.

Grammars a tiny random model reaches the end of in a few tokens (enums, small integers, a bounded pattern), each
prompt alternately a JSON schema and a regex. Every other prompt first reasons: its grammar starts after a one-token
marker read off its own unconstrained reference output at positions 1-3 (a stand-in for "</think>" the drafter
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
PATTERN = r"(yes|no), [0-9]{1,3}"
# Output tokens per constrained request: a schema document is ~12 tokens of the tiny tokenizer, a reasoning section
# 2-4 more; most requests finish (EOS), the rest are judged as prefixes.
MAX_TOKENS = 20
MARKER_POSITIONS = range(1, 6)  # where a marker is looked for in a reference output, first fit wins
NO_EXTRA = "llguidance missing: constrained rows skipped (pip install 'specbench-cli[grammar]')"


def is_available() -> bool:
    from specbench.extras import is_installed

    return is_installed("grammar")


def _marker(tokenizer, output: Sequence[int]) -> str | None:
    """A token of `output` at one of MARKER_POSITIONS that is not seen before it and encodes back to itself alone
    (the reasoning gate matches token ids): its text, or None. The search stops at a special token (EOS among them:
    the constrained request, EOS honoured, would stop there, before any marker)."""
    specials = set(tokenizer.all_special_ids)
    for p in (p for p in MARKER_POSITIONS if p < len(output)):
        token = output[p]
        if specials & set(output[:p + 1]):
            return None
        text = tokenizer.decode([token])
        if token not in output[:p] and tokenizer.encode(text, add_special_tokens=False) == [token]:
            return text
    return None


def grammars_for(tokenizer, reference: Sequence[Sequence[int]]) -> tuple[GrammarSpec, ...]:
    """[num_prompts] each prompt's grammar (module docstring); `reference` its unconstrained reference outputs."""
    specs = []
    for i, output in enumerate(reference):
        marker = _marker(tokenizer, output) if i % 2 else None
        specs.append(GrammarSpec.json_schema(SCHEMA, marker) if i % 4 < 2 else GrammarSpec.regex(PATTERN, marker))
    return tuple(specs)


def constrained_setup(setup: CheckSetup, reference: Sequence[Sequence[int]], tokenizer_dir: str) -> CheckSetup:
    """`setup` with every prompt under its grammar, the tiny tokenizer (tiny_tokenizer.py) in its engines."""
    from specbench.models.tokenizer import load_tokenizer

    grammars = grammars_for(load_tokenizer(tokenizer_dir), reference)
    return replace(setup.with_engine(tokenizer=tokenizer_dir), grammars=grammars, max_tokens=MAX_TOKENS)
