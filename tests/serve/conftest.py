"""A `specbench serve` over the tiny model shared by the hardening tests (one engine build for all of them)."""

from __future__ import annotations

import pytest

from tests.support.serve_probe import GUARDED_MAX_REQUEST_BYTES, guarded_engine_config


@pytest.fixture(scope="session")
def guarded_server(tiny_model_dir):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from specbench.serve import ServeConfig, start_server

    config = ServeConfig(guarded_engine_config(tiny_model_dir), served_model_name="tiny",
                         max_request_bytes=GUARDED_MAX_REQUEST_BYTES)
    with start_server(config) as running:
        yield running
