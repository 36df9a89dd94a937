"""Server answers as arbitrary Unicode. JSON may escape a lone surrogate ("\\ud800"), which Python decodes into a
str that no UTF-8 encoder accepts (parquet, the terminal, a report file): one such character would fail far from
where it came in. Every JSON answer a server sends is read here, each lone surrogate replaced by U+FFFD."""

from __future__ import annotations

import json
import re
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins valid pairs: what is left here is lone
REPLACEMENT = "\ufffd"


def loads(data: str | bytes) -> Any:
    """json.loads, every string (keys too) free of lone surrogates. Raises what json.loads raises."""
    value = json.loads(data)
    escaped = b"\\u" in data if isinstance(data, bytes) else "\\u" in data
    return scrub(value) if escaped else value  # unescaped text decoded from UTF-8 holds no surrogate


def scrub(value: Any) -> Any:
    """`value` with lone surrogates in its strings replaced by U+FFFD (dicts and lists walked)."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value
