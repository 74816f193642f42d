"""Memory limits a capture must keep, checked: the verdict of ``memtui check`` (issue 24).

One :class:`Limits` (sizes in bytes, a tolerance in percent) is checked against a capture
and, optionally, a baseline capture of the same job.  Every limit gives one
:class:`LimitResult` per device (per aligned device pair against a baseline): ``pass``,
``fail`` or ``skipped`` (the figure is not in the capture), with the figure, the limit
and the evidence: the stack that held most (or that leaked, or asked for the memory at an
OOM) and the step it happened in.

The figures are the ones ``memtui summary`` prints, the leaks and OOMs the ones ``memtui
findings`` finds, the baseline deltas the ones ``memtui compare`` attributes: this module
only compares them with the limits.  Its callers give it the findings they computed
(:func:`check` takes them per device), so nothing is found twice.

The limits:

* ``max_peak``, ``max_reserved``, ``max_end``: peak allocated, peak reserved and allocated
  at the end of each device at most this many bytes;
* ``max_leak_per_step``: no leak finding grows faster than this (unset: no leak finding
  of high severity);
* ``allow_oom``: unless set, an out-of-memory error in the capture breaks the ``oom`` limit;
* ``max_role``: ``(role, bytes)`` pairs: each role's bytes (memory by role,
  :mod:`memtui.analysis.roles`) at most that many at every event (``--max-role
  optimizer_state=4GiB``; ``max-role = {optimizer_state = "4 GiB"}`` in pyproject.toml);
* against a baseline, with ``tolerance`` percent: peak, reserved and end of each aligned
  device at most the baseline's plus the tolerance, no leak the baseline lacks (by its
  frame, owner and pool) and no more OOMs than the baseline had.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import polars as pl

from memtui.analysis.findings.frames import NO_STACK
from memtui.analysis.findings.leak import leak_rate
from memtui.analysis.findings.model import Finding
from memtui.model import MemoryTrace
from memtui.units import format_bytes

DEFAULT_TOLERANCE = 5.0
PASS, FAIL, SKIPPED = "pass", "fail", "skipped"


def parse_size(value: str | int | float) -> int:
    """Bytes from ``512MiB``, ``2.5 GiB``, ``1e9``, ``0 B`` or a number (as
    :func:`memtui.sizes.parse_size` reads them: ``GiB`` binary, ``GB`` decimal); ValueError
    else."""
    from memtui import sizes

    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"not a size: {value!r} (a size is 0 or more)")
        return int(round(value))
    return sizes.parse_size(str(value))


@dataclass(frozen=True)
class Limits:
    """What a capture must keep (see the module docstring); None: not checked."""

    max_peak: int | None = None
    max_reserved: int | None = None
    max_end: int | None = None
    max_leak_per_step: int | None = None
    tolerance: float = DEFAULT_TOLERANCE
    allow_oom: bool = False
    #: ``(role, bytes)`` pairs: each role's bytes at most this many at every event
    max_role: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Limits:
        """Limits from keys spelt ``max-peak`` or ``max_peak`` (pyproject.toml, the
        marker's keywords), sizes as :func:`parse_size` reads them; ValueError for an
        unknown key or a bad value."""
        known = {f.name for f in fields(cls)}
        chosen: dict[str, Any] = {}
        spelt: dict[str, Any] = {}
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ValueError(f"unknown limit {key!r} (known: "
                                 f"{', '.join(sorted(n.replace('_', '-') for n in known))})")
            if name in chosen:
                raise ValueError(f"{spelt[name]!r} and {key!r} are the same limit: give it "
                                 "once")
            chosen[name], spelt[name] = _limit_value(name, value), key
        return cls(**chosen)

    def merged(self, other: Mapping[str, Any]) -> Limits:
        """These limits with those of ``other`` (already parsed) that are not None; role
        limits merged role by role (``other``'s over these)."""
        values = asdict(self)
        roles = dict(self.max_role)
        roles.update(dict(role_pairs(other.get("max_role"))))
        values.update({k: v for k, v in other.items() if v is not None and k != "max_role"})
        values["max_role"] = tuple(roles.items())
        return Limits(**values)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["max_role"] = dict(self.max_role)
        return data


def role_pairs(value: Any) -> tuple[tuple[str, int], ...]:
    """``max_role`` as ``(role, bytes)`` pairs from a mapping (``{optimizer_state =
    "4GiB"}``), a list of ``ROLE=SIZE`` texts or one such text, or pairs already made."""
    from memtui.analysis.roles.model import ROLES

    if value is None or value == () or value == {}:
        return ()
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = []
        for item in value:
            if isinstance(item, list | tuple) and len(item) == 2:
                items.append((item[0], item[1]))
            elif isinstance(item, str) and "=" in item:
                role, _, size = item.partition("=")
                items.append((role.strip(), size.strip()))
            else:
                raise ValueError(f"max-role takes ROLE=SIZE, not {str(item)[:80]!r}")
    else:
        raise ValueError(f"max-role takes ROLE=SIZE pairs, not {type(value).__name__}")
    pairs = []
    for role, size in items:
        if role not in ROLES:
            raise ValueError(f"max-role: {str(role)[:80]!r} is not a role (roles: "
                             f"{', '.join(ROLES)})")
        pairs.append((str(role), parse_size(size)))
    return tuple(pairs)


def _limit_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "max_role":
        return role_pairs(value)
    if name == "allow_oom":
        if not isinstance(value, bool):
            raise ValueError(f"allow-oom must be true or false, not {value!r}")
        return value
    if name == "tolerance":
        try:
            tolerance = float(str(value).rstrip("% "))
        except ValueError:
            raise ValueError(f"tolerance must be a percentage, not {value!r}") from None
        if not math.isfinite(tolerance) or tolerance < 0:
            raise ValueError(f"tolerance must be 0 or more, not {value!r}")
        return tolerance
    return parse_size(value)


@dataclass(frozen=True)
class LimitResult:
    """One limit on one device: its status, figure, limit and evidence."""

    limit: str  # max_peak, max_reserved, max_end, leak, oom, baseline_peak, ...
    device: str
    status: str  # pass, fail, skipped
    message: str  # one line, with the figure and the limit
    figure: int | None = None
    bound: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)  # stack, step, t, seq

    @property
    def broken(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "device": self.device, "status": self.status,
                "message": self.message, "figure": self.figure, "limit_bytes": self.bound,
                "evidence": self.evidence}


@dataclass(frozen=True)
class LimitsVerdict:
    """Every limit's result for one capture (against a baseline where one was given); the
    API's :class:`memtui.LimitsVerdict` adds its text (:mod:`memtui.text.check`)."""

    path: str
    source: str
    baseline: str | None
    limits: Limits
    results: tuple[LimitResult, ...]
    #: Per device, bytes by role at its peak (summing to its peak allocated)
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.broken

    @property
    def broken(self) -> list[LimitResult]:
        return [r for r in self.results if r.broken]

    @property
    def exit_code(self) -> int:
        """0 when every limit holds, 1 when one is broken (``memtui check``'s status)."""
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "source": self.source, "baseline": self.baseline,
                "passed": self.passed, "limits": self.limits.to_dict(),
                "results": [r.to_dict() for r in self.results], "by_role": self.by_role}


