"""`run_sweep`: validate, load data and the backend (models or server) once, run the missing cells, write each."""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from specbench.bench.cell_failure import discard_if_empty, kept_and_next
from specbench.bench.cell_runner import run_cell
from specbench.bench.cell_tables import cell_tables
from specbench.bench.drift import drift_columns, drift_fraction, is_probed, run_probe
from specbench.bench.grid import build_grid, run_groups
from specbench.bench.manifest import build_manifest, with_resume_session
from specbench.bench.plan import SweepPlan, print_plan
from specbench.bench.plan_sweep import plan_sweep
from specbench.bench.progress import Progress
from specbench.bench.recommend import Recommendation, write_recommendations
from specbench.bench.resume import check_same_data, resume_config
from specbench.bench.run_dir import create_run_dir, plan_run_dir
from specbench.bench.sampling_split import GroupSummary, group_summaries
from specbench.bench.store import MANIFEST, RunStore, WriteFailed, write_json
from specbench.bench.validate import check_fault, validate_config
from specbench.errors import Interrupted, ServerLaunchFailed, SpecbenchError
from specbench.runs.cell_key import CellKey
from specbench.runs.preflight import workload_options
from specbench.runs.records import Row
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.target_architecture import label_from_entry
from specbench.runs.turns import TurnPlanner, turn_settings
from specbench.runtime.hooks import EngineFault


@dataclass(frozen=True)
class SweepReport:
    run_dir: Path
    config: SweepConfig
    cells: tuple[Row, ...]  # every completed cell of the run (earlier sessions of a resumed run included)
    categories: tuple[Row, ...]
    num_cells_run: int  # by this call
    num_cells_skipped: int  # already complete (resume)
    recommendations: tuple[Recommendation, ...] = ()  # best k per grid point (sweeps with several num-steps)
    plan: SweepPlan | None = None  # what was announced before the first cell
    target_architecture: str = "-"  # the manifest's target, in words (backends/target_record.py)
    # acceptance and agreement per sampling mode (greedy / sampled, where a cell mixes them) and per category, with
    # request counts and intervals (bench/sampling_split.py)
    groups: tuple[GroupSummary, ...] = ()
    fault_injected: str | None = None  # the manifest's: the run's --inject, or what its server says it runs with


def run_sweep(config: SweepConfig, explicit: Collection[str] | None = None,
              confirm: Callable[[SweepPlan], None] | None = None, *, calibrate: bool = True,
              fault: EngineFault | None = None) -> SweepReport:
    """Run (or, with `config.resume`, finish) a sweep. Every user error is raised before a file is written.

    `explicit`: for --resume, the fields the user set; they must match the stored run (None: all fields).
    The plan (bench/plan.py) goes to stderr before the first cell; `confirm(plan)` may refuse it (raise);
    `calibrate`: time a few short requests for the plan's estimate; `fault`: the fault `config.inject` names
    (test machinery: the caller builds it, e.g. specbench.faults.injection), applied to the embedded engine.
    """
    from specbench.backends import create_backend
    from specbench.workloads import get_workload
    from specbench.workloads.data import resolve_data_source

    manifest = None
    if config.resume is not None:
        config, manifest = resume_config(Path(config.resume), config, explicit)
    validate_config(config)
    check_fault(config, fault)
    workload = get_workload(config.workload, **workload_options(config))
    data = workload.load(resolve_data_source(config.data_dir), config.limit, config.engine.seed)
    run_dir = Path(config.resume) if manifest is not None else plan_run_dir(config)
    grid = build_grid(config)

    backend = create_backend(config, run_dir, fault)
    try:
        chat_template = workload.is_chat if config.chat_template is None else config.chat_template
        planner = TurnPlanner(workload, backend.tokenizer, tokenize=backend.can_tokenize)
        backend.check_prompts(planner, data.samples, config, turn_settings(config, grid[0], chat_template))
        plan = plan_sweep(config, backend, planner, data.samples, grid, turn_settings(config, grid[0], chat_template),
                          run_dir, explicit, calibrate=calibrate)
        print_plan(plan, quiet=config.quiet)
        if confirm is not None:
            confirm(plan)
        if manifest is not None:
            backend.check_resume(run_dir, manifest)
            check_same_data(run_dir, manifest, data.data_sha256)
            write_json(run_dir / MANIFEST, with_resume_session(manifest), run_dir)
        else:
            sampling = _effective_sampling(planner, data.samples[0], config, grid[0], chat_template)
            cell_ids = [k.cell_id for k in grid]
            manifest = build_manifest(run_dir.name, config, backend, workload, data, cell_ids, sampling)
            create_run_dir(run_dir)
            try:
                write_json(run_dir / MANIFEST, manifest, run_dir)
            except WriteFailed:
                shutil.rmtree(run_dir, ignore_errors=True)  # nothing was kept: leave no run directory behind
                raise
        store = RunStore(run_dir, [key.cell_id for key in grid], config.max_num_steps)
        try:
            num_run = _run_missing_cells(backend, planner, data.samples, grid, config, chat_template, workload, store)
        except ServerLaunchFailed:  # a new run whose first server never got ready: leave no run directory behind
            if config.resume is None and not store.completed():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
        if not manifest.get("fault_injected") and backend.server_fault:  # servers launched per k said so only now
            manifest = {**manifest, "fault_injected": backend.server_fault}
            write_json(run_dir / MANIFEST, manifest, run_dir)
    finally:
        backend.close()
    recommendations = write_recommendations(run_dir, config.optimize) if config.has_choices else []
    target = (manifest.get("models") or {}).get("target") or {}
    return dataclasses.replace(_report(run_dir, config, store, grid, num_run), recommendations=tuple(recommendations),
                               plan=plan, target_architecture=label_from_entry(target.get("architecture")),
                               fault_injected=manifest.get("fault_injected"))


