"""Every check of a sweep config that needs neither data nor models (the registries of workloads, proposers,
backends, reasoning parsers and server adapters included)."""

from __future__ import annotations

import dataclasses
import math
import re

from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import OPTIMIZE_TARGETS, RAMP_UP_STRATEGIES, SweepConfig
from specbench.runtime.hooks import EngineFault

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_GRID = ("concurrency", "temperature", "num_steps")  # checked first, as the grid is what a sweep is


def validate_config(config: SweepConfig) -> None:
    """Every check that needs neither data nor models; raises SpecbenchError with one message."""
    from specbench.backends import BENCH_BACKENDS
    from specbench.workloads import workload_factory

    workload_factory(config.workload)
    BENCH_BACKENDS.get(config.backend)
    if config.is_embedded:  # over HTTP the method only labels what the server runs (and torch is not needed)
        from specbench.speculation.registry import PROPOSERS

        PROPOSERS.get(config.engine.method)
    _check_backend(config)
    _check_bounds(config, _GRID)
    if config.is_embedded and config.engine.method == "none" and config.max_num_steps > 0:  # a server picks its own
        raise SpecbenchError(
            f"--num-steps {','.join(map(str, config.num_steps))} needs a speculative --method (ngram, draft, ...)"
        )
    _check_bounds(config, [f.name for f in dataclasses.fields(SweepConfig)
                           if f.metadata.get("bounds") is not None and f.name not in _GRID])
    _check_draft_shapes(config)
    _check_load_pattern(config)
    if config.run_id is not None and not _RUN_ID.match(config.run_id):
        raise SpecbenchError(f"--run-id {config.run_id!r}: use letters, digits, '.', '_' and '-' only")


def _check_draft_shapes(config: SweepConfig) -> None:
    """Tree drafts need a drafter that grows trees and a k to grow them to; a budget needs a tree."""
    bad = [n for n in config.num_draft_tokens if n < 1]
    if bad:
        raise SpecbenchError(f"--num-draft-tokens must be >= 1, got {bad[0]}")
    if config.num_draft_tokens and not config.has_trees:
        raise SpecbenchError("--num-draft-tokens budgets tree drafts: give --eagle-topk above 1 too (a chain drafts "
                             "its num-steps tokens)")
    if not config.has_trees:
        return
    topk = ",".join(map(str, config.eagle_topk))
    if config.is_embedded:  # over HTTP a server's preset refuses what its server cannot draft (server_presets.py)
        # The proposer classes that declare DraftsTrees (the engine's set_draft_shape asks the same; this is the
        # check before anything loads; imported here, as over HTTP torch is not needed).
        from specbench.speculation.capabilities import DraftsTrees
        from specbench.speculation.registry import methods_with

        tree_methods = methods_with(DraftsTrees)
        if config.engine.method not in tree_methods:
            raise SpecbenchError(f"--eagle-topk {topk} (tree drafts) needs --method {', '.join(tree_methods)}; "
                                 f"method {config.engine.method!r} drafts chains only")
    if config.max_num_steps == 0:
        raise SpecbenchError(f"--eagle-topk {topk} (tree drafts) needs a speculative --num-steps (> 0)")


def check_fault(config: SweepConfig, fault: EngineFault | None) -> None:
    """The run records `config.inject`; the engine gets `fault`: one fault, or none."""
    name = None if fault is None else fault.name
    if config.inject != name:
        raise SpecbenchError(f"the run records fault {config.inject!r} but its engine would get {name!r}"
                             + (f": pass --inject {config.inject} (the run is that fault's mutant)"
                                if config.inject is not None else ""))


