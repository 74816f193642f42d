"""``memtui report``: one self-contained HTML page of a capture (or of two, compared).

The page holds everything inline (CSS in a ``<style>``, charts as inline SVG from
:mod:`.svg`, no script, no font, no image file): it opens offline, from a CI artifact,
as an e-mail attachment.  It shows

* per device the figures of ``memtui summary`` and the allocated / reserved curve with
  the peak marked (``id="peak-allocated-N"``), OOMs and step starts;
* per device its memory by role: one line per role over time (``id="roles-N"``) and the
  bytes of each at the peak (:mod:`memtui.analysis.roles`);
* every finding (``memtui findings``) with its figures, advice and evidence stack, the
  :data:`MAX_FINDINGS` most severe of a device (the page says how many more there are);
* what held memory at the peak: by stack, by owner (operators, for the Ascend profiler)
  and by pool, with bytes and shares (the peak finding's attribution);
* for two captures, per device pair: A's and B's allocated curves on one axis, aligned
  as ``memtui compare`` aligns them, the figures with B - A, and the difference
  attributed by stack, owner and op;
* last, the capture's facts (source, devices, history kept, call stacks, allocator
  settings, warnings: :mod:`memtui.analysis.findings.capture_facts`).

Every string from a file goes through :func:`memtui.export.svg.html_text` (cut to a
thousand characters, no raw control or bidi character, then :func:`html.escape`); a
chart marks at most fifty OOMs and a few hundred steps: the page stays small whatever
the capture holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from memtui.analysis.findings.model import Finding
from memtui.analysis.timeline.levels import Level, allocated_level, reserved_level
from memtui.export.svg import Marks, Series, html_text, level_chart
from memtui.model import MemoryTrace
from memtui.outputs import write_atomically
from memtui.units import at_least, format_bytes

TOP_ROWS = 15
#: Findings a device's section lists at most (2,000 OOMs would make a 12 MB page).
MAX_FINDINGS = 50

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1000px; padding: 0 16px; color: #1d2329; background: #fff;
       line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccd;
     padding-bottom: 4px; margin-top: 2em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.9em; }
th, td { text-align: left; padding: 2px 10px 2px 0; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .stack { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace;
               font-size: 0.85em; }
.stack { margin: 4px 0 0 1.2em; padding: 0; color: #445; }
.finding { border-left: 4px solid #99a; padding: 4px 12px; margin: 10px 0; }
.finding.high { border-color: #c0392b; } .finding.medium { border-color: #e67e22; }
.finding.low { border-color: #f1c40f; } .finding.info { border-color: #3498db; }
.sev { font-weight: bold; text-transform: uppercase; font-size: 0.8em; }
.chart { width: 100%; height: auto; background: #fbfbfd; border: 1px solid #e3e3ea; }
.chart text { font-size: 11px; fill: #334; }
.chart .axis { stroke: #889; } .chart .grid { stroke: #e3e3ea; }
.chart polyline { fill: none; stroke-width: 1.2; }
.chart .allocated { stroke: #2e86de; } .chart .allocated.area { fill: #2e86de33; stroke: none; }
.chart .reserved { stroke: #8e44ad; stroke-dasharray: 4 2; }
.chart .run-a { stroke: #2e86de; } .chart .run-b { stroke: #e67e22; }
.chart circle.peak-marker { fill: #c0392b; stroke: #fff; stroke-width: 1.5; }
.chart .oom-marker { stroke: #c0392b; stroke-width: 1.5; }
.chart .oom-label { fill: #c0392b; font-weight: bold; }
.chart .step-marker { stroke: #7f8c8d; }
.chart tspan.allocated, .chart tspan.run-a { fill: #2e86de; }
.chart tspan.reserved { fill: #8e44ad; } .chart tspan.run-b { fill: #e67e22; }
.muted { color: #667; } .delta-up { color: #c0392b; } .delta-down { color: #1e8449; }
.chart .role-parameter { stroke: #2e86de; } .chart tspan.role-parameter { fill: #2e86de; }
.chart .role-gradient { stroke: #e67e22; } .chart tspan.role-gradient { fill: #e67e22; }
.chart .role-optimizer_state { stroke: #8e44ad; }
.chart tspan.role-optimizer_state { fill: #8e44ad; }
.chart .role-activation { stroke: #27ae60; } .chart tspan.role-activation { fill: #27ae60; }
.chart .role-temporary { stroke: #95a5a6; } .chart tspan.role-temporary { fill: #95a5a6; }
.chart .role-input { stroke: #16a085; } .chart tspan.role-input { fill: #16a085; }
.chart .role-cache { stroke: #d35400; } .chart tspan.role-cache { fill: #d35400; }
.chart .role-other { stroke: #7f8c8d; } .chart tspan.role-other { fill: #7f8c8d; }
"""


