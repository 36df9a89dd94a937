"""`--server-cmd` templates: placeholders filled per (method, num-steps) group, and the documented presets."""

from __future__ import annotations

import shlex
import string
from dataclasses import dataclass

from specbench.errors import SpecbenchError

PLACEHOLDERS = ("num_steps", "method", "port", "model", "draft", "host")
PRESET_PREFIX = "preset:"
LOOPBACK = "127.0.0.1"

# (speculative template, baseline template for num-steps 0). Flags from each server's own --help / docs:
# llama-server: llama.cpp (llama-cpp-python 0.3.36 vendored build) `llama-server --help`; vLLM: `vllm serve
# --speculative-config` (docs.vllm.ai, speculative decoding); SGLang: `python -m sglang.launch_server
# --speculative-*` (docs.sglang.ai server arguments); specbench serve: this repository.
PRESETS: dict[str, tuple[str, str]] = {
    "llama-server": (
        "llama-server -m {model} -md {draft} --spec-type draft-simple --spec-draft-n-max {num_steps} "
        "--spec-draft-n-min 0 --host {host} --port {port} --metrics -np 4 -c 4096",
        "llama-server -m {model} --host {host} --port {port} --metrics -np 4 -c 4096",
    ),
    "llama-server-ngram": (
        "llama-server -m {model} --spec-type ngram-simple --spec-draft-n-max {num_steps} --host {host} "
        "--port {port} --metrics -np 4 -c 4096",
        "llama-server -m {model} --host {host} --port {port} --metrics -np 4 -c 4096",
    ),
    "vllm": (
        "vllm serve {model} --host {host} --port {port} --speculative-config "
        "'{{\"method\": \"draft_model\", \"model\": \"{draft}\", \"num_speculative_tokens\": {num_steps}}}'",
        "vllm serve {model} --host {host} --port {port}",
    ),
    "sglang": (
        "python -m sglang.launch_server --model-path {model} --host {host} --port {port} --enable-metrics "
        "--speculative-algorithm STANDALONE --speculative-draft-model-path {draft} "
        "--speculative-num-steps {num_steps} --speculative-num-draft-tokens {num_draft_tokens} "
        "--speculative-eagle-topk 1",
        "python -m sglang.launch_server --model-path {model} --host {host} --port {port} --enable-metrics",
    ),
    "specbench": (
        "specbench serve --target {model} --method {method} --draft {draft} --num-steps {num_steps} "
        "--host {host} --port {port}",
        "specbench serve --target {model} --host {host} --port {port}",
    ),
}


@dataclass(frozen=True, slots=True)
class LaunchValues:
    num_steps: int
    method: str
    port: int
    model: str
    draft: str | None

    def fields(self) -> dict[str, str]:
        return {"num_steps": str(self.num_steps), "method": self.method, "port": str(self.port),
                "model": self.model, "draft": self.draft or "", "host": LOOPBACK,
                "num_draft_tokens": str(self.num_steps + 1)}


def resolve_template(template: str, baseline: str | None, num_steps: int) -> str:
    """The template one group launches: a preset's own pair, else `baseline` for num-steps 0 when given."""
    if template.startswith(PRESET_PREFIX):
        name = template[len(PRESET_PREFIX):]
        if name not in PRESETS:
            raise SpecbenchError(f"unknown --server-cmd preset {name!r}; supported: {', '.join(PRESETS)}")
        speculative, plain = PRESETS[name]
        return plain if num_steps == 0 and baseline is None else (baseline if num_steps == 0 else speculative)
    return baseline if num_steps == 0 and baseline is not None else template


def check_template(template: str, flag: str = "--server-cmd") -> None:
    """Unknown placeholders, bad braces and unbalanced quotes are refused before anything starts."""
    if template.startswith(PRESET_PREFIX):
        resolve_template(template, None, 1)
        return
    names = set().union(*(_placeholders(arg, flag) for arg in split_template(template, flag)))
    unknown = sorted(names - set(PLACEHOLDERS) - {"num_draft_tokens"})
    if unknown:
        raise SpecbenchError(f"{flag}: unknown placeholder {{{unknown[0]}}}; supported: "
                             + ", ".join("{" + p + "}" for p in PLACEHOLDERS))
    if "port" not in names:
        raise SpecbenchError(f"{flag} must contain {{port}} (specbench picks a free loopback port per launch)")


def split_template(template: str, flag: str = "--server-cmd") -> tuple[str, ...]:
    """The template's arguments, split like a POSIX shell would (quotes group, no expansion)."""
    try:
        return tuple(shlex.split(template))
    except ValueError as err:
        raise SpecbenchError(f"{flag}: {err} in {template!r} (quote an argument with spaces as a whole)") from None


def render(template: str, values: LaunchValues, flag: str = "--server-cmd") -> tuple[str, ...]:
    """The argv of one launch (no shell). The template is split first and each placeholder filled inside its own
    argument, so a value with spaces or quotes stays one argument; a value that could pass for an option (a leading
    `-`), an empty one and one with control characters are refused."""
    fields = values.fields()
    args = split_template(template, flag)
    for name in sorted(set().union(*(_placeholders(arg, flag) for arg in args)) & set(fields)):
        _check_value(name, fields[name], flag)
    return tuple(arg.format_map(fields) for arg in args)


def _placeholders(arg: str, flag: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(arg) if name is not None}
    except ValueError as err:
        raise SpecbenchError(f"{flag}: {err} in argument {arg!r} (write {{{{ and }}}} for literal braces)") from None


_OPTION_OF = {"model": "--target", "draft": "--draft", "method": "--method"}


def _check_value(name: str, value: str, flag: str) -> None:
    given = f" (from {_OPTION_OF[name]})" if name in _OPTION_OF else ""
    if not value:
        raise SpecbenchError(f"{flag} uses {{{name}}}, which is empty{given}: give it or drop it from the template")
    if value.startswith("-"):
        raise SpecbenchError(f"{flag}: {{{name}}} = {value!r}{given} starts with '-' and would be read as an option "
                             "by the server; refused")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise SpecbenchError(f"{flag}: {{{name}}} = {value!r}{given} contains a control character; refused")
