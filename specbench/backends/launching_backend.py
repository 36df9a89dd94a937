"""`--server-cmd`: specbench launches the server itself, once per (num-steps, draft tree shape) group of cells, and
drives each launch with the OpenAI backend. Logs go to <run_dir>/servers/k<num_steps>[-top<topk>[-n<budget>]].log
(and what the server said about itself to the .json beside it)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from specbench.backends.base import CellWindow
from specbench.backends.cache_reset import CacheReset
from specbench.backends.openai_backend import OpenAIBackend, local_tokenizer_of
from specbench.backends.server_process import ServerNotReady, ServerProcess, free_port, log_tail
from specbench.backends.server_template import LaunchValues, render, resolve_template
from specbench.errors import ServerLaunchFailed, SpecbenchError
from specbench.runs.cell_key import CellKey, launch_group, shape_suffix
from specbench.speculation.draft_shape import CHAIN, DraftShape
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import Turn, TurnPlanner, TurnSettings
from specbench.workloads.base import Sample

SERVERS_DIR = "servers"


def launch_argv(config: SweepConfig, num_steps: int, port: int, shape: DraftShape = CHAIN) -> tuple[str, ...]:
    """The argv of one (num-steps, shape) group's server; raises SpecbenchError for a value the template cannot take
    (or a preset for what its server cannot run)."""
    template = resolve_template(config.server_cmd, config.server_baseline_cmd, num_steps, config.engine.method, shape)
    flag = "--server-baseline-cmd" if num_steps == 0 and config.server_baseline_cmd is not None else "--server-cmd"
    values = LaunchValues(num_steps, config.engine.method, port, config.engine.target, config.engine.draft, shape)
    return render(template, values, flag)


def check_launches(config: SweepConfig, grid: Iterable[CellKey]) -> None:
    """Every launch of the grid renders: a bad value is refused before a run directory exists."""
    for key in dict.fromkeys(launch_group(key) for key in grid):
        launch_argv(config, key[0], 0, DraftShape(key[1], key[2] or None))


def launch_name(num_steps: int, shape: DraftShape = CHAIN) -> str:
    """A launch's log name: k3 (a chain, as before trees), k3-top4-n16."""
    return f"k{num_steps}{shape_suffix(shape)}"


def start_server(config: SweepConfig, num_steps: int, log_path: Path, shape: DraftShape = CHAIN) -> ServerProcess:
    """The server of one (num-steps, shape) group, started and ready (stopped again when it never gets ready)."""
    port = free_port()
    server = ServerProcess(launch_argv(config, num_steps, port, shape), port, log_path)
    server.start()
    try:
        server.wait_ready(config.server_ready_timeout)
    except ServerNotReady as why:
        server.stop()
        raise ServerLaunchFailed(f"the server {why} (log {_kept_log(log_path)}):\n{log_tail(log_path)}") from None
    except BaseException:
        server.stop()
        raise
    return server


def _kept_log(log_path: Path) -> Path:
    """A copy of a failed launch's log outside the run directory (a sweep that measured nothing removes it)."""
    kept = Path(tempfile.mkdtemp(prefix="specbench-server-")) / log_path.name
    try:
        shutil.copyfile(log_path, kept)
    except OSError:
        return log_path
    return kept