def _e(value: Any) -> str:
    return html_text(value)


def _table(header: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    if not rows:
        return '<p class="muted">none</p>'
    head = "".join(f'<th class="{"num" if i in numeric else ""}">{_e(h)}</th>'
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="{"num" if i in numeric else ""}">{_e(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _facts(trace: MemoryTrace) -> str:
    from memtui.analysis.findings.capture_facts import capture_facts

    parts = []
    for title, pairs in capture_facts(trace):
        parts.append(f"<h3>{_e(title)}</h3>" + _table(["", ""], [list(p) for p in pairs]))
    return "".join(parts)


def _marks(trace: MemoryTrace, device: str, found: list[Finding]) -> Marks:
    from memtui.analysis.across.compare import steps_of

    ooms = [(int(f.evidence.t), f.title) for f in found
            if f.kind == "oom" and f.evidence.t is not None]
    steps = steps_of(trace, device)["t"].to_list()
    return Marks(ooms=ooms, steps=[int(t) for t in steps])


def device_chart(trace: MemoryTrace, device: str, found: list[Finding], index: int) -> str:
    """The allocated / reserved chart of one device, peak, OOMs and steps marked."""
    series = [Series("allocated", allocated_level(trace, device), "allocated", filled=True,
                     peak_id=f"peak-allocated-{index}")]
    reserved = reserved_level(trace, device)
    if reserved is not None and reserved.values.size:
        series.append(Series("reserved", reserved, "reserved", peak_id=f"peak-reserved-{index}"))
    return level_chart(series, _marks(trace, device, found), time_unit=trace.meta.time_unit,
                       title=f"{device}: allocated and reserved over time",
                       css_id=f"curve-{index}")


def role_chart(trace: MemoryTrace, device: str, index: int) -> str:
    """One line per role holding bytes (memory by role: the lines add up to allocated at
    every event), ``id="roles-N"``."""
    from memtui.analysis.roles import levels_by_role
    from memtui.analysis.roles.model import ROLE_LABELS
    from memtui.analysis.timeline.at_time import Timeline

    timeline = Timeline.build(trace, device)
    tracks = levels_by_role(trace, device).series(timeline)
    if not tracks:
        return ""
    series = [Series(ROLE_LABELS[role], level, f"role-{role}") for role, level in tracks.items()]
    return level_chart(series, time_unit=trace.meta.time_unit, css_id=f"roles-{index}",
                       title=f"{device}: memory by role over time")


def roles_table(entry: dict[str, Any]) -> str:
    """Bytes by role at the peak (and each role's own peak), summing to the peak."""
    from memtui.analysis.roles.model import ROLE_LABELS, ROLES

    at_peak = entry.get("by_role") or {}
    peaks = (entry.get("roles") or {}).get("peaks") or {}
    total = sum(at_peak.values()) or 1
    rows = [[ROLE_LABELS[r], format_bytes(at_peak.get(r, 0)), f"{at_peak.get(r, 0) / total:.1%}",
             format_bytes(peaks.get(r, {}).get("bytes", 0))]
            for r in ROLES if at_peak.get(r) or peaks.get(r)]
    source = (entry.get("roles") or {}).get("phases_from")
    note = (f"<p class='muted'>phases read from {_e(source)}; other: no rule explains it</p>"
            if source else "<p class='muted'>no forward or backward pass seen: the roles "
                           "are not told apart</p>")
    return _table(["role", "at the peak", "share", "its own peak"], rows,
                  numeric={1, 2, 3}) + note


def _figures(entry: dict[str, Any]) -> str:
    rows = [["events", entry["events"]], ["blocks", f"{entry['blocks']} "
                                                    f"({entry['ghost_blocks']} ghost)"],
            ["segments at the end", entry["segments"] if entry["segments"] is not None
             else "-"],
            ["peak allocated", format_bytes(entry["peak_allocated_bytes"])],
            ["peak reserved", _reserved(entry, entry["peak_reserved_bytes"])],
            ["allocated at the end", format_bytes(entry["allocated_at_end_bytes"])],
            ["reserved at the end", _reserved(entry, entry["reserved_at_end_bytes"])]]
    if entry.get("reserved_floor"):  # the file contradicts itself: what is known, and why
        rows.append(["reserved", entry["reserved_floor"]])
    return _table(["", ""], rows)


def _reserved(entry: dict[str, Any], value: int | None) -> str:
    """A reserved figure as known: ``>= X`` where the file contradicts itself (DESIGN.md's
    invariants), with its ceiling where the file gives one."""
    text = at_least(value, bool(entry.get("reserved_floor")))
    ceiling = entry.get("reserved_ceiling_bytes")
    if entry.get("reserved_floor") and ceiling is not None and value is not None:
        text += f" (at most {format_bytes(ceiling)})"
    return text


def _stack(finding: Finding) -> str:
    frames = finding.evidence.stack
    if not frames:
        return ""
    items = "".join(f"<li>{_e(f.name)} <span class='muted'>{_e(f.filename)}:{_e(f.line)}"
                    f"</span></li>" for f in frames[:12])
    more = f"<li class='muted'>... {len(frames) - 12} more</li>" if len(frames) > 12 else ""
    return f'<ol class="stack">{items}{more}</ol>'


def finding_html(finding: Finding, trace: MemoryTrace) -> str:
    """One finding: severity, kind, title, cause and advice, figures, evidence stack."""
    d = finding.detail
    lines = [f'<div class="finding {finding.severity}"><span class="sev">{finding.severity}'
             f"</span> <b>{_e(finding.kind)}</b>: {_e(finding.title)}"]
    for key in ("cause", "advice"):
        if d.get(key) and d[key] not in finding.title:
            lines.append(f"<div><i>{key}</i>: {_e(d[key])}</div>")
    if finding.kind == "leak":
        rate = (f"{format_bytes(d.get('bytes_per_step'))} per step since "
                f"{_e(d.get('first_step_name'))}" if d.get("bytes_per_step") is not None else
                f"{format_bytes(d.get('bytes_per_occurrence'))} in each of "
                f"{_e(d.get('occurrences'))} occurrences")
        per_second = (f", {format_bytes(d['bytes_per_second'])}/s"
                      if d.get("bytes_per_second") is not None else "")
        source = f"steps from {_e(d['steps_from'])}" if d.get("steps_from") else \
            "no steps found"
        lines.append(f"<div>{rate}{per_second}; {_e(d.get('blocks'))} blocks, "
                     f"{format_bytes(d.get('total_bytes'))} in all; {source}</div>")
    ev = finding.evidence
    where = []
    if ev.t is not None:
        start = _start(trace, finding.device)
        where.append(f"#{ev.t - start}" if trace.meta.time_unit == "event"
                     else f"+{(ev.t - start) / 1e9:.6f} s")
    if ev.seq is not None:
        where.append(f"event seq {ev.seq}")
    if ev.owner:
        where.append(f"owner {_e(ev.owner)}")
    if where:
        lines.append(f'<div class="muted">at {", ".join(where)}</div>')
    lines.append(_stack(finding))
    lines.append("</div>")
    return "".join(lines)


def _start(trace: MemoryTrace, device: str) -> int:
    from memtui.analysis.summary import device_start

    return device_start(trace, device)


def _attribution(rows: list[dict[str, Any]], title: str) -> str:
    if not rows:
        return ""
    table = _table(["bytes", "share", "blocks", "what"],
                   [[format_bytes(r["bytes"]), f"{r['share']:.1%}", r["blocks"], r["label"]]
                    for r in rows], numeric={0, 1, 2})
    return f"<h3>{_e(title)}</h3>{table}"


def at_the_peak(found: list[Finding]) -> str:
    """What held memory at the allocated peak: by stack, owner (operators) and pool."""
    peak = next((f for f in found if f.kind == "peak"), None)
    if peak is None:
        return '<p class="muted">nothing was allocated</p>'
    d = peak.detail
    return ("".join([
        _attribution(d.get("by_stack", []), "by stack (the innermost user frame)"),
        _attribution(d.get("by_owner", []), "by owner / operator"),
        _attribution(d.get("by_pool", []), "by pool"),
        _attribution(d.get("by_metadata", []), "by user metadata"),
    ]) or '<p class="muted">no block explains the peak (a curves-only capture)</p>')


def _device_section(trace: MemoryTrace, entry: dict[str, Any], found: list[Finding],
                    index: int) -> str:
    device = entry["device"]
    parts = [f'<section class="device" id="device-{index}"><h2>{_e(device)}</h2>',
             device_chart(trace, device, found, index), _figures(entry),
             "<h3>By role</h3>", role_chart(trace, device, index), roles_table(entry),
             f"<h3>Findings ({len(found)})</h3>"]
    shown = found[:MAX_FINDINGS]  # the most severe first: the page stays a page
    parts += [finding_html(f, trace) for f in shown] or ['<p class="muted">none</p>']
    if len(found) > len(shown):
        parts.append(f'<p class="muted">{len(found) - len(shown):,} more findings of '
                     f"{_e(device)} left out here (the page lists the {len(shown)} most "
                     "severe): memtui findings lists them all</p>")
    parts += ["<h3>At the peak</h3>", at_the_peak(found), "</section>"]
    return "".join(parts)


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def report_html(trace: MemoryTrace, summary: dict[str, Any],
                findings: dict[str, list[Finding]]) -> str:
    """The page of one capture (``summary`` its ``memtui summary`` object)."""
    body = [f"<h1>memtui report: {_e(Path(trace.meta.path).name)}</h1>",
            f"<p class='muted'>{_e(trace.meta.path)} ({_e(trace.meta.source)})</p>"]
    for index, entry in enumerate(summary["devices"]):
        body.append(_device_section(trace, entry, findings.get(entry["device"], []), index))
    if not summary["devices"]:
        body.append('<p class="muted">no device has events or blocks</p>')
    body += ["<h2>Capture facts</h2>", _facts(trace)]
    return _page(f"memtui report {Path(trace.meta.path).name}", body)


# -- two captures -------------------------------------------------------------------------


def _delta(n: int | None) -> str:
    from memtui.units import signed_bytes

    return signed_bytes(n)


def _compared_device(d, a: MemoryTrace, index: int) -> str:
    from memtui.analysis.across.compare import on_axis

    this, mapped, _ = on_axis(d, "a")
    chart = level_chart(
        [Series("A allocated", this, "run-a", peak_id=f"peak-a-{index}"),
         Series("B allocated (aligned)", Level(np.asarray(mapped.t), np.asarray(mapped.values)),
                "run-b", peak_id=f"peak-b-{index}")],
        time_unit=a.meta.time_unit, css_id=f"compare-{index}",
        title=f"{d.device_a} (A) and {d.device_b} (B), aligned by {d.alignment.mode}")
    data = d.to_json()
    figures = _table(["", "A", "B", "B - A"], [
        [name, format_bytes(data[key][0]), format_bytes(data[key][1]), _delta(data[key][2])]
        for name, key in (("peak allocated", "peak_allocated"),
                          ("peak reserved", "peak_reserved"),
                          ("allocated at the end", "end_allocated"))], numeric={1, 2, 3})
    parts = [f'<section class="pair" id="pair-{index}"><h2>{_e(d.device_a)} (A) against '
             f"{_e(d.device_b)} (B)</h2><p class='muted'>aligned by {_e(d.alignment.mode)}"
             f"</p>", chart, figures]
    moved = [r for r in data.get("by_role", []) if r["delta"]]
    if moved:
        from memtui.text.roles import role_name

        parts.append("<h3>The difference by role</h3>" + _table(
            ["B - A", "at", "A", "B", "role"],
            [[_delta(r["delta"]), r["at"], format_bytes(r["a_bytes"]),
              format_bytes(r["b_bytes"]), role_name(r["role"])] for r in moved],
            numeric={0, 2, 3}))
    for title, rows in (("by stack (the innermost user frame)", data["by_stack"]),
                        ("by owner", [r for r in data["by_owner"]
                                      if r["label"] != "(no owner)"]),
                        ("by op", [r for r in data["by_op"]
                                   if r["label"] != "(outside any op)"])):
        rows = [r for r in rows if r["delta"]][:TOP_ROWS]
        if rows:
            parts.append(f"<h3>The difference {title}</h3>" + _table(
                ["B - A", "at", "A", "B", "what"],
                [[_delta(r["delta"]), r["at"], format_bytes(r["a_bytes"]),
                  format_bytes(r["b_bytes"]), r["label"]] for r in rows], numeric={0, 2, 3}))
    changed = sorted((s for s in data["steps"] if s["delta"]), key=lambda s: -abs(s["delta"]))
    if changed:
        parts.append("<h3>Steps whose peak changed most</h3>" + _table(
            ["step", "A peak", "B peak", "B - A"],
            [[s["step"], format_bytes(s["a_peak"]), format_bytes(s["b_peak"]),
              _delta(s["delta"])] for s in changed[:TOP_ROWS]], numeric={1, 2, 3}))
    if d.new_blocks.height:
        parts.append("<h3>Alive at B's end without a counterpart in A</h3>" + _table(
            ["blocks", "size", "stack"],
            [[r["count"], format_bytes(r["size"]), r["label"]]
             for r in d.new_blocks.head(TOP_ROWS).iter_rows(named=True)], numeric={0, 1}))
    parts.append("</section>")
    return "".join(parts)


def compare_html(comparison, a: MemoryTrace, b: MemoryTrace, summary_b: dict[str, Any],
                 findings_b: dict[str, list[Finding]]) -> str:
    """The page of two captures: B's own sections after the aligned comparison."""
    body = [f"<h1>memtui report: {_e(Path(b.meta.path).name)} against "
            f"{_e(Path(a.meta.path).name)}</h1>",
            f"<p class='muted'>A: {_e(a.meta.path)} ({_e(a.meta.source)})<br>"
            f"B: {_e(b.meta.path)} ({_e(b.meta.source)})</p>"]
    for index, d in enumerate(comparison.devices):
        body.append(_compared_device(d, a, index))
    if not comparison.devices:
        body.append('<p class="muted">no device to compare: one of the captures has none</p>')
    for index, entry in enumerate(summary_b["devices"]):
        body.append(_device_section(b, entry, findings_b.get(entry["device"], []), index))
    body += ["<h2>Capture B: facts</h2>", _facts(b)]
    return _page(f"memtui report {Path(b.meta.path).name}", body)


def write_report(text: str, path: Path, inputs: Iterable[str | Path | None] = ()) -> None:
    """The page at ``path``, appearing whole (an exclusive temporary beside it, renamed
    over it: :func:`memtui.outputs.write_atomically`, never over one of ``inputs``)."""
    write_atomically(path, text, inputs)


__all__ = ["at_the_peak", "compare_html", "device_chart", "finding_html", "report_html",
           "write_report"]
