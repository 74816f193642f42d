"""The typed findings every finder returns, and their JSON form.

A :class:`Finding` is one answer memtui gives on its own (a leak, the peak, an OOM, ...):
its ``kind``, a ``severity`` (``high`` > ``medium`` > ``low`` > ``info``), a one-line
``title`` (names from the file in it escaped: :func:`memtui.errors.printable`), the
``bytes`` it is about, a ``detail`` dict of figures (JSON-ready) and the
:class:`Evidence` that the UI moves its cursor to (a time, an event, blocks, a stack,
an owner).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memtui.errors import printable

KINDS = ("leak", "peak", "oom", "fragmentation", "inefficient", "capture", "savings")
SEVERITIES = ("high", "medium", "low", "info")
#: Where the JSON lists at most this many block ids (``detail`` says how many there are).
JSON_BLOCK_IDS = 1000


@dataclass(frozen=True)
class StackFrame:
    filename: str | None
    line: int | None
    name: str | None

    def to_json(self) -> dict[str, Any]:
        return {"filename": self.filename, "line": self.line, "name": self.name}


@dataclass(frozen=True)
class Evidence:
    """Where a finding can be seen: a time (and the event ``seq`` there, and its ``event``
    number: its position in the device's events, the number every screen shows), blocks,
    a stack."""

    t: int | None = None
    seq: int | None = None
    block_ids: tuple[int, ...] = ()
    stack: tuple[StackFrame, ...] = ()
    owner: str | None = None
    stack_id: int | None = None
    window: tuple[int, int] | None = None  # a span worth selecting (the UI's window)
    event: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "event": self.event,
            "seq": self.seq,
            "block_ids": list(self.block_ids[:JSON_BLOCK_IDS]),
            "stack": [frame.to_json() for frame in self.stack],
            "owner": self.owner,
        }


@dataclass(frozen=True)
class Finding:
    """One finding on one device (see the module docstring)."""

    kind: str
    severity: str
    title: str
    device: str
    bytes: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=Evidence)

    def __post_init__(self) -> None:
        if not self.title.isprintable():  # names from a file: one line, nothing raw
            object.__setattr__(self, "title", printable(self.title))
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    @property
    def rank(self) -> int:
        """Sort key: lower is more severe."""
        return SEVERITIES.index(self.severity)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "title": self.title,
            "bytes": self.bytes,
            "detail": self.detail,
            "evidence": self.evidence.to_json(),
        }


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    """Every field of ``finding`` as JSON-ready values (the reopen cache's form: unlike
    :meth:`Finding.to_json` it keeps every block id, the stack id and the window)."""
    evidence = finding.evidence
    return {
        "kind": finding.kind, "severity": finding.severity, "title": finding.title,
        "device": finding.device, "bytes": finding.bytes, "detail": finding.detail,
        "evidence": {
            "t": evidence.t, "seq": evidence.seq, "event": evidence.event,
            "block_ids": list(evidence.block_ids),
            "stack": [frame.to_json() for frame in evidence.stack],
            "owner": evidence.owner, "stack_id": evidence.stack_id,
            "window": list(evidence.window) if evidence.window is not None else None,
        },
    }


def finding_from_dict(data: dict[str, Any]) -> Finding:
    """The :class:`Finding` :func:`finding_to_dict` wrote (KeyError, TypeError or
    ValueError where ``data`` is not one)."""
    evidence = data["evidence"]
    window = evidence["window"]
    return Finding(
        kind=data["kind"], severity=data["severity"], title=data["title"],
        device=data["device"], bytes=data["bytes"], detail=dict(data["detail"]),
        evidence=Evidence(
            t=evidence["t"], seq=evidence["seq"], event=evidence["event"],
            block_ids=tuple(int(b) for b in evidence["block_ids"]),
            stack=tuple(StackFrame(f["filename"], f["line"], f["name"])
                        for f in evidence["stack"]),
            owner=evidence["owner"], stack_id=evidence["stack_id"],
            window=(int(window[0]), int(window[1])) if window is not None else None,
        ),
    )


def ranked(findings: list[Finding]) -> list[Finding]:
    """``findings`` by severity, most severe first, then by bytes (largest first)."""
    return sorted(findings, key=lambda f: (f.rank, -(f.bytes or 0)))


__all__ = ["JSON_BLOCK_IDS", "KINDS", "SEVERITIES", "Evidence", "Finding", "StackFrame",
           "finding_from_dict", "finding_to_dict", "ranked"]
