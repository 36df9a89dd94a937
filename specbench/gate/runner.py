"""`run_gate`: run the gate's sweep (greedy, k = 0 and k, on an embedded engine or a server), read it back, write or
read the reference, and judge every stage that was not skipped."""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import ServerLaunchFailed, SpecbenchError
from specbench.gate.comparability import unless_outputs_differ
from specbench.gate.logprobs_collect import LogprobsRun
from specbench.gate.observed import Observation, read_observation
from specbench.gate.reference import (GateReference, GateSettings, check_matches, read_reference, reference_of,
                                      write_reference)
from specbench.gate.report import GateReport
from specbench.gate.stage import LOGPROBS, LOSSLESS, OUTPUTS, StageResult, Status, skipped
from specbench.gate.stage_interface import LogprobsSides, Probe, StageInputs
from specbench.gate.stages import GATE_STAGES, listed
from specbench.gate.tolerances import Tolerances
from specbench.runs.phase_progress import PhaseProgress
from specbench.runs.sweep_config import SweepConfig
from specbench.runtime.hooks import EngineFault, mutant_label


@dataclass(frozen=True)
class GateRequest:
    sweep: SweepConfig  # backend, engine or server, workload, prompts, budget, concurrency, repeats, results dir
    num_steps: int  # k gated (a --base-url server's own k: it only labels the run)
    stages: tuple[str, ...]  # to run, in stage order (the rest are reported SKIP)
    tolerances: Tolerances
    reference: Path | None = None  # compare against this file
    write_reference: Path | None = None  # record this run as the reference
    fault: EngineFault | None = None  # the fault sweep.inject names, applied to the embedded engine (test machinery)
    quiet: bool = False  # no progress on stderr: neither the sweep's (plan, cells) nor the gate's phases


def gate_sweep_config(request: GateRequest) -> SweepConfig:
    """Greedy, no warmup requests measured; k = 0 beside k where the gate controls k (embedded, --server-cmd); its
    plan and cells on stderr unless quiet (the sweep's own progress: the gate's longest phase)."""
    config = request.sweep
    fixed_server = config.base_url is not None and config.server_cmd is None
    steps = (request.num_steps,) if fixed_server or request.num_steps == 0 else (0, request.num_steps)
    return dataclasses.replace(config, temperature=(0.0,), num_steps=steps, speedup=False, quiet=request.quiet)


def settings_of(config: SweepConfig, num_steps: int) -> GateSettings:
    return GateSettings(config.workload, config.limit, config.shots, config.max_tokens, num_steps,
                        max(config.concurrency))


