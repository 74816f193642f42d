"""``memtui check``'s verdict as people and CI systems read it: text, JUnit XML, annotations.

* :func:`format_verdict`: a short text, ``PASS`` or ``FAIL`` first, then each broken limit
  with its figure and its evidence (the stack, the step);
* :func:`junit_xml`: one ``<testcase>`` per limit and device (``<failure>`` where broken,
  ``<skipped>`` where the capture lacks the figure), for CI systems that read JUnit XML;
* :func:`github_annotations`: one ``::error`` workflow command per broken limit, which
  GitHub Actions shows on the run's summary (and on the file, where the evidence's stack
  names one in the repository).

Everything from a file (paths, frame names, titles) is escaped: control characters never
reach the terminal (:func:`memtui.errors.printable`), XML is built with ElementTree, and
annotations escape ``%``, CR, LF, ``:`` and ``,`` as the workflow commands require.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.errors import printable, safe_text
from memtui.units import format_bytes

if TYPE_CHECKING:
    from memtui.analysis.limits.check import LimitResult
    from memtui.analysis.limits.check import LimitsVerdict as CheckResult


def _frame(frame: dict[str, Any]) -> str:
    where = frame.get("filename") or "?"
    line = frame.get("line")
    return f"{frame.get('name') or '?'} ({where}{f':{line}' if line is not None else ''})"


def evidence_lines(result: LimitResult, frames: int = 4) -> list[str]:
    """The evidence of a broken limit, one line each: the step, the owner, the stack."""
    ev = result.evidence
    lines = []
    if ev.get("step"):
        lines.append(f"in {ev['step']}")
    if ev.get("seq") is not None:
        lines.append(f"at event seq {ev['seq']}")
    if ev.get("owner"):
        lines.append(f"owner {ev['owner']}")
    if ev.get("grew_bytes"):
        lines.append(f"grew most at the peak: +{format_bytes(ev['grew_bytes'])} from the stack "
                     "below (memtui compare says more)")
    held = ev.get("held_by") or []
    if held:
        lines.append("held most by " + "; ".join(
            f"{row['label']} {format_bytes(row['bytes'])} ({row['share']:.0%})"
            for row in held))
    stack = ev.get("stack") or []
    if stack:
        group = ev.get("stack_of") or ""
        of = f" ({group})" if group and not group.startswith(f"{stack[0].get('name')} (") \
            else ""
        lines.append(f"stack{of}: " + " <- ".join(_frame(f) for f in stack[:frames]))
    return lines


def format_verdict(result: CheckResult) -> str:
    """The text ``memtui check`` prints."""
    broken = result.broken
    checked = [r for r in result.results if r.status != "skipped"]
    head = "PASS" if result.passed else "FAIL"
    against = f" against {result.baseline}" if result.baseline else ""
    lines = [f"{head}: {result.path}{against}: {len(checked) - len(broken)} of {len(checked)} "
             f"limits hold" + (f", {len(broken)} broken" if broken else "")]
    for r in broken:
        lines.append(f"  {r.device}: {r.limit}: {r.message}")
        lines += [f"      {line}" for line in evidence_lines(r)]
    for r in result.results:
        if r.status == "skipped":
            lines.append(f"  {r.device}: {r.limit}: skipped, {r.message}")
    if not result.results:
        lines.append("  no limit to check: give --max-peak, --baseline, ... (memtui check -h)")
    return safe_text(lines)


def _case_name(r: LimitResult) -> str:
    return f"{r.limit} [{r.device}]"


def junit_xml(result: CheckResult) -> bytes:
    """The check as JUnit XML: one test suite, one test case per limit and device."""
    failures = len(result.broken)
    skipped = sum(r.status == "skipped" for r in result.results)
    suite = ET.Element("testsuite", name=f"memtui check {printable(result.path)}",
                       tests=str(len(result.results)), failures=str(failures), errors="0",
                       skipped=str(skipped))
    for r in result.results:
        case = ET.SubElement(suite, "testcase", classname="memtui.check",
                             name=printable(_case_name(r)))
        if r.status == "fail":
            failure = ET.SubElement(case, "failure", type=r.limit, message=printable(r.message))
            failure.text = safe_text([r.message, *evidence_lines(r, 12)])
        elif r.status == "skipped":
            ET.SubElement(case, "skipped", message=printable(r.message))
        else:
            ET.SubElement(case, "system-out").text = printable(r.message)
    root = ET.Element("testsuites", name="memtui check", tests=suite.get("tests", "0"),
                      failures=str(failures))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _repo_file(stack: list[dict[str, Any]], root: Path) -> tuple[str, int] | None:
    """The innermost frame of the stack whose file lies under ``root`` (relative path)."""
    for frame in stack:
        name = frame.get("filename")
        if not name:
            continue
        try:
            relative = Path(name).resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            continue
        return relative.as_posix(), int(frame.get("line") or 1)
    return None


def github_annotations(result: CheckResult, root: Path | None = None) -> list[str]:
    """``::error`` commands, one per broken limit (file and line where the evidence's
    stack names a file under ``root``, the workspace)."""
    root = root if root is not None else Path(os.environ.get("GITHUB_WORKSPACE") or ".")
    lines = []
    for r in result.broken:
        props = [f"title={_escape_property(printable(f'memtui check: {r.limit} [{r.device}]'))}"]
        where = _repo_file(r.evidence.get("stack") or [], root)
        if where is not None:
            props[:0] = [f"file={_escape_property(printable(where[0]))}", f"line={where[1]}"]
        body = safe_text([r.message, *evidence_lines(r)])
        lines.append(f"::error {','.join(props)}::{_escape_data(body)}")
    return lines


__all__ = ["evidence_lines", "format_verdict", "github_annotations", "junit_xml"]
