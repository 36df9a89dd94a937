"""A sweep config holds one EngineConfig, yet stores the flat manifest `config` it always did: runs written before
the engine options moved into `SweepConfig.engine` still resume and compare."""

from __future__ import annotations

import dataclasses
import json

from specbench.bench.resume import resume_config
from specbench.bench.run_dir import default_run_id
from specbench.check.setup import CheckSetup
from specbench.config import ENGINE_OPTION_NAMES, EngineConfig
from specbench.runs.schema import SCHEMA_VERSION
from specbench.runs.sweep_config import FLAT_NAMES, RUN_LOCAL_FIELDS, SweepConfig

# manifest.json `config` of a run written when SweepConfig repeated EngineConfig's fields (same schema version).
STORED = json.loads("""{"workload": "gsm8k", "data_dir": null, "limit": null, "shots": null, "chat_template": null,
"max_tokens": null, "input_len": null, "output_len": null, "concurrency": [1, 4], "temperature": [0.0, null],
"num_steps": [0, 3], "speedup": true, "top_p": 1.0, "top_k": -1, "request_rate": 2.0, "burstiness": 1.0,
"duration": null, "ramp_up_strategy": null, "ramp_up_start_rps": null, "ramp_up_end_rps": null, "cache_reset": true,
"goodput": [], "optimize": "throughput", "reasoning_parser": null, "warmup": null, "repeats": 1, "seed": 3,
"inject": "bonus-from-wrong-row", "backend": "embedded", "base_url": null, "server_model": null, "api_key_env": null,
"request_timeout": 600.0, "server_cmd": null, "server_baseline_cmd": null, "server_adapter": "auto",
"server_ready_timeout": 600.0, "target": "default", "method": "draft", "draft": "d", "dtype": "auto",
"device": "auto", "load_format": "auto", "allow_pickle": false, "tokenizer": null, "kv_cache_gb": null,
"gpu_memory_utilization": 0.85, "block_size": 8, "max_model_len": null, "max_num_batched_tokens": 8192,
"ngram_min": 1, "ngram_max": 4, "eagle_aux_layer_ids": [1, 2], "eagle_aux_convention": "auto",
"attention_backend": "auto", "verifier": "auto", "synthetic_acceptance": [0.5, 0.25], "enforce_eager": false,
"label": "before", "results_dir": "results", "run_id": null, "resume": null, "quiet": false}""")


# What that run did where it predates an engine option: it stepped one step at a time. And the side-call
# deadlines it predates take their defaults (run-local: they bound waiting, not what a cell measures).
ADDED_SINCE = {"async_scheduling": False, "cpu_threads": None, "info_timeout": 10.0, "metrics_timeout": 10.0,
               "cache_reset_timeout": 60.0, "fused_kernels": "auto", "debug_invariants": False,
               "speed_bench_data": None, "speed_bench_split": None, "speed_bench_categories": None,
               "eagle_topk": [1], "num_draft_tokens": [],  # a run before tree shapes: chains
               "enable_prefix_caching": False,  # a run before prefix caching recomputed every prompt
               "enable_chunked_prefill": False,  # and prefilled whole prompts
               "moe_kernels": "gemv",  # and ran the gemv expert kernels (issue 47's grouped set came later)
               "state_snapshots": 0, "state_snapshot_blocks": 1,  # and recomputed every prompt on hybrid targets
               "recurrent_kernels": "torch"}  # and hybrids' gated delta rule on our torch forms


def test_a_stored_flat_config_reads_into_the_engine_and_writes_back_unchanged():
    config = SweepConfig.from_dict(STORED)
    assert config.engine.method == "draft" and config.engine.seed == 3 and config.engine.block_size == 8
    # the fault is the run's record now, not an engine option: an older manifest reads into it unchanged
    assert config.inject == "bonus-from-wrong-row" and config.engine.eagle_aux_layer_ids == (1, 2)
    assert config.to_dict() == {**STORED, **ADDED_SINCE} and set(FLAT_NAMES) == set(STORED) | set(ADDED_SINCE)
    assert SweepConfig().engine.async_scheduling  # a new run overlaps


def test_a_run_written_before_resumes_with_the_same_identity(tmp_path):
    run_dir = tmp_path / "results" / "old"
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "config": STORED}))
    given = SweepConfig(engine=EngineConfig(method="draft", draft="d", seed=3), resume=str(run_dir))
    merged, _ = resume_config(run_dir, given, explicit={"method", "draft", "seed", "resume"})
    assert merged.identity() == {k: v for k, v in {**STORED, **ADDED_SINCE}.items() if k not in RUN_LOCAL_FIELDS}
    # The default run id hashes the flat identity: unchanged for the same settings.
    assert default_run_id(merged)[-6:] == default_run_id(SweepConfig.from_dict(STORED))[-6:]


def test_no_engine_option_is_repeated_outside_engine_config():
    """SweepConfig and CheckSetup contain an EngineConfig; none of their own fields is an engine field."""
    engine_fields = {f.name for f in dataclasses.fields(EngineConfig)}
    assert set(ENGINE_OPTION_NAMES) <= engine_fields
    for holder in (SweepConfig, CheckSetup):
        own = {f.name: f for f in dataclasses.fields(holder)}
        assert own["engine"].type in (EngineConfig, "EngineConfig")
        assert not (set(own) - {"engine"}) & engine_fields, holder