def run_gate(request: GateRequest) -> GateReport:
    from specbench.bench.sweep import run_sweep

    if request.num_steps < 1:
        raise SpecbenchError(f"--num-steps {request.num_steps}: the gate needs k >= 1 (a speculative run)")
    config = gate_sweep_config(request)
    if config.run_id is None:  # known in advance: a crash mid-run is told from a user error by the run's manifest
        # a random suffix: two gates started in the same second (a CI matrix, a test) never share a run directory
        config = dataclasses.replace(config, run_id=time.strftime("gate-%Y%m%d-%H%M%S-") + secrets.token_hex(3))
    settings = settings_of(config, request.num_steps)
    reference = None
    if request.reference is not None:
        reference = read_reference(request.reference)
        check_matches(reference, settings, request.reference)
    crash = None
    planned = Path(config.results_dir).expanduser() / str(config.run_id)
    progress = PhaseProgress("gate", 1 + (LOGPROBS in request.stages) + (LOSSLESS in request.stages)
                             + len(request.stages), quiet=request.quiet, estimate=False)
    sweep_phase = f"sweep (k={','.join(map(str, config.num_steps))}; {config.limit or 'all'} prompts)"
    progress.start(sweep_phase)
    fault_injected = config.inject  # or, after the sweep, what the server under test says it runs with
    try:
        swept = run_sweep(config, calibrate=False, fault=request.fault)
        run_dir, fault_injected = swept.run_dir, swept.fault_injected
    except ServerLaunchFailed as err:  # the server under test died before it was ready, or during a cell
        run_dir, crash = planned, str(err)
    except SpecbenchError as err:
        if not (planned / "manifest.json").is_file():
            raise  # before the run started: the user's settings, data or paths
        run_dir, crash = planned, str(err)  # a request or server failed mid-run: the system under test
    except Exception as err:  # noqa: BLE001 - the embedded engine raised: that is the verdict, as in check's rows
        from specbench.check.crash import crash_line

        run_dir, crash = planned, crash_line(err)
    progress.done(sweep_phase, "crashed" if crash else "")
    title = f"{_source(config, fault_injected)}, k={request.num_steps}, {config.workload}"
    if crash is not None:
        return GateReport(title, "not written: the run crashed" if request.write_reference else _where(request),
                          str(run_dir) if run_dir.is_dir() else "-", crashed_stages(crash, request.stages))
    try:
        observation = read_observation(run_dir, request.num_steps)
    except SpecbenchError:
        raise
    except Exception as err:  # noqa: BLE001 - a bug reading the run back: every stage unjudged, the report written
        return GateReport(title, _where(request), str(run_dir),
                          tuple(_crashed(name, err) if name in request.stages else skipped(name) for name in listed(request.stages)))
    logprobs = None
    if LOGPROBS in request.stages:
        progress.start("logprobs at k and k = 0")
        logprobs = _guarded(lambda: _logprobs(config, request.num_steps, run_dir, request.fault))
        progress.done("logprobs at k and k = 0")
    if request.write_reference is not None:
        write_reference(reference_of(observation, settings, _source(config, fault_injected),
                                     _reference_logprobs(None if isinstance(logprobs, Exception) else logprobs)),
                        request.write_reference)
    probe = None
    if LOSSLESS in request.stages:
        progress.start("near-tie probe")
        probe = _guarded(lambda: _probe(config, request.tolerances))
        progress.done("near-tie probe")
    stages = unless_outputs_differ(tuple(_judged(name, observation, reference, request, probe, logprobs, progress)
                                         if name in request.stages else skipped(name) for name in listed(request.stages)))
    where = _where(request) + ("" if reference is None else f" (measured on {reference.source})")
    return GateReport(f"{title} x {len(observation.spec_outputs)} prompts", where, str(run_dir), stages)


def _guarded(collect):
    """collect(), or the exception a bug in it raised (the stages that need it crash; the others are judged)."""
    try:
        return collect()
    except SpecbenchError:
        raise
    except Exception as err:  # noqa: BLE001
        return err


def _judged(name: str, observation: Observation, reference: GateReference | None, request: GateRequest,
            probe: Probe | None | Exception, logprobs: LogprobsSides | None | Exception,
            progress: PhaseProgress) -> StageResult:
    """One stage's verdict; a stage that raises inside specbench is CRASH (what raised, where), not an aborted gate."""
    progress.start(f"stage {name}", announce=False)  # judging a stage takes a moment: its verdict line is enough
    needed = {LOSSLESS: probe, LOGPROBS: logprobs}.get(name)
    if isinstance(needed, Exception):
        result = _crashed(name, needed)
    else:
        try:
            result = _stage(name, observation, reference, request, probe, logprobs)
        except SpecbenchError:
            raise
        except Exception as err:  # noqa: BLE001
            result = _crashed(name, err)
    progress.done(f"stage {name}", result.status.value)
    return result


def _crashed(name: str, err: BaseException) -> StageResult:
    from specbench.check.crash import crash_line

    return StageResult(name, Status.CRASH, "-", "-", "-", f"specbench {crash_line(err)} (a bug: no verdict)")


def crashed_stages(crash: str, chosen: tuple[str, ...]) -> tuple[StageResult, ...]:
    """The run stopped on a failed server or request: the outputs stage fails with why; nothing else was judged."""
    out = []
    for name in listed(chosen):
        if name not in chosen and name != OUTPUTS:
            out.append(skipped(name))
        elif name == OUTPUTS:  # a crash fails the gate even with --skip outputs: nothing else could be judged
            out.append(StageResult(OUTPUTS, Status.FAIL, "run crashed", "0 failed, empty or abnormally ended "
                                   "requests", "-", " ".join(crash.split())))
        else:
            out.append(StageResult(name, Status.NOT_AVAILABLE, "-", "-", "-", "the run crashed (see outputs)"))
    return tuple(out)


