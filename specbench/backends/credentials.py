"""The API key: read from a named environment variable, sent only as a header, scrubbed from every message."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from specbench.errors import SpecbenchError


def api_key_from_env(name: str | None) -> str | None:
    if name is None:
        return None
    key = os.environ.get(name)
    if not key:
        raise SpecbenchError(f"--api-key-env {name}: the environment variable is not set")
    return key


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def public_url(url: str) -> str:
    """The URL without credentials, query or fragment (what manifests and summaries show)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