def _run_missing_cells(backend, planner, samples, grid, config, chat_template, workload, store: RunStore) -> int:
    """Run every cell without a completed part, writing each as it finishes; returns how many ran.

    Each group of a (repeat, temperature, concurrency) is bracketed by drift probes (bench/drift.py); its cells'
    drift columns are filled once the end probe ran (cells of an interrupted group keep them null).
    """
    store.open()
    todo = [key for key in grid if key.cell_id not in store.completed()]
    run_index = {key.cell_id: i for i, key in enumerate(grid)}
    progress = Progress(len(grid), len(grid) - len(todo), quiet=config.quiet)
    # A duration-bounded cell issues as many requests as fit in its duration: no total to show.
    num_requests = None if config.duration is not None else sum(sample.num_turns for sample in samples)
    is_new, key = config.resume is None, None
    try:
        for group in run_groups(todo):
            # Drift matters between a k = 0 cell and the others: only a group that runs both is probed (a resumed
            # group whose baseline ran in an earlier session keeps null drift columns).
            probed = is_probed(config) and group[0].num_steps == 0 and len(group) > 1
            probe = functools.partial(run_probe, backend, planner, samples, group[0], config, chat_template)
            start = probe("start") if probed else None
            for key in group:
                progress.start_cell(key.cell_id, num_requests)
                run = run_cell(backend, planner, samples, key, config, chat_template, progress.request_done)
                tables = cell_tables(store.run_dir.name, run, config, workload, store, run_index[key.cell_id])
                store.write_cell(key.cell_id, tables)
                progress.cell_done()
            if probed:
                drift = drift_fraction(start, probe("end"))
                store.update_cells({key.cell_id: drift_columns(store.rows("cells", key.cell_id)[0], drift)
                                    for key in group})
    except WriteFailed as err:
        raise SpecbenchError(f"{err}; {kept_and_next(store, len(grid), is_new, 'once space is freed')}") from None
    except ServerLaunchFailed:
        raise  # run_sweep removes a new run that measured nothing; its message says what the server did
    except SpecbenchError as err:  # a later turn too long for the context, a server gone mid-cell, ...
        raise SpecbenchError(f"cell {key.cell_id} failed: {err}; {kept_and_next(store, len(grid), is_new, 'then')}"
                             ) from None
    except KeyboardInterrupt:
        raise Interrupted(kept_and_next(store, len(grid), is_new, "finish with")) from None
    except BaseException:  # a bug: its traceback stays, but a new run that kept nothing leaves no directory
        discard_if_empty(store, is_new)
        raise
    finally:
        progress.close()
        store.close()
    return len(todo)


def _report(run_dir: Path, config: SweepConfig, store: RunStore, grid: tuple[CellKey, ...], num_run: int):
    done = [key.cell_id for key in grid if key.cell_id in store.completed()]
    cells = tuple(row for cell_id in done for row in store.rows("cells", cell_id))
    categories = tuple(row for cell_id in done for row in store.rows("categories", cell_id))
    groups = tuple(group_summaries([row for cell_id in done for row in store.rows("requests", cell_id)]))
    return SweepReport(run_dir, config, cells, categories, num_run, len(grid) - num_run, groups=groups)


def _effective_sampling(planner: TurnPlanner, sample, config: SweepConfig, key: CellKey, chat_template: bool) -> dict:
    """The first sample's sampling settings with workload defaults resolved (temperature: the grid's)."""
    params = planner.first_turn(sample, turn_settings(config, key, chat_template)).params
    fields = dataclasses.asdict(params)
    fields.pop("seed")
    fields["temperature"] = ["default" if t is None else t for t in config.temperature]
    return {**fields, "chat_template": chat_template}
