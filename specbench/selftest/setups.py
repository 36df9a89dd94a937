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

METHODS = selftest_methods()  # every registered speculative method
PLAIN = "none"  # the method of the production plain engine's row
# KV pool of every selftest engine: the sampled check's 400-request wave (~40 tokens each, 4 KB per 4-token block
# for the target drafting for itself) fits without preempting; engines are built ~450 times, and zeroing a larger
# pool each time was a tenth of the selftest's CPU time.
KV_CACHE_GB = 0.025


def check_methods(methods: tuple[str, ...]) -> None:
    unknown = set(methods) - set(METHODS)
    if unknown or not methods:
        raise SpecbenchError(f"selftest methods {', '.join(sorted(unknown)) or '(none)'} unknown; "
                             f"supported: {', '.join(METHODS)}")


def selftest_setups(root: str, seed: int, methods: tuple[str, ...], num_steps: int,
                    device: str = "cpu", engine_options: dict | None = None) -> dict[str, CheckSetup]:
    """One setup per method on the seed's tiny target (written under root; its variant, tiny.py, cycles with the
    seed so that the default seeds reach the biased and the fused layer paths). `engine_options`: EngineConfig fields
    over the check defaults (e.g. the Triton attention and verifier for a CPU run of CUDA's paths)."""
    check_methods(methods)
    target, draft = build_tiny_pair(f"{root}/{seed}", seed=seed, variant=variant_for_seed(seed))
    pair = TinyPair(f"{root}/{seed}", seed, target, draft)
    options = {"seed": seed, "device": device, "kv_cache_gb": KV_CACHE_GB, **(engine_options or {})}
    base = check_engine(target=target, **options)  # plain: builds prompts
    setups = {}
    for m in methods:
        models = build_method(m, pair, base)
        setups[m] = CheckSetup(check_engine(target=models.target, method=m, draft=models.draft,
                                            max_num_steps=num_steps, **options), models.prompts)
    return setups


def plain_setup(setup: CheckSetup) -> CheckSetup:
    """The production plain engine on a speculative setup's target and prompts."""
    return setup.with_engine(method=PLAIN, draft=None, max_num_steps=0).with_inject(None)
