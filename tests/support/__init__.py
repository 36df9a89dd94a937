"""Shared test helpers, imported as `tests.support.<module>` (pyproject's pytest `pythonpath` puts the repo root on
sys.path): tiny models and tokenizer, synthetic compare runs, selftest row checks, test servers and ports, kernel test
inputs (random paged batches, poisoned allocations)."""
