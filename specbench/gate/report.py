"""The gate's report: a markdown table (one line per stage) and JUnit XML (one testcase per stage) for CI."""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import ExitStatus, SpecbenchError
from specbench.gate.stage import StageResult, Status


@dataclass(frozen=True)
class GateReport:
    title: str  # what was gated: engine or server, k
    reference: str  # the reference file read or written, or "none"
    run_dir: str  # the sweep run directory the stages read
    stages: tuple[StageResult, ...]

    @property
    def failed(self) -> tuple[StageResult, ...]:
        return tuple(s for s in self.stages if s.status is Status.FAIL)

    @property
    def crashed(self) -> tuple[StageResult, ...]:
        return tuple(s for s in self.stages if s.status is Status.CRASH)

    @property
    def exit_code(self) -> int:
        """CRASHED over FAILED: a stage specbench could not judge leaves the verdict incomplete."""
        if self.crashed:
            return ExitStatus.CRASHED
        return ExitStatus.FAILED if self.failed else ExitStatus.PASSED


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: GateReport) -> str:
    verdict = "FAIL (" + ", ".join(s.name for s in report.failed) + ")" if report.failed else "PASS"
    if report.crashed:
        verdict = "CRASH (" + ", ".join(s.name for s in report.crashed) + ")" + (
            f", {verdict}" if report.failed else "")
    lines = [f"## specbench gate: {verdict}", "",
             f"{report.title}; reference: {report.reference}; run: {report.run_dir}", "",
             "| stage | status | metric | tolerance | power | reason |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {s.name} | {s.status.value} | {_cell(s.metric)} | {_cell(s.tolerance)} | {_cell(s.power)} | "
              f"{_cell(s.reason)} |" for s in report.stages]
    for s in report.stages:
        if s.details:
            lines += ["", f"{s.name}:"] + [f"- {_cell(d)}" for d in s.details]
    return "\n".join(lines) + "\n"


def to_junit(report: GateReport) -> str:
    suite = ET.Element("testsuite", name="specbench gate", tests=str(len(report.stages)),
                       failures=str(len(report.failed)), errors=str(len(report.crashed)),
                       skipped=str(sum(s.status in (Status.SKIP, Status.NOT_AVAILABLE) for s in report.stages)))
    for s in report.stages:
        case = ET.SubElement(suite, "testcase", classname="specbench.gate", name=s.name)
        summary = f"{s.reason} | metric: {s.metric} | tolerance: {s.tolerance} | power: {s.power}"
        if s.status is Status.FAIL:
            failure = ET.SubElement(case, "failure", message=s.reason)
            failure.text = "\n".join((summary, *s.details))
        elif s.status is Status.CRASH:
            error = ET.SubElement(case, "error", message=s.reason)
            error.text = "\n".join((summary, *s.details))
        elif s.status is not Status.PASS:
            ET.SubElement(case, "skipped", message=f"{s.status.value}: {s.reason}")
        else:
            ET.SubElement(case, "system-out").text = summary
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def check_output_path(path: str | Path, flag: str) -> None:
    """Before any work: a file can be written at `path` (its directory exists and takes a new file, and it is no
    directory). Raises SpecbenchError, one line naming `flag`: a gate that ran for minutes must not fail at the end."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise SpecbenchError(f"{flag} {path}: is a directory")
    if not target.parent.is_dir():
        raise SpecbenchError(f"{flag} {path}: no directory {target.parent}")
    try:  # a real file, not os.access: root passes every access check, a read-only mount does not
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".check"):
            pass
    except OSError as err:
        raise SpecbenchError(f"{flag} {path}: cannot write in {target.parent} ({err.strerror or err})") from None
    if target.exists() and not os.access(target, os.W_OK):
        raise SpecbenchError(f"{flag} {path}: the file is not writable")


def write_text(path: str | Path, text: str, what: str) -> None:
    """`text` into `path` whole or not at all (written beside it, then renamed over it)."""
    target = Path(path).expanduser()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise SpecbenchError(f"cannot write the {what} {path}: {err.strerror or err}") from None
