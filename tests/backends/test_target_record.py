"""A run's target in words: the manifest's architecture object and its label (summary head, compare preamble)."""

from __future__ import annotations

import dataclasses

from specbench.backends.target_record import architecture_record, record_entry
from specbench.models.presets import MODEL_PRESETS
from specbench.runs.target_architecture import label_from_entry


def test_a_dense_preset_reads_as_its_shape():
    record = architecture_record(MODEL_PRESETS.get("llama-3.1-8b")())
    assert (record.architecture, record.num_layers, record.hidden_size) == ("llama", 32, 4096)
    assert record.num_experts == 0 and record.num_params == record.num_active_params
    assert record.label() == "llama 32L h4096 8.0B, full attention"


def test_a_moe_preset_says_its_experts_and_active_size():
    record = architecture_record(MODEL_PRESETS.get("qwen3-30b-a3b")())
    assert (record.num_experts, record.num_experts_per_token, record.num_moe_layers) == (128, 8, 48)
    assert record.num_active_params < record.num_params / 5  # 3B of 30B
    label = record.label()
    assert label.startswith("qwen3_moe 48L h2048 30.5B (3.4B active)") and "128 experts top-8 on 48 layers" in label


def test_the_manifest_entry_round_trips_and_foreign_entries_read_as_unknown():
    config = MODEL_PRESETS.get("qwen3-30b-a3b")()
    entry = record_entry(config)
    assert label_from_entry(entry) == architecture_record(config).label()
    assert label_from_entry(None) == "-" and label_from_entry("qwen") == "-"
    assert label_from_entry({**entry, "extra": 1}) == "-"  # not this module's shape: never a wrong label
    assert label_from_entry({k: v for k, v in entry.items() if k != "attention"}) == "-"
    assert {f.name for f in dataclasses.fields(architecture_record(config))} == set(entry)


def test_windows_are_named_with_the_layers_they_cover():
    from dataclasses import replace

    from specbench.attention.kinds import FullAttention, SlidingWindowAttention

    config = MODEL_PRESETS.get("llama-3.1-8b")()
    every = replace(config, attention_kinds=(SlidingWindowAttention(4096),) * config.num_hidden_layers)
    assert architecture_record(every).attention == "window 4096"
    alternating = replace(config, attention_kinds=tuple(
        SlidingWindowAttention(128) if i % 2 else FullAttention() for i in range(config.num_hidden_layers)))
    assert architecture_record(alternating).label().endswith(
        "sliding-window attention (window 128 on 16 of 32 layers, full elsewhere)")


def test_gpt_oss_and_gemma3_presets_name_their_sinks_and_window_pattern():
    gpt_oss = architecture_record(MODEL_PRESETS.get("gpt-oss-20b")())
    assert gpt_oss.attention == "window 128 on 12 of 24 layers, full elsewhere; sinks"
    assert gpt_oss.label().endswith("32 experts top-4 on 24 layers, sliding-window attention (window 128 on 12 of "
                                    "24 layers, full elsewhere) with sinks")
    gemma = architecture_record(MODEL_PRESETS.get("gemma-3-1b")())
    assert gemma.attention == "window 512 on 22 of 26 layers, full elsewhere; local RoPE base 10000"
    assert label_from_entry(record_entry(MODEL_PRESETS.get("gemma-3-1b")())) == gemma.label()
