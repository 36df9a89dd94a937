"""The selftest's setups per seed: the seed's tiny target, and per speculative method its tiny drafter and prompts.

Per seed: a tiny target (tiny.py: biased, no-bias tied Llama or Qwen3 q/k norm, by seed), a draft LM perturbed from
it, and per speculative method of the proposer registry its tiny drafter and prompts (drafters.py: EAGLE heads built
from the target's weights, n-gram on a copying variant of the target with prompts that repeat its own output).
"""

from __future__ import annotations

from specbench.check.engine_defaults import check_engine
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError
from specbench.selftest.drafters import TinyPair, build_method, selftest_methods
from specbench.selftest.tiny import build_tiny_pair, variant_for_seed
from specbench.selftest.tiny_hybrid import TARGET as HYBRID
from specbench.selftest.tiny_hybrid import build_hybrid_pair, hybrid_method_models
from specbench.selftest.tiny_mamba2 import TARGET as MAMBA2
from specbench.selftest.tiny_mamba2 import build_mamba2_pair
from specbench.selftest.tiny_window_moe import TARGET as WINDOW_MOE
from specbench.selftest.tiny_window_moe import build_window_moe_pair
from specbench.speculation.draft_shape import DraftShape

METHODS = selftest_methods()  # every registered speculative method
PLAIN = "none"  # the method of the production plain engine's row
# KV pool of every selftest engine: the sampled check's 400-request wave (~40 tokens each, 4 KB per 4-token block
# for the target drafting for itself) fits without preempting; engines are built ~450 times, and zeroing a larger
# pool each time was a tenth of the selftest's CPU time.
KV_CACHE_GB = 0.025
SEED_TARGET = ""  # a setup's target: "" = the seed's own tiny target (its variant cycles with the seed)
# Methods run on the sliding-window + MoE target (tiny_window_moe.py). The others cannot take it as their setups are:
# the EAGLE-1 / EAGLE-3 heads are built from a dense target layer's weights (tiny_eagle*.py), an MTP module refuses
# windowed targets (speculation/drafters/mtp/head.py), and n-gram's target is a copying variant of the biased one
# whatever the seed's target (drafters.py), so its row would repeat the seed's (a copying variant of this target,
# content heads silenced, sees 3 keys inside its 4-key window: tried, the target-side window bugs then passed the plain
# row's greedy check). The window bugs' hosts are the draft LM (the draft-side ones) and every method's verify (the
# target-side ones, the plain row's too).
WINDOW_MOE_METHODS = ("draft",)
# Methods run on the hybrid (Qwen3-Next) target (tiny_hybrid.py): the draft LM (a non-hybrid model: a hybrid one is
# refused), n-gram (its rounds mix zero-draft requests with drafting ones), EAGLE-3 (tiny_hybrid_eagle3.py: a head
# over the target's aux hidden states) and the target's own MTP module (its Qwen3-Next block). EAGLE-1's selftest head
# is built from a dense Llama-like layer (tiny_eagle1.py).
HYBRID_METHODS = ("draft", "ngram", "eagle3", "mtp")
# The hybrid target's one tree row (TREE_SHAPE; the hybrid target runs on the run's first seed only): the first of
# these the run has. The MTP module first, the drafter accepting most (~0.7), so that accepted paths reach depth 2 and
# 3, where a node's state continues a drafted parent's (recurrent/tree_verify.py) and state-tree-sibling shows in the
# tokens; then EAGLE-3 (~0.3), then the draft LM (accepting almost nothing: the invariant sweep's forced acceptance
# shows it). One row, not one per method: each costs about a chain row, and every tree drafter's trees on hybrids run
# in tests/models/test_hybrid_trees.py.
HYBRID_TREE_METHODS = ("mtp", "eagle3", "draft")
# Hybrid-state faults a method's hybrid row hosts but never exercises, so they do not run there (each runs and is
# caught on the target's other rows): a draft LM drafts k for every request, so its rounds have no zero-draft row to
# leave stale (nor does EAGLE-3 or MTP: every request drafts k once caught up); the plain row's greedy runs build a
# fresh engine each and never hand a slot used by one request's prefill to another's (the invariant sweep on the
# speculative rows reuses its engine across runs: it does).
HYBRID_NOT_EXERCISED = {"draft": ("state-zero-draft-stale",), "eagle3": ("state-zero-draft-stale",),
                        "mtp": ("state-zero-draft-stale",), PLAIN: ("state-slot-not-reset",)}