# -- evidence -------------------------------------------------------------------------------


def step_at(trace: MemoryTrace, device: str, t: int | None) -> str | None:
    """The name of the step of ``device`` holding time ``t`` (None: no step holds it)."""
    from memtui.analysis.across.compare import steps_of

    if t is None:
        return None
    steps = steps_of(trace, device)
    if steps.is_empty():
        return None
    holding = steps.filter((pl.col("t") <= t) & (pl.col("t_end") > t))
    if holding.is_empty():
        return None
    row = holding.row(-1, named=True)
    return row["name"] or f"step {row['step']}"


#: How many of the groups holding most at a peak its evidence names.
HELD_BY = 3


def _evidence(trace: MemoryTrace, finding: Finding | None) -> dict[str, Any]:
    """Where a finding's figure comes from: its time, event, step, owner, the stack of
    what a person acts on (from its user frame outward: :func:`evidence_stack`) and, for
    the peak, the groups holding most (``held_by``)."""
    if finding is None:
        return {}
    ev = finding.evidence
    found: dict[str, Any] = {"t": ev.t, "seq": ev.seq,
                             "stack": [f.to_json() for f in ev.stack[:8]]}
    if ev.owner:
        found["owner"] = ev.owner
    step = step_at(trace, finding.device, ev.t)
    if finding.kind == "leak":
        step = finding.detail.get("first_step_name") or step
    found["step"] = step
    if finding.kind == "peak":
        grouped = "by_owner" if finding.detail.get("grouped_by") == "operator" else "by_stack"
        held = held_by(finding.detail.get(grouped) or [])
        if held:
            found["held_by"] = held
        if found["stack"] and finding.detail.get("evidence_group"):
            found["stack_of"] = finding.detail["evidence_group"]
    return found