class LaunchingBackend:
    name = "openai"
    has_draft_stats = False

    def __init__(self, config: SweepConfig, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.tokenizer, self.can_tokenize = local_tokenizer_of(config)
        self._server: ServerProcess | None = None
        self._client: OpenAIBackend | None = None
        self._faults: set[str] = set()  # what the launched servers' /version said they run with
        self._num_steps: int | None = None
        self._shape: DraftShape | None = None

    def check_prompts(self, planner: TurnPlanner, samples: Sequence[Sample], config: SweepConfig,
                      settings: TurnSettings) -> None:
        if not samples:
            raise SpecbenchError(f"workload {config.workload} has no samples")
        for sample in samples:
            planner.first_turn(sample, settings)

    @property
    def server_fault(self) -> str | None:
        """The faults the servers launched so far say they run with (/version), joined; None before the first
        launch (the manifest then takes it once the cells ran: bench/sweep.py)."""
        return "+".join(sorted(self._faults)) or None

    def manifest_entries(self, config: SweepConfig) -> dict[str, Any]:
        return {
            "backend": {
                "name": self.name,
                "base_url": None,  # one loopback server per num-steps group; see server_launch
                "api_key_env": config.api_key_env,
                "server_launch": {
                    "template": config.server_cmd,
                    "baseline_template": config.server_baseline_cmd,
                    "adapter": config.server_adapter,
                    "logs": f"{SERVERS_DIR}/k<num_steps>[-top<eagle_topk>[-n<num_draft_tokens>]].log",
                },
                "server": {"model": config.server_model, "models": [], "models_error": None, "version": None},
                "tokenizer": config.engine.tokenizer or (config.engine.target if self.can_tokenize else None),
            },
            "device": {"type": "remote", "name": "launched loopback server", "dtype": None},
            "kv_pool": None,
            "models": {"target": {"path": config.engine.target, "weights_sha256": None},
                       "draft_source": config.engine.draft},
            "proposer": None,
            "engine_config": None,
        }

    def check_resume(self, run_dir: Path, manifest: dict[str, Any]) -> None:
        pass  # the launch templates are part of the run's config identity, checked by resume_config

    def start_cell(self, key: CellKey) -> None:
        if (key.num_steps, key.draft_shape) != (self._num_steps, self._shape):
            self._stop()
            self._launch(key.num_steps, key.draft_shape)
        self._live().start_cell(key)

    def reset_prefix_cache(self) -> CacheReset:
        return self._live().reset_prefix_cache()

    def run_turns(self, turns: Iterable[Turn], concurrency: int, *, id_prefix: str,
                  next_turn: Callable[[Turn, str], Turn | None] = lambda turn, completion: None,
                  on_finish: Callable[[FinishedTurn], None] | None = None) -> list[FinishedTurn]:
        finished = self._live().run_turns(turns, concurrency, id_prefix=id_prefix, next_turn=next_turn,
                                          on_finish=on_finish)
        code = self._server.process.poll() if self._server is not None and self._server.process else None
        if code is not None:  # its requests failed one by one: not a measurement of the server
            raise SpecbenchError(f"the launched server ({self._described()}) exited with status {code} "
                                 f"during the cell (log {_kept_log(self._server.log_path)})")
        return finished

    def begin_window(self) -> None:
        self._live().begin_window()

    def end_window(self) -> CellWindow:
        return self._live().end_window()

    def close(self) -> None:
        self._stop()

    def _live(self) -> OpenAIBackend:
        if self._client is None:
            raise RuntimeError("start_cell launches the server before a cell runs")
        return self._client

    def _described(self) -> str:
        shape = "" if self._shape is None or not self._shape.is_tree else f", {self._shape.label()}"
        return f"num-steps {self._num_steps}{shape}"

    def _launch(self, num_steps: int, shape: DraftShape) -> None:
        config = self.config
        logs = self.run_dir / SERVERS_DIR
        name = launch_name(num_steps, shape)
        server = self._server = start_server(config, num_steps, logs / f"{name}.log", shape)
        try:
            self._client = OpenAIBackend(dataclasses.replace(config, base_url=server.url),
                                         local_tokenizer=(self.tokenizer, self.can_tokenize))
        except SpecbenchError as err:  # e.g. an unreadable /v1/models: still nothing measured on this server
            self._stop()
            raise ServerLaunchFailed(
                f"the launched server (num-steps {num_steps}{shape_suffix(shape)}): {err}") from None
        self._num_steps, self._shape = num_steps, shape
        if self._client.info.fault:
            self._faults.add(self._client.info.fault)
        info = {"argv": list(server.argv), "port": server.port, "model": self._client.model,
                "models": list(self._client.info.models), "version": self._client.info.version}
        (logs / f"{name}.json").write_text(json.dumps(info, indent=2) + "\n")

    def _stop(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client, self._num_steps, self._shape = None, None, None
        if self._server is not None:
            self._server.stop()
        self._server = None
