"""Tree rows of the GPU benchmark (scripts/bench_gpu.py --suite tree, issue 28's speed targets): plain, the EAGLE-3
chain and EAGLE-3 trees on one engine, each at its own synthetic acceptance, and the targets met or missed.

Synthetic acceptance for trees (speculation/synthetic/tree.py): per depth d and sibling rank r, the chance that the
rank-r child of a node on the true path is the true token, given that no lower-ranked child was, is
c_{d+1} * 0.5 ** r (c = the chain's conditional rates). A random-weight head scores its candidates almost uniformly,
so the trees it drafts are wide and shallow, unlike a trained head's; the measured tokens/step of a tree row is that
of the dummy's shapes. The *calibrated* tokens/step is the exact expected acceptance length of the tree a drafter
whose scores follow the law would draft (synthetic.tree.expected_tree): a round costs the same whatever its shape
(same number of nodes verified, same draft steps), so calibrated tok/s = concurrency * calibrated tokens/step /
measured step time. The tree targets are judged on the calibrated speedup; both are printed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from specbench.perf.gpu_perf import DecodeRow, measure_decode
from specbench.speculation.draft_shape import CHAIN, DraftShape
from specbench.speculation.synthetic.tree import (
    DEFAULT_RANK_DECAY,
    PUBLISHED_CHAIN_RATES,
    SGLANG_SETTING,
    SGLANG_SETTING_RATES,
    engine_table,
    expected_acceptance_length,
    expected_tree,
    extend_rates,
)

CHAIN_STEPS = 3  # the EAGLE-3 chain rows: k = 3 at PUBLISHED_CHAIN_RATES


@dataclass(frozen=True)
class TreeSetting:
    name: str  # key part of the result sections, e.g. "sglang"
    topk: int
    num_draft_tokens: int
    num_steps: int
    rates: tuple[float, ...]  # unconditional per-position rates (--synthetic-acceptance), one per step

    @property
    def shape(self) -> DraftShape:
        return DraftShape(self.topk, self.num_draft_tokens)

    def label(self) -> str:
        return f"eagle3 tree top-{self.topk}/{self.num_draft_tokens} k={self.num_steps}"


TREE_SETTINGS = (
    TreeSetting("sglang", *SGLANG_SETTING, SGLANG_SETTING_RATES),  # SGLang's defaults and their calibrated rates
    TreeSetting("small", 2, 6, 3, PUBLISHED_CHAIN_RATES),  # the chain's own rates: the tree's gain over k = 3
)
MAX_STEPS = max(CHAIN_STEPS, *(s.num_steps for s in TREE_SETTINGS))  # the engine's max_num_steps
ENGINE_RATES = extend_rates(PUBLISHED_CHAIN_RATES, MAX_STEPS)  # the engine's initial --synthetic-acceptance
# issue 28: (row key prefix, concurrency, goal speedup over plain decode tok/s)
TARGETS = (("chain", 1, 2.2), ("tree_sglang", 1, 2.4), ("tree_sglang", 16, 2.0))


def calibrated_acceptance_length(setting: TreeSetting) -> float:
    """E[accepted drafts + 1] per round of the tree a drafter following the law drafts (module docstring)."""
    table = engine_table(setting.rates, setting.num_steps, setting.topk, DEFAULT_RANK_DECAY)
    parents = expected_tree(table, setting.topk, setting.num_draft_tokens, setting.num_steps)
    return expected_acceptance_length(parents, table)


def chain_acceptance_length(rates: tuple[float, ...], num_steps: int) -> float:
    """E[accepted drafts + 1] of a k-chain at unconditional rates p_1..p_k: 1 + sum p_i."""
    return 1.0 + sum(extend_rates(rates, num_steps))


@dataclass(frozen=True)
class TreeRow:
    decode: DecodeRow  # measured: step times and the dummy's own tokens/step
    topk: int
    num_draft_tokens: int
    rates: tuple[float, ...]
    calibrated_tokens_per_step: float  # expected acceptance length at the law's tree shape (1 + k-sum for chains)
    calibrated_tok_s: float  # concurrency * calibrated_tokens_per_step / step time
    paths: tuple[str, ...]  # execution paths the measured runs took (graphed or eager verify)

    def to_dict(self) -> dict:
        return {**asdict(self), "decode": self.decode.to_dict()}


def measure_setting(llm, *, label: str, concurrency: int, shape: DraftShape, num_steps: int,
                    rates: tuple[float, ...], calibrated: float, **common) -> TreeRow:
    """One row at `shape` and `rates` (num_steps 0: plain decoding); the engine is left at the chain shape."""
    engine = llm.engine
    engine.set_num_steps(num_steps)
    engine.set_draft_shape(shape)
    if num_steps:
        engine.set_synthetic_acceptance(extend_rates(rates, MAX_STEPS))
    engine.reset_paths()
    try:
        row = measure_decode(llm, label=label, concurrency=concurrency, num_steps=num_steps, **common)
    finally:
        engine.set_draft_shape(CHAIN)
    return TreeRow(row, shape.eagle_topk, shape.num_draft_tokens or num_steps, tuple(rates), calibrated,
                   concurrency * calibrated / (row.step_ms / 1e3), tuple(sorted(engine.paths_taken())))


def tree_suite(put, llm, concurrency: tuple[int, ...], repeats_for, **common) -> None:
    """plain, chain k = 3 and every TREE_SETTINGS row at each concurrency, on one engine built with
    max_num_steps = MAX_STEPS and --synthetic-acceptance ENGINE_RATES; `put(key, dict)` stores each row."""
    for conc in concurrency:
        reps = repeats_for(conc)
        put(f"tree_plain_c{conc}", measure_setting(llm, label="plain", concurrency=conc, shape=CHAIN, num_steps=0,
                                                   rates=(), calibrated=1.0, repeats=reps, **common).to_dict())
        put(f"tree_chain_c{conc}", measure_setting(
            llm, label=f"eagle3 chain k={CHAIN_STEPS}", concurrency=conc, shape=CHAIN, num_steps=CHAIN_STEPS,
            rates=PUBLISHED_CHAIN_RATES, calibrated=chain_acceptance_length(PUBLISHED_CHAIN_RATES, CHAIN_STEPS),
            repeats=reps, **common).to_dict())
        for setting in TREE_SETTINGS:
            put(f"tree_tree_{setting.name}_c{conc}", measure_setting(
                llm, label=setting.label(), concurrency=conc, shape=setting.shape, num_steps=setting.num_steps,
                rates=setting.rates, calibrated=calibrated_acceptance_length(setting), repeats=reps,
                **common).to_dict())