def held_by(rows: list[dict[str, Any]], count: int = HELD_BY) -> list[dict[str, Any]]:
    """The first ``count`` groups of a peak's split (largest first) that name something:
    a stack's user frame, an owner, or the bytes alive before the capture; never the
    "(N more)" row or a group without a stack."""
    named = [r for r in rows if not r["label"].endswith(" more)") and r["label"] != NO_STACK
             and r["label"] not in ("(no owner)", "(no pool)")]
    return [{"label": r["label"], "bytes": r["bytes"], "share": r["share"]}
            for r in named[:count]]


def _of_kind(found: list[Finding], kind: str) -> list[Finding]:
    return [f for f in found if f.kind == kind]


# -- the limits on one capture ---------------------------------------------------------------


def _figure_limit(name: str, what: str, device: str, figure: int | None, bound: int | None,
                  evidence: dict[str, Any]) -> LimitResult | None:
    flag = "--" + name.replace("_", "-")
    if bound is None:
        return None
    if figure is None:
        return LimitResult(name, device, SKIPPED, f"{what}: not in this capture", None, bound)
    status = FAIL if figure > bound else PASS
    relation = ">" if figure > bound else "<="
    message = f"{what} {format_bytes(figure)} {relation} {flag} {format_bytes(bound)}"
    return LimitResult(name, device, status, message, figure, bound, evidence)


def _leak_limit(trace: MemoryTrace, device: str, leaks: list[Finding],
                limit: int | None) -> LimitResult:
    if limit is None:
        broken = [f for f in leaks if f.severity == "high"]
        rule = "no leak of high severity"
    else:
        broken = [f for f in leaks if leak_rate(f) > limit]
        rule = f"no leak over --max-leak-per-step {format_bytes(limit)}"
    if not broken:
        worst = max((leak_rate(f) for f in leaks), default=0)
        message = rule + (f" ({len(leaks)} below it, the largest {format_bytes(worst)} per "
                          "step)" if leaks else "")
        return LimitResult("leak", device, PASS, message, worst if leaks else 0, limit)
    worst = max(broken, key=leak_rate)
    per_step = leak_rate(worst)
    more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    message = f"{worst.title}{more}; the limit: {rule}"
    return LimitResult("leak", device, FAIL, message, per_step, limit,
                       _evidence(trace, worst))


def _oom_limit(trace: MemoryTrace, device: str, ooms: list[Finding]) -> LimitResult:
    if not ooms:
        return LimitResult("oom", device, PASS, "no out-of-memory error", 0, None)
    first = ooms[0]
    more = f" ({len(ooms)} in all)" if len(ooms) > 1 else ""
    return LimitResult("oom", device, FAIL, f"{first.title}{more}",
                       len(ooms), None, _evidence(trace, first))


def check_device(trace: MemoryTrace, device: str, figures: Mapping[str, Any],
                 found: list[Finding], limits: Limits) -> list[LimitResult]:
    """The limits on one device; ``figures`` its ``memtui summary`` entry, ``found`` its
    findings."""
    peak = _evidence(trace, next(iter(_of_kind(found, "peak")), None))
    results = [
        _figure_limit("max_peak", "peak allocated", device, figures["peak_allocated_bytes"],
                      limits.max_peak, peak),
        _figure_limit("max_reserved", "peak reserved", device, figures["peak_reserved_bytes"],
                      limits.max_reserved, _reserved_evidence(trace, device, found)),
        _figure_limit("max_end", "allocated at the end", device,
                      figures["allocated_at_end_bytes"], limits.max_end, {}),
        _leak_limit(trace, device, _of_kind(found, "leak"), limits.max_leak_per_step),
    ]
    if not limits.allow_oom:
        results.append(_oom_limit(trace, device, _of_kind(found, "oom")))
    results += _role_limits(trace, device, limits)
    return [r for r in results if r is not None]


