"""The GPU benchmark harness behind BENCHMARKS.md: decode, MoE and tree-drafting speed against a weight-bytes floor
and a Hugging Face baseline, run by scripts/bench_*.py; no specbench command imports it."""
