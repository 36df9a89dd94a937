"""`--server-cmd`: values are filled into whole arguments after the template is split, never re-split; a value that
could pass for an option, an empty or a control-character one and an unbalanced quote are one clear error before
anything is written (a launch that never gets ready: tests/backends/test_server_launch.py)."""

from __future__ import annotations

import pytest

from specbench.backends.server_template import LaunchValues, check_template, render
from specbench.bench.validate import validate_config
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig

TEMPLATE = "srv -m {model} -md {draft} --host {host} --port {port}"


def _values(model: str = "/m/t.gguf", draft: str | None = "/m/d.gguf") -> LaunchValues:
    return LaunchValues(3, "draft", 8123, model, draft)


@pytest.mark.parametrize("model", ["/models/my model.gguf", "/m/it's \"quoted\".gguf", "x --host 0.0.0.0",
                                   "/m/$(rm -rf ~);`id`|*.gguf", "{port}", "/m/{{x}}"])
def test_a_value_stays_one_argument_whatever_it_contains(model):
    argv = render(TEMPLATE, _values(model))
    assert argv == ("srv", "-m", model, "-md", "/m/d.gguf", "--host", "127.0.0.1", "--port", "8123")


def test_a_value_inside_a_quoted_argument_stays_inside_it():
    argv = render("srv --port {port} --config 'draft={draft} k={num_steps}'", _values(draft="/a b/d.gguf"))
    assert argv == ("srv", "--port", "8123", "--config", "draft=/a b/d.gguf k=3")


@pytest.mark.parametrize(
    "model, draft, message",
    [
        ("--host=0.0.0.0", "/d", "{model} = '--host=0.0.0.0' (from --target) starts with '-'"),
        ("/t", "-x", "{draft} = '-x' (from --draft) starts with '-'"),
        ("/t", None, "--server-cmd uses {draft}, which is empty (from --draft)"),
        ("/t\x00--host", "/d", "{model} = '/t\\x00--host' (from --target) contains a control character"),
        ("/t\n--host", "/d", "contains a control character"),
    ],
)
def test_a_value_that_could_inject_an_option_is_refused(model, draft, message):
    with pytest.raises(SpecbenchError, match=_literal(message)):
        render(TEMPLATE, _values(model, draft))


@pytest.mark.parametrize(
    "template, message",
    [
        ("srv --port {port} 'unclosed", "--server-cmd: No closing quotation in"),
        ('srv --port {port} "unclosed', "--server-cmd: No closing quotation in"),
        ("srv --port {port} trailing\\", "--server-cmd: No escaped character in"),
        ("srv --port {port} '{mo del}'", "unknown placeholder {mo del}"),
        ("srv --port {port} {mo del}", "expected '}' before end of string in argument '{mo'"),
        ("srv --port {port} {model", "expected '}' before end of string in argument '{model'"),
        ("", "must contain {port}"),
    ],
)
def test_a_malformed_template_is_one_error(template, message):
    with pytest.raises(SpecbenchError, match=_literal(message)):
        check_template(template)


def test_values_are_checked_before_a_run_directory_exists(tmp_path):
    config = SweepConfig(backend="openai", server_cmd="preset:llama-server", num_steps=(3,),
                         results_dir=str(tmp_path / "results"),
                         engine=EngineConfig(target="-m", draft="/d.gguf", method="draft"))
    with pytest.raises(SpecbenchError, match=_literal("{model} = '-m' (from --target) starts with '-'")):
        validate_config(config)
    for flag, field in (("--metrics-timeout", "metrics_timeout"), ("--cache-reset-timeout", "cache_reset_timeout"),
                        ("--info-timeout", "info_timeout")):
        bad = SweepConfig(backend="openai", base_url="http://127.0.0.1:1", **{field: float("nan")})
        with pytest.raises(SpecbenchError, match=f"{flag} must be > 0, got nan"):
            validate_config(bad)
    assert not (tmp_path / "results").exists()


def _literal(text: str) -> str:
    import re

    return re.escape(text)