def _role_limits(trace: MemoryTrace, device: str, limits: Limits) -> list[LimitResult]:
    """``max_role``: each named role's highest bytes over the trace against its bound,
    the evidence the event of that high (its time and step)."""
    if not limits.max_role:
        return []
    from memtui.analysis.roles.figures import role_peaks
    from memtui.analysis.roles.model import ROLE_LABELS
    from memtui.analysis.timeline.at_time import Timeline

    peaks = role_peaks(trace, device)
    timeline = Timeline.build(trace, device)
    out = []
    for role, bound in limits.max_role:
        high = peaks.get(role, {"bytes": 0, "event": -1})
        figure, event = high["bytes"], high["event"]
        status = FAIL if figure > bound else PASS
        relation = ">" if figure > bound else "<="
        message = (f"{ROLE_LABELS[role]} peak {format_bytes(figure)} {relation} "
                   f"--max-role {role}={format_bytes(bound)}")
        evidence: dict[str, Any] = {}
        if status == FAIL:
            t = timeline.time_of(max(event, 0))
            evidence = {"t": t, "event": event if event >= 0 else None, "role": role,
                        "step": step_at(trace, device, t)}
        out.append(LimitResult(f"max_role:{role}", device, status, message, figure, bound,
                               evidence))
    return out


def _reserved_evidence(trace: MemoryTrace, device: str, found: list[Finding]) -> dict:
    peak = next(iter(_of_kind(found, "peak")), None)
    if peak is None or "peak_reserved_t" not in peak.detail:
        return {}
    t = peak.detail["peak_reserved_t"]
    rows = peak.detail.get("reserved_peak_by_stack") or []
    evidence: dict[str, Any] = {"t": t, "step": step_at(trace, device, t)}
    held = held_by(rows)
    if held:
        evidence["held_by"] = held
    return evidence


# -- against a baseline -----------------------------------------------------------------------


def _leak_key(f: Finding) -> tuple:
    d = f.detail
    return (d.get("function"), d.get("file"), d.get("line"), d.get("owner"), d.get("pool"))


def check_against(a: MemoryTrace, b: MemoryTrace, found_a: dict[str, list[Finding]],
                  found_b: dict[str, list[Finding]], limits: Limits) -> list[LimitResult]:
    """B (the capture checked) against A (the baseline), per aligned device pair."""
    from memtui.analysis.across.compare import compare_devices, device_pairs

    results: list[LimitResult] = []
    for dev_a, dev_b in device_pairs(a, b):
        d = compare_devices(a, b, dev_a, dev_b)
        name = dev_b if dev_a == dev_b else f"{dev_b} (baseline {dev_a})"
        top = _top_change(d)
        for limit, what, fa, fb in (
                ("baseline_peak", "peak allocated", d.a.peak, d.b.peak),
                ("baseline_reserved", "peak reserved", d.a.peak_reserved, d.b.peak_reserved),
                ("baseline_end", "allocated at the end", d.a.end_allocated,
                 d.b.end_allocated)):
            results.append(_against(limit, what, name, fa, fb, limits.tolerance,
                                    {**top, "step": _worst_step(d)} if top else {}))
        results.append(_new_leaks(b, name, found_a.get(dev_a, []), found_b.get(dev_b, [])))
        ooms_a = len(_of_kind(found_a.get(dev_a, []), "oom"))
        ooms_b = _of_kind(found_b.get(dev_b, []), "oom")
        if len(ooms_b) > ooms_a:
            results.append(LimitResult(
                "baseline_oom", name, FAIL,
                f"new out-of-memory error: {len(ooms_b)} against {ooms_a} in the baseline "
                f"({ooms_b[ooms_a].title})", len(ooms_b), ooms_a,
                _evidence(b, ooms_b[ooms_a])))
        else:
            results.append(LimitResult("baseline_oom", name, PASS,
                                       f"{len(ooms_b)} out-of-memory errors, the baseline "
                                       f"{ooms_a}", len(ooms_b), ooms_a))
    return results