def _where(request: GateRequest) -> str:
    where = "none" if request.reference is None else str(request.reference)
    if request.write_reference is not None:
        where = f"written to {request.write_reference}" + ("" if request.reference is None else f", read {where}")
    return where


def _logprobs(config: SweepConfig, num_steps: int, run_dir: Path, fault: EngineFault | None) -> LogprobsSides:
    """Ask for logprobs at k and, where the gate sets k, at k = 0 (logprobs_collect.py); `fault` bends the embedded
    engine at k only."""
    from specbench.gate.logprobs_collect import embedded_logprobs, launched_logprobs, server_logprobs

    if config.is_embedded:
        return LogprobsSides(embedded_logprobs(config, num_steps, fault), embedded_logprobs(config, 0))
    if config.server_cmd is None:
        return LogprobsSides(server_logprobs(config, f"k={num_steps} server"), None)
    sides = []
    for k in (num_steps, 0):
        try:
            sides.append(launched_logprobs(config, k, run_dir / "servers"))
        except ServerLaunchFailed as err:  # it launched for the sweep: say why, as N/A, the outputs stage judged
            sides.append(LogprobsRun(f"k={k}", None, f"the k={k} server did not launch again: {err}"))
        if sides[0].samples is None:  # no logprobs at k: nothing to compare a k = 0 launch with
            return LogprobsSides(sides[0], None)
    return LogprobsSides(*sides)


def _reference_logprobs(sides: LogprobsSides | None) -> LogprobsRun | None:
    if sides is None:
        return None
    if sides.baseline is not None:
        return sides.baseline
    return dataclasses.replace(sides.now, label=sides.now.label.split()[0] + " server (no k = 0 run)")


def _stage(name: str, observation: Observation, reference: GateReference | None, request: GateRequest,
           probe: Probe | None, logprobs: LogprobsSides | None) -> StageResult:
    inputs = StageInputs(observation, reference, request.tolerances, request.sweep, request.num_steps, probe, logprobs,
                         request.fault)
    return GATE_STAGES.create(name).judge(inputs)


def _source(config: SweepConfig, fault_injected: str | None = None) -> str:
    """What was gated; a mutant (the run's --inject, or a server that says it runs one) carries the marker every table
    of a mutant run carries."""
    fault = fault_injected or config.inject
    inject = f" {mutant_label(fault)}" if fault else ""
    if config.server_cmd is not None:
        return f"server command {config.server_cmd!r}{inject}"
    if config.base_url is not None:
        return f"server {config.base_url}{inject}"
    e = config.engine
    return f"embedded {e.target} {e.method}{' ' + e.draft if e.draft else ''}{inject}"


def _probe(config: SweepConfig, tolerances: Tolerances) -> Probe | None:
    """The near-tie probe: the embedded engine's clean target (gate/engine_probe.py), or a --base-url server's
    logprobs for the gate's own prompts; a --server-cmd server is stopped by now (mismatches stay unclassified)."""
    if config.is_embedded:
        from specbench.gate.engine_probe import embedded_probe

        return embedded_probe(config, tolerances.near_tie_margin)
    if config.server_cmd is not None:
        return None
    from specbench.backends.credentials import auth_headers
    from specbench.backends.deadline import DeadlineClient
    from specbench.backends.near_tie import diagnose_turn
    from specbench.backends.openai_backend import OpenAIBackend
    from specbench.verification.first_turns import first_turns

    backend = OpenAIBackend(config)
    try:
        planned = first_turns(config, backend.tokenizer, tokenize=backend.can_tokenize)
        client = DeadlineClient(backend.root, auth_headers(backend.api_key))
        model, timeout = backend.model, backend.timeout_s
    finally:
        backend.close()
    prompts = {turn.sample.sample_id: turn.prompt for turn in planned.turns}

    def probe(sample_id: str, turn: int, ref_text: str, spec_text: str):
        return diagnose_turn(client, model, prompts.get(sample_id) if turn == 0 else None, ref_text, spec_text,
                             tolerances.near_tie_margin, timeout,
                             "chat or later-turn prompt: no text continuation to probe")

    return probe
