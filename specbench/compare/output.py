"""Which format a comparison is written in (--format, else the --output suffix, else the console table)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from specbench.compare.comparison import Comparison
from specbench.compare.export import render_csv, render_json
from specbench.compare.table import render_console, render_markdown
from specbench.errors import SpecbenchError

FORMATS = ("console", "md", "csv", "json")
SUFFIXES = {".md": "md", ".markdown": "md", ".csv": "csv", ".json": "json"}


def choose_format(fmt: str | None, output: str | Path | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise SpecbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
        return fmt
    if output is not None:
        return SUFFIXES.get(Path(output).suffix.lower(), "console")
    return "console"


def console_width() -> int | None:
    """The terminal's width when writing to one; None (the table's default width) for pipes and files."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def render(comparison: Comparison, fmt: str, width: int | None = None, wide: bool = False) -> str:
    if fmt == "md":
        return render_markdown(comparison)
    if fmt == "csv":
        return render_csv(comparison)
    if fmt == "json":
        return render_json(comparison)
    return render_console(comparison, width, wide) + "\n"


def write_output(text: str, output: str | Path) -> Path:
    path = Path(output).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as err:
        raise SpecbenchError(f"--output {output}: cannot write ({err.strerror or err})") from None
    return path