def _check_load_pattern(config: SweepConfig) -> None:
    from specbench.metrics.goodput import parse_goodput

    parse_goodput(config.goodput)
    if config.optimize not in OPTIMIZE_TARGETS:
        raise SpecbenchError(f"--optimize must be one of {', '.join(OPTIMIZE_TARGETS)}, got {config.optimize!r}")
    from specbench.backends.reasoning import REASONING_PARSERS

    if config.reasoning_parser is not None and config.reasoning_parser not in REASONING_PARSERS:
        raise SpecbenchError(f"--reasoning-parser must be one of {', '.join(REASONING_PARSERS)}, "
                             f"got {config.reasoning_parser!r}")
    if config.duration is not None and not (config.duration > 0 and math.isfinite(config.duration)):
        raise SpecbenchError(f"--duration must be a finite number of seconds > 0, got {config.duration}")
    ramp = (config.ramp_up_start_rps, config.ramp_up_end_rps)
    if config.ramp_up_strategy is None:
        if any(v is not None for v in ramp):
            raise SpecbenchError("--ramp-up-start-rps / --ramp-up-end-rps need --ramp-up-strategy linear")
        return
    if config.ramp_up_strategy not in RAMP_UP_STRATEGIES:
        raise SpecbenchError(f"--ramp-up-strategy must be one of {', '.join(RAMP_UP_STRATEGIES)}, "
                             f"got {config.ramp_up_strategy!r}")
    if any(v is None for v in ramp):
        raise SpecbenchError("--ramp-up-strategy needs --ramp-up-start-rps and --ramp-up-end-rps")
    if not all(v > 0 and math.isfinite(v) for v in ramp):
        raise SpecbenchError(f"--ramp-up-start-rps / --ramp-up-end-rps must be finite and > 0, got {ramp}")
    if not math.isinf(config.request_rate):
        raise SpecbenchError("--ramp-up-strategy sets the arrival rate itself: leave --request-rate out")


def _check_backend(config: SweepConfig) -> None:
    if config.is_embedded:
        for flag, value in (("--base-url", config.base_url), ("--model", config.server_model),
                            ("--api-key-env", config.api_key_env)):
            if value is not None:
                raise SpecbenchError(f"{flag} needs an HTTP backend (--backend openai)")
        return
    if config.inject is not None:
        raise SpecbenchError("--inject needs the embedded backend (faults are injected into specbench's engine)")
    for flag, seconds in (("--request-timeout", config.request_timeout), ("--info-timeout", config.info_timeout),
                          ("--metrics-timeout", config.metrics_timeout),
                          ("--cache-reset-timeout", config.cache_reset_timeout)):
        if not seconds > 0:  # NaN too
            raise SpecbenchError(f"{flag} must be > 0, got {seconds}")
    if config.server_cmd is not None:
        _check_server_launch(config)
        return
    if config.server_baseline_cmd is not None:
        raise SpecbenchError("--server-baseline-cmd needs --server-cmd")
    if not config.base_url or not config.base_url.startswith(("http://", "https://")):
        raise SpecbenchError(
            f"--backend {config.backend} needs --base-url http(s)://HOST:PORT, got {config.base_url!r}"
        )
    if len(config.grid_draft_shapes) != 1:
        raise SpecbenchError(
            f"--backend {config.backend}: the server's speculative config is fixed; give the one --eagle-topk / "
            "--num-draft-tokens it runs, or let specbench launch one server per shape (--server-cmd)")
    if len(config.num_steps) != 1:
        raise SpecbenchError(
            f"--backend {config.backend}: the server's speculative config is fixed; give the one --num-steps it runs "
            f"(0 for a non-speculative server), got {','.join(map(str, config.num_steps))}"
        )


def _check_server_launch(config: SweepConfig) -> None:
    from specbench.backends.server_adapters import SERVER_ADAPTERS
    from specbench.backends.launching_backend import check_launches
    from specbench.backends.server_template import check_template

    if config.base_url is not None:
        raise SpecbenchError("--server-cmd launches its own server: drop --base-url")
    check_template(config.server_cmd)
    if config.server_baseline_cmd is not None:
        check_template(config.server_baseline_cmd, "--server-baseline-cmd")
    from specbench.bench.grid import build_grid

    check_launches(config, build_grid(config))  # the values filled in ({model} {draft} ...) and each preset's refusals
    if config.server_adapter != "auto":
        SERVER_ADAPTERS.get(config.server_adapter)
    if not config.server_ready_timeout > 0:
        raise SpecbenchError(f"--server-ready-timeout must be > 0, got {config.server_ready_timeout}")


def _check_bounds(config: SweepConfig, names) -> None:
    """Each option's `bounds` (declared beside its SweepConfig field), in the order of `names`; a grid list needs a
    value and an unset option (None) passes."""
    fields = {f.name: f for f in dataclasses.fields(SweepConfig)}
    for name in names:
        value, flag, bounds = getattr(config, name), "--" + name.replace("_", "-"), fields[name].metadata["bounds"]
        if value is None:
            continue
        is_list = isinstance(fields[name].default, tuple)  # a grid list: each element
        values = list(value) if is_list else [value]
        if is_list and not values:
            raise SpecbenchError(f"{flag} needs at least one value")
        bad = [v for v in values if v is not None and not bounds.ok(v)]  # None: the workload's temperature
        if bad:
            raise SpecbenchError(f"{flag} must be {bounds.need}, got {bad[0]}")
