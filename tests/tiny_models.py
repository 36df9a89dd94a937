"""Old top-level name of tests/support/tiny_models.py, kept only for tests/eagle_heads*.py (being changed under
issue 15): switch their `from tiny_models import ...` to `tests.support.tiny_models`, then delete this file."""

from tests.support.tiny_models import REPO_ROOT, build_tiny_model, gsm8k_questions, load_tiny_tokenizer  # noqa: F401