#: The largest bound a limit holds (int64 bytes): a tolerance of 1e308 % allows anything.
MAX_BOUND = 2**63 - 1


def grown_bound(figure: int, tolerance: float) -> int:
    """``figure`` grown by ``tolerance`` percent, in bytes (at most :data:`MAX_BOUND`:
    a huge tolerance never overflows)."""
    grown = figure * (1 + tolerance / 100)
    return int(grown) if math.isfinite(grown) and grown < MAX_BOUND else MAX_BOUND


def _against(limit: str, what: str, device: str, a: int | None, b: int | None,
             tolerance: float, evidence: dict[str, Any]) -> LimitResult:
    if a is None or b is None:
        return LimitResult(limit, device, SKIPPED, f"{what}: not in both captures", b, None)
    bound = grown_bound(a, tolerance)
    change = f"{(b - a) / a:+.1%}" if a else ("+inf" if b else "+0%")
    status = FAIL if b > bound else PASS
    message = (f"{what} {format_bytes(b)} against the baseline's {format_bytes(a)} ({change}, "
               f"tolerance {tolerance:g}%)")
    return LimitResult(limit, device, status, message, b, bound,
                       evidence if status == FAIL else {})


def _top_change(d) -> dict[str, Any]:
    """The stack whose bytes at the peaks grew most (memtui compare's attribution)."""
    rows = d.by_stack.filter((pl.col("at") == "peak") & (pl.col("delta") > 0))
    if rows.is_empty():
        return {}
    row = rows.sort("delta", descending=True).row(0, named=True)
    name = str(row["label"]).split(" (")[0]
    return {"stack": [{"filename": row["file"], "line": row["line"], "name": name}],
            "grew_bytes": int(row["delta"])}


def _worst_step(d) -> str | None:
    if not d.steps:
        return None
    worst = max(d.steps, key=lambda s: s["delta"])
    return f"step {worst['step']}" if worst["delta"] > 0 else None


def _new_leaks(b: MemoryTrace, device: str, found_a: list[Finding],
               found_b: list[Finding]) -> LimitResult:
    known = {_leak_key(f) for f in _of_kind(found_a, "leak")}
    new = [f for f in _of_kind(found_b, "leak") if _leak_key(f) not in known]
    if not new:
        return LimitResult("baseline_leak", device, PASS, "no leak the baseline lacks", 0, None)
    first = new[0]
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return LimitResult("baseline_leak", device, FAIL, f"new leak: {first.title}{more}",
                       leak_rate(first), None, _evidence(b, first))


# -- the whole check ----------------------------------------------------------------------------


def check(trace: MemoryTrace, figures: Mapping[str, Mapping[str, Any]],
          found: dict[str, list[Finding]], limits: Limits,
          baseline: tuple[MemoryTrace, dict[str, list[Finding]]] | None = None) -> LimitsVerdict:
    """Every limit of ``limits`` on ``trace``: ``figures`` are its summary entries by
    device, ``found`` its findings by device, ``baseline`` the baseline's trace and
    findings (as the same view: each device's default memory layer)."""
    results: list[LimitResult] = []
    for device in trace.meta.device_names:
        results += check_device(trace, device, figures[device], found.get(device, []), limits)
    if baseline is not None:
        results += check_against(baseline[0], trace, baseline[1], found, limits)
    return LimitsVerdict(path=trace.meta.path, source=trace.meta.source,
                         baseline=baseline[0].meta.path if baseline is not None else None,
                         limits=limits, results=tuple(results),
                         by_role={d: dict(figures[d].get("by_role") or {}) for d in figures})


__all__ = ["LimitsVerdict", "LimitResult", "Limits", "check", "check_against", "check_device",
           "held_by", "parse_size", "step_at"]