# Methods run on the Mamba-2 hybrid (Bamba) target (tiny_mamba2.py), with the hybrid target and on the first seed
# only: n-gram, whose rounds verify k + 1 positions and zero-draft rows beside each other through the Mamba-2 mixer
# (its paths); no faults run there (the hybrid-state faults run on the Qwen3-Next target).
MAMBA2_METHODS = ("ngram",)
TARGETS = (SEED_TARGET, WINDOW_MOE, HYBRID)  # the targets with shipped baselines (reference_baselines.py)
# Targets whose rows run the greedy check only (row_tasks.run_row), so no baseline is shipped for them.
GREEDY_ONLY_TARGETS = (MAMBA2,)
_EXTRA_METHODS = {WINDOW_MOE: WINDOW_MOE_METHODS, HYBRID: HYBRID_METHODS, MAMBA2: MAMBA2_METHODS}
# The tree rows' shape (each method that drafts trees, on the seed targets, at the run's k): two children per
# frontier node and a 6-node budget, so that at k = 3 the budget cuts the deepest level (the pruned tree, not the
# full one) and siblings, cousins and depth 3 all occur.
TREE_SHAPE = DraftShape(eagle_topk=2, num_draft_tokens=6)
# The chunked rows' engine options (each method once more on the seed targets, greedy and metrics checks only, the
# greedy one against the whole-prompt reference): an 8-token step budget splits every prompt longer than 8 tokens, and the requests admitted
# later have their chunks run beside the first ones' verifies (prefill.chunked_mixed, prefill.chunk_partial).
CHUNKED_OPTIONS = {"enable_chunked_prefill": True, "max_num_batched_tokens": 8}


def tree_methods(methods: tuple[str, ...]) -> tuple[str, ...]:
    """The methods of `methods` that draft trees (their proposer classes declare DraftsTrees), in `methods`' order."""
    from specbench.speculation.capabilities import DraftsTrees
    from specbench.speculation.registry import methods_with

    trees = set(methods_with(DraftsTrees))
    return tuple(m for m in methods if m in trees)


def target_tree_methods(target: str, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The methods of `methods` with a tree row on `target`: every one that drafts trees on the seed targets, the
    first of HYBRID_TREE_METHODS on the hybrid one, none on the window + MoE one (its windows refuse trees)."""
    if target == SEED_TARGET:
        return tree_methods(methods)
    return next(((m,) for m in HYBRID_TREE_METHODS if m in methods), ()) if target == HYBRID else ()


def target_methods(target: str, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The methods of `methods` a setup of `target` runs."""
    return methods if target == SEED_TARGET else tuple(m for m in methods if m in _EXTRA_METHODS[target])


def target_label(target: str, seed: int) -> str:
    """What the mutation table names a row's target by: the seed's variant, or the extra target's name."""
    return target or variant_for_seed(seed)


def check_methods(methods: tuple[str, ...]) -> None:
    unknown = set(methods) - set(METHODS)
    if unknown or not methods:
        raise SpecbenchError(f"selftest methods {', '.join(sorted(unknown)) or '(none)'} unknown; "
                             f"supported: {', '.join(METHODS)}")


def selftest_setups(root: str, seed: int, methods: tuple[str, ...], num_steps: int,
                    device: str = "cpu", engine_options: dict | None = None,
                    target_name: str = SEED_TARGET) -> dict[str, CheckSetup]:
    """One setup per method on the seed's tiny target (written under root; its variant, tiny.py, cycles with the
    seed so that the default seeds reach the biased and the fused layer paths), or with `target_name` WINDOW_MOE on
    the sliding-window + MoE target (WINDOW_MOE_METHODS of `methods` only), or HYBRID on the hybrid (Qwen3-Next)
    target (HYBRID_METHODS only), or MAMBA2 on the Mamba-2 hybrid (Bamba) target (MAMBA2_METHODS only). `engine_options`: EngineConfig fields
    over the check defaults (e.g. the Triton attention and verifier for a CPU run of CUDA's paths)."""
    check_methods(methods)
    if target_name not in TARGETS + GREEDY_ONLY_TARGETS:
        raise SpecbenchError(f"unknown selftest target {target_name!r}; supported: {WINDOW_MOE}, {HYBRID}, "
                             f"{MAMBA2} (or the seed's own)")
    methods = target_methods(target_name, methods)
    root = f"{root}/{seed}" + (f"-{target_name}" if target_name else "")
    if target_name == WINDOW_MOE:
        target, draft = build_window_moe_pair(root, seed=seed)
    elif target_name == HYBRID:
        target, draft = build_hybrid_pair(root, seed=seed)
    elif target_name == MAMBA2:
        target, draft = build_mamba2_pair(root, seed=seed)
    else:
        target, draft = build_tiny_pair(root, seed=seed, variant=variant_for_seed(seed))
    pair = TinyPair(root, seed, target, draft)
    options = {"seed": seed, "device": device, "kv_cache_gb": KV_CACHE_GB, **(engine_options or {})}
    base = check_engine(target=target, **options)  # plain: builds prompts
    setups = {}
    for m in methods:
        models = (hybrid_method_models(m, pair, base) if target_name in (HYBRID, MAMBA2)
                  else build_method(m, pair, base))
        setups[m] = CheckSetup(check_engine(target=models.target, method=m, draft=models.draft,
                                            max_num_steps=num_steps, **options), models.prompts)
    return setups


def plain_setup(setup: CheckSetup) -> CheckSetup:
    """The production plain engine on a speculative setup's target and prompts."""
    return setup.with_engine(method=PLAIN, draft=None, max_num_steps=0).with_inject(None)
