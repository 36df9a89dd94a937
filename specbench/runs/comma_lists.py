"""Comma-list options (the sweep's --concurrency, --num-steps, --temperature, --speed-bench-categories; the selftest's
--seeds with ranges): text to values and back."""

from __future__ import annotations

import math

from specbench.errors import SpecbenchError
from specbench.runs.cell_key import DEFAULT_TEMPERATURE


def format_int_list(values: tuple[int, ...]) -> str:
    """(1, 16, 64) -> "1,16,64" (how a default is shown on the command line)."""
    return ",".join(map(str, values))


def format_temperature_list(values: tuple[float | None, ...]) -> str:
    """(0.0, 0.7, None) -> "0,0.7,default"."""
    return ",".join(DEFAULT_TEMPERATURE if t is None else format(t, "g") for t in values)


def parse_int_list(text: str, flag: str) -> tuple[int, ...]:
    """"1,16,64" -> (1, 16, 64), duplicates dropped, order kept."""
    values = []
    for item in _items(text, flag):
        try:
            values.append(int(item))
        except ValueError:
            raise SpecbenchError(f"{flag}: {item!r} is not an integer (expected e.g. 1,16,64)") from None
    return tuple(dict.fromkeys(values))


def parse_name_list(text: str, flag: str) -> tuple[str, ...]:
    """"coding,math" -> ("coding", "math"), duplicates dropped, order kept."""
    return tuple(dict.fromkeys(_items(text, flag)))


def parse_temperature_list(text: str) -> tuple[float | None, ...]:
    """"0,0.7,default" -> (0.0, 0.7, None)."""
    values: list[float | None] = []
    for item in _items(text, "--temperature"):
        if item.lower() == DEFAULT_TEMPERATURE:
            values.append(None)
            continue
        try:
            value = float(item)
        except ValueError:
            raise SpecbenchError(
                f"--temperature: {item!r} is not a number or {DEFAULT_TEMPERATURE!r} (expected e.g. 0,1)"
            ) from None
        if not math.isfinite(value):
            raise SpecbenchError(f"--temperature must be finite, got {item}")
        values.append(value)
    return tuple(dict.fromkeys(values))


def _items(text: str, flag: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise SpecbenchError(f"{flag}: empty value in {text!r} (expected a comma-separated list)")
    return items


def parse_int_ranges(text: str, flag: str) -> tuple[int, ...]:
    """"0-2,7" -> (0, 1, 2, 7): comma items, each a non-negative integer or an inclusive range low-high; duplicates
    dropped, order kept."""
    values: list[int] = []
    for item in _items(text, flag):
        low, dash, high = item.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise SpecbenchError(f"{flag}: {item!r} is not an integer or a range low-high "
                                 f"(expected e.g. 0,1 or 0-29 or 0-3,7)") from None
        if first > last:
            raise SpecbenchError(f"{flag}: range {item!r} runs backwards (expected low-high, e.g. 0-29)")
        values.extend(range(first, last + 1))
    return tuple(dict.fromkeys(values))
