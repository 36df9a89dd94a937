"""Run `specbench serve`: load the engine, start its loop thread, serve the app with uvicorn (127.0.0.1 default)."""

from __future__ import annotations

import signal
import socket
import threading
import time
from dataclasses import dataclass

from specbench.backends.credentials import api_key_from_env
from specbench.errors import SpecbenchError
from specbench.runtime.hooks import EngineFault, mutant_label
from specbench.serve.app import build_app
from specbench.serve.config import ServeConfig
from specbench.serve.engine_loop import EngineLoop

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
STARTUP_TIMEOUT_S = 30.0


def _engine(config: ServeConfig, fault: EngineFault | None):
    from specbench.llm import create_engine

    engine = create_engine(config.engine, fault)  # load_model resolves the 'default' alias
    if config.draft_shape.is_tree:
        engine.set_draft_shape(config.draft_shape)  # refuses a method or target that cannot draft trees
    return engine


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise SpecbenchError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return sock


def _uvicorn_server(app, loop: EngineLoop, log_level: str, timeout_graceful_shutdown: int):
    """A uvicorn server whose shutdown first aborts every request in flight, so their responses end at once
    (an error event / HTTP 503) instead of running into uvicorn's graceful-shutdown timeout and cancellation."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            loop.abort_all()
            await super().shutdown(sockets=sockets)

    return Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=timeout_graceful_shutdown))


def serve(config: ServeConfig, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          fault: EngineFault | None = None) -> None:
    """Serve until SIGINT (Ctrl-C) or SIGTERM; then abort what is in flight and return cleanly. `fault`: test
    machinery (--inject), applied to the engine served."""
    api_key = api_key_from_env(config.api_key_env)
    sock = _bind(host, port)  # fail before loading models when the port is taken
    loop = EngineLoop(_engine(config, fault))
    loop.start()
    # uvicorn re-raises the signal that stopped it once it has shut down: with these handlers that is a no-op
    # (not a KeyboardInterrupt traceback, nor a death by SIGTERM before the engine thread is stopped).
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    fault_name = None if fault is None else fault.name
    try:
        app = build_app(loop, config, api_key, fault_name)
        server = _uvicorn_server(app, loop, config.log_level, timeout_graceful_shutdown=5)
        print(startup_line(config, host, sock.getsockname()[1], api_key is not None, fault_name), flush=True)
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        loop.stop()
        sock.close()
    print("specbench serve: stopped", flush=True)


def startup_line(config: ServeConfig, host: str, port: int, is_authenticated: bool, fault: str | None) -> str:
    """What `specbench serve` prints once it listens; a fault-injected engine says so first thing."""
    mutant = f"{mutant_label(fault)} (fault injected: not a real result) " if fault else ""
    shape = f", {config.draft_shape.label()}" if config.draft_shape.is_tree else ""
    auth = "API key required" if is_authenticated else "no authentication"
    return (f"specbench serve: {mutant}{config.model_name} on http://{host}:{port} (method {config.engine.method}, "
            f"k={config.engine.max_num_steps}{shape}; {auth})")


@dataclass
class RunningServer:
    """A server on a background thread (tests, notebooks): `url`, then `stop()`."""

    url: str
    loop: EngineLoop
    _server: object
    _thread: threading.Thread

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.loop.stop()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(config: ServeConfig, host: str = DEFAULT_HOST, port: int = 0, engine=None,
                 fault: EngineFault | None = None) -> RunningServer:
    """Start serving on a background thread; port 0 picks a free one. `engine`: an already built LLMEngine; else
    one is built from the config, with `fault` applied."""
    api_key = api_key_from_env(config.api_key_env)
    sock = _bind(host, port)
    loop = EngineLoop(engine if engine is not None else _engine(config, fault))
    loop.start()
    app = build_app(loop, config, api_key, None if fault is None else fault.name)
    server = _uvicorn_server(app, loop, config.log_level, timeout_graceful_shutdown=2)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="specbench-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            loop.stop()
            raise SpecbenchError("the server did not start")
        time.sleep(0.01)
    return RunningServer(f"http://{host}:{sock.getsockname()[1]}", loop, server, thread)
