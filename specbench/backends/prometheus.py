"""Parse the Prometheus text exposition format into samples (name, labels, value); comments and types skipped."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True, slots=True)
class Sample:
    name: str  # metric sample name as exposed (counters end in `_total`)
    labels: tuple[tuple[str, str], ...]  # sorted (label, value) pairs
    value: float

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)


def parse_metrics(text: str) -> list[Sample]:
    """Every well-formed sample line; malformed lines are skipped (a scrape must never fail a sweep)."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        value = _float(match["value"])
        if value is None:
            continue
        labels = _labels(match["labels"] or "")
        if labels is None:
            continue
        samples.append(Sample(match["name"], labels, value))
    return samples


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _labels(text: str) -> tuple[tuple[str, str], ...] | None:
    pairs, pos = [], 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            return None if text[pos:].strip() else tuple(sorted(pairs))
        value = re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], match.group(2))
        pairs.append((match.group(1), value))
        pos = match.end()
    return tuple(sorted(pairs))
