"""Acceptance of constrained requests with and without drafting under the grammar's mask, on the tests' tiny target
and draft pair (tests/support): drafted tokens, accepted, rate, tokens per round, mask time per step on the host.

    PYTHONPATH=. python scripts/grammar_acceptance.py [--device cuda] [--trees]

`--trees`: the draft LM and EAGLE-3 with chains (k = 3) and trees (eagle_topk 2, 6 nodes, depth 3) under the mask,
the mask time per step split into the verify's masks and the drafting walk's.

On CUDA (fp32, CUDA graphs as the engine builds them) the step is the GPU's and the mask work the host's: the mask
share printed is the host's mask time over the whole step's wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from specbench import LLM, SamplingParams
from tests.support.grammar_cases import bounded_specs
from tests.support.tiny_models import build_tiny_model, derive_draft, gsm8k_questions, load_tiny_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trees", action="store_true")
    args = ap.parse_args()
    device = args.device
    root = Path(tempfile.mkdtemp())
    build_tiny_model(root / "target", "llama", num_layers=2, seed=0)
    derive_draft(root / "target", root / "draft", noise=0.15, seed=1)
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    drafts = {"ngram": None, "draft": str(root / "draft"), "eagle3": build_tiny_eagle_head(root / "target",
                                                                                         root / "head")}
    tok = load_tiny_tokenizer()
    prompts = [tok(q)["input_ids"][:12] for q in gsm8k_questions("test")[:16]]
    specs = list(bounded_specs().values())
    params = [SamplingParams(max_tokens=48, grammar=specs[i % len(specs)]) for i in range(len(prompts))]
    if args.trees:
        return compare_trees(root, drafts, prompts, params, device)
    for method, draft in drafts.items():
        for is_masked in (False, True):
            llm = LLM(str(root / "target"), method=method, max_num_steps=3, device=device, dtype="fp32",
                      block_size=4, kv_cache_gb=0.05, draft=draft)
            book = llm.engine.step_runner.grammar
            book.is_drafting_masked = is_masked
            llm.generate(prompts[:2], params[:2])  # warm: compiles, graph captures, grammar compiles
            book.mask_seconds, book.num_mask_rows, first_step = 0.0, 0, len(llm.engine.step_stats)
            start = time.perf_counter()
            outs = llm.generate(prompts, params)
            seconds = time.perf_counter() - start
            drafted = sum(o.stats.num_draft_tokens for o in outs)
            accepted = sum(o.stats.num_accepted_tokens for o in outs)
            steps = len(llm.engine.step_stats) - first_step
            tokens = sum(len(o.output_token_ids) for o in outs)
            print(f"{method:6s} drafting under mask={is_masked!s:5s}: drafted {drafted:4d} accepted {accepted:4d} "
                  f"rate {accepted / max(drafted, 1):.3f}, {tokens / steps:.2f} tokens/step, mask "
                  f"{1e3 * book.mask_seconds / steps:.3f} ms/step ({book.num_mask_rows / steps:.1f} rows) of "
                  f"{1e3 * seconds / steps:.2f} ms/step ({book.mask_seconds / seconds:.1%} of the step) on {device}")


def compare_trees(root: Path, drafts: dict, prompts, params, device: str) -> None:
    from specbench.speculation.draft_shape import CHAIN, DraftShape

    for method in ("draft", "eagle3"):
        for shape in (CHAIN, DraftShape(eagle_topk=2, num_draft_tokens=6)):
            llm = LLM(str(root / "target"), method=method, max_num_steps=3, device=device, dtype="fp32",
                      block_size=4, kv_cache_gb=0.05, draft=drafts[method])
            llm.engine.set_draft_shape(shape)
            book = llm.engine.step_runner.grammar
            llm.generate(prompts[:2], params[:2])  # warm
            book.mask_seconds, book.draft_mask_seconds, book.num_mask_rows = 0.0, 0.0, 0
            first_step = len(llm.engine.step_stats)
            start = time.perf_counter()
            outs = llm.generate(prompts, params)
            seconds = time.perf_counter() - start
            steps = len(llm.engine.step_stats) - first_step
            accepted = sum(o.stats.num_accepted_tokens for o in outs)
            tokens = sum(len(o.output_token_ids) for o in outs)
            print(f"{method:6s} {shape.label():8s}: accepted {accepted:4d}, {tokens / steps:.2f} tokens/step, verify "
                  f"masks {1e3 * book.mask_seconds / steps:.3f} ms/step ({book.num_mask_rows / steps:.1f} rows), "
                  f"drafting walk {1e3 * book.draft_mask_seconds / steps:.3f} ms/step, step "
                  f"{1e3 * seconds / steps:.2f} ms on {device}")


if __name__ == "__main__":
    main()
