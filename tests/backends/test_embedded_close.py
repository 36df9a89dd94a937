"""`EmbeddedBackend.close` lets its engine go: the stress stage's after-restart condition builds a second engine in
the same process, and on an H100 that one found no room for a KV block while the first one's pool was still held."""

from __future__ import annotations

import gc
import weakref

from specbench.backends.embedded import EmbeddedBackend
from specbench.config import EngineConfig
from specbench.llm import create_engine
from specbench.runs.sweep_config import SweepConfig
from tests.support.tiny_models import build_tiny_model


def test_close_drops_the_engine_and_nothing_else_keeps_it(tmp_path):
    build_tiny_model(tmp_path, seed=0)
    config = EngineConfig(target=str(tmp_path), method="ngram", device="cpu", kv_cache_gb=0.01)
    backend = EmbeddedBackend(SweepConfig(engine=config), engine=create_engine(config))
    finished = backend.run_turns([], 1, id_prefix="none")
    engine = weakref.ref(backend.engine)
    backend.close()
    gc.collect()
    assert backend.engine is None and engine() is None and finished == []
    backend.close()  # twice: nothing left to release
