"""Facts about the software and hardware a run measured on: versions, git commit, device and driver."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import specbench

if TYPE_CHECKING:  # torch is imported only where a device is described: HTTP runs start without it
    import torch

_PACKAGES = ("torch", "triton", "transformers", "numpy", "pandas", "pyarrow", "tokenizers", "gguf")


# Off a terminal these third-party bars write one long carriage-return line per update into a log (transformers'
# "Converting and de-quantizing GGUF tensors...", hub downloads); both libraries read them when first imported.
QUIET_BARS_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def quiet_bars_off_terminal(is_tty: bool) -> None:
    """Without a terminal on stderr (CI logs, `| tee`), turn third-party progress bars off before those libraries
    load (tqdm reads TQDM_* at import; our own bars pass `disable` themselves); a variable the user set wins."""
    if not is_tty:
        for name, value in QUIET_BARS_ENV.items():
            os.environ.setdefault(name, value)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "specbench": specbench.__version__}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state() -> dict[str, object]:
    """Commit of the specbench checkout, and whether it had uncommitted changes; nulls outside a git repo."""
    root = Path(specbench.__file__).resolve().parents[1]
    sha = _run(["git", "-C", str(root), "rev-parse", "HEAD"])
    if sha is None:
        return {"sha": None, "dirty": None}
    status = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


def device_info(device: torch.device) -> dict[str, object]:
    import torch

    info: dict[str, object] = {"type": device.type, "cpu": _cpu_name(), "num_cpus": _num_cpus()}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info.update(
            name=props.name,
            total_memory_gib=round(props.total_memory / 2**30, 2),
            compute_capability=f"{props.major}.{props.minor}",
            cuda_runtime=torch.version.cuda,
            cuda_driver=_run(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"]),
        )
    else:
        info["name"] = info["cpu"]
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _num_cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _run(cmd: list[str]) -> str | None:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None
