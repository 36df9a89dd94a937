"""One launched server: a child process in its own process group on a free loopback port, its output in a log file,
ready when /health or /v1/models answers 200, stopped with SIGTERM then SIGKILL (the whole group: no orphans)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from specbench.backends.deadline import DeadlineClient, ServerAnswerError
from specbench.backends.server_template import LOOPBACK
from specbench.errors import SpecbenchError
from specbench.runs.deadlines import READY_PROBE_TIMEOUT_S

READY_PATHS = ("/health", "/v1/models")
POLL_S = 0.2
STOP_GRACE_S = 10.0
LOG_TAIL_LINES = 20


def free_port() -> int:
    """A port nothing listens on now (the server binds it right after; a race with another process is reported)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def log_tail(path: Path, num_lines: int = LOG_TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("  | " + line for line in lines[-num_lines:]) or "  | (empty log)"


class ServerNotReady(Exception):
    """Why a launched server never became ready ("exited with status 3 before it was ready")."""


@dataclass
class ServerProcess:
    argv: tuple[str, ...]
    port: int
    log_path: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            try:  # a new session: the server and everything it spawns form one group that stop() signals
                self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True,
                                                preexec_fn=_die_with_parent)
            except OSError as err:
                raise SpecbenchError(f"cannot start server {self.argv[0]!r}: {err.strerror or err}") from None

    def wait_ready(self, timeout_s: float) -> None:
        """Returns once a readiness route answers 200; raises ServerNotReady when the server exits or the timeout
        passes (and stops it)."""
        deadline = time.monotonic() + timeout_s
        client = DeadlineClient(self.url)
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerNotReady(f"exited with status {code} before it was ready")
            # each probe is bounded too: a server that accepts and then stalls cannot hold this loop
            if any(_answers(client, path, max(0.1, min(READY_PROBE_TIMEOUT_S, deadline - time.monotonic())))
                   for path in READY_PATHS):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ServerNotReady(f"was not ready within {timeout_s:g} s (--server-ready-timeout)")
            time.sleep(POLL_S)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to the group, SIGKILL after `grace_s`; idempotent."""
        if self.process is None:
            return
        process, self.process = self.process, None
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # children that outlived their parent


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if specbench itself is killed outright (SIGKILL leaves no time to stop it).
    The signal follows the launching *thread*: launches happen on the sweep's own (main) thread."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _answers(client: DeadlineClient, path: str, deadline_s: float) -> bool:
    try:
        return client.get(path, deadline_s).status_code == 200
    except ServerAnswerError:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
