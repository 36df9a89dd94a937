"""Workload registry (importable as `specbench.workloads`): name -> lazy factory of a `Workload`."""

from __future__ import annotations

import inspect
from typing import Any

from specbench.errors import SpecbenchError
from specbench.registry import Registry
from specbench.workloads.base import Workload

WORKLOADS: Registry[Workload] = Registry("workload")
# Workloads that measure speed only: outputs are random ids, so accuracy and output agreement mean nothing.
SPEED_ONLY_WORKLOADS = frozenset({"random"})


@WORKLOADS.register("gsm8k")
def _gsm8k(num_shots: int | None = None, fewshot_seed: int | None = None, max_tokens: int | None = None) -> Workload:
    from specbench.workloads.gsm8k import Gsm8kWorkload

    # None: the protocol's own (Gsm8kWorkload's defaults, declared once there)
    given = {"num_shots": num_shots, "fewshot_seed": fewshot_seed, "max_tokens": max_tokens}
    return Gsm8kWorkload(**{name: value for name, value in given.items() if value is not None})


@WORKLOADS.register("mt_bench")
def _mt_bench(max_tokens: int = 1024) -> Workload:
    from specbench.workloads.mt_bench import MtBenchWorkload

    return MtBenchWorkload(max_tokens=max_tokens)


@WORKLOADS.register("spec_bench")
def _spec_bench(max_tokens: int = 1024) -> Workload:
    from specbench.workloads.spec_bench import SpecBenchWorkload

    return SpecBenchWorkload(max_tokens=max_tokens)


@WORKLOADS.register("speed_bench")
def _speed_bench(
    path: str | None = None, split: str | None = None, categories: tuple[str, ...] = (), max_tokens: int | None = None
) -> Workload:
    from specbench.workloads.speed_bench import SpeedBenchWorkload

    # None: the workload's own defaults (declared once, in speed_bench_layout.py)
    given = {"path": path, "split": split, "max_tokens": max_tokens}
    return SpeedBenchWorkload(categories=categories, **{name: value for name, value in given.items() if value is not None})


@WORKLOADS.register("json_schema")
def _json_schema(max_tokens: int = 256) -> Workload:
    from specbench.workloads.json_schema import JsonSchemaWorkload

    return JsonSchemaWorkload(max_tokens=max_tokens)


@WORKLOADS.register("random")
def _random(
    input_len: int = 128, output_len: int = 128, num_prompts: int = 64, vocab_size: int | None = None
) -> Workload:
    from specbench.workloads.random_tokens import RandomTokensWorkload

    return RandomTokensWorkload(input_len, output_len, num_prompts, vocab_size)


@WORKLOADS.register("file")
def _file(path: str, max_tokens: int = 256) -> Workload:
    from specbench.workloads.custom_file import PromptFileWorkload

    return PromptFileWorkload(path, max_tokens=max_tokens)


FILE_PREFIX = "file:"  # --workload file:PATH


def workload_factory(spec: str) -> tuple[str, dict[str, Any]]:
    """`--workload` value -> (registry name, options it fixes): "file:PATH" -> ("file", {"path": PATH})."""
    if spec.startswith(FILE_PREFIX):
        path = spec[len(FILE_PREFIX):]
        if not path:
            raise SpecbenchError("--workload file:PATH needs a path after 'file:'")
        return "file", {"path": path}
    if spec == "file":
        raise SpecbenchError("--workload file needs a path: --workload file:PATH")
    if spec not in WORKLOADS:
        names = ["file:PATH" if name == "file" else name for name in WORKLOADS.supported()]
        raise SpecbenchError(f"unknown workload {spec!r}; supported: {', '.join(names)}")
    return spec, {}


def get_workload(spec: str, **options: Any) -> Workload:
    """Build workload `spec` (a registry name or file:PATH); unknown names or options raise SpecbenchError
    listing what is supported."""
    name, fixed = workload_factory(spec)
    options = {**options, **fixed}
    factory = WORKLOADS.get(name)
    params = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise SpecbenchError(
            f"workload {name!r} has no option(s) {', '.join(unknown)}; supported: {', '.join(params) or 'none'}"
        )
    return factory(**options)
