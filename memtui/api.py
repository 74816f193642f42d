"""memtui as a library: ``memtui.open(path) -> Capture``, ``memtui.compare(a, b)``.

The supported Python surface (``memtui.__all__``); the commands ``summary``, ``findings``,
``state``, ``compare`` and ``check`` call it and print what it returns, so every result's
``to_dict()`` is exactly the object the command prints with ``--json``::

    import memtui

    cap = memtui.open("run.pickle")
    print(cap.summary().devices[0].peak_allocated_bytes)
    print(cap.check(max_peak="40 GiB").passed)

A :class:`Capture` is loaded once (through the reopen cache, as the commands load it) and
computes its findings once, whichever of ``findings()``, ``summary()`` and ``check()``
asks first.  Figures, findings and checks of a layered capture (msMemScope) are those of
each device's default memory layer, as the commands and the UI show them; ``events()``
and ``blocks()`` are the capture's own frames, every layer included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.errors import CaptureError

if TYPE_CHECKING:
    import polars as pl

    from memtui.analysis.across.compare import Comparison as _Comparison
    from memtui.analysis.across.compare import DeviceComparison
    from memtui.analysis.findings.model import Finding
    from memtui.analysis.limits.check import LimitResult, Limits, LimitsVerdict
    from memtui.model import MemoryTrace

PathLike = str | Path


# -- typed results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceSummary:
    """One device's figures (``memtui summary --json``'s ``devices`` entries)."""

    device: str
    events: int
    segments: int | None
    blocks: int
    ghost_blocks: int
    peak_allocated_bytes: int
    peak_time_ns: int | None
    allocated_at_end_bytes: int | None
    reserved_at_end_bytes: int | None
    peak_reserved_bytes: int | None
    findings: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceSummary:
        names = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names})

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**data, **self.extra}


@dataclass(frozen=True)
class Summary:
    """Per-device figures of one capture: ``to_dict()`` is ``memtui summary --json``."""

    source: str
    path: str
    devices: tuple[DeviceSummary, ...]
    warnings: tuple[str, ...]
    _text: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], text: str | None = None) -> Summary:
        return cls(source=data["source"], path=data["path"],
                   devices=tuple(DeviceSummary.from_dict(d) for d in data["devices"]),
                   warnings=tuple(data.get("warnings", ())), _text=text)

    def device(self, name: str) -> DeviceSummary:
        for entry in self.devices:
            if entry.device == name:
                return entry
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "path": self.path,
                "devices": [d.to_dict() for d in self.devices],
                "warnings": list(self.warnings)}

    def text(self) -> str:
        """What ``memtui summary`` prints."""
        return self._text or ""


@dataclass(frozen=True)
class Findings:
    """Every finding per device, most severe first: ``to_dict()`` is ``memtui findings
    --json``; each :class:`~memtui.analysis.findings.model.Finding` has ``kind``,
    ``severity``, ``title``, ``bytes``, ``detail`` and ``evidence``."""

    source: str
    path: str
    devices: dict[str, list[Finding]]
    warnings: tuple[str, ...]
    _text: str | None = field(default=None, repr=False, compare=False)
    _dict: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def all(self) -> list[Finding]:
        """Every device's findings in one list, most severe first."""
        from memtui.analysis.findings import flat

        return flat(self.devices)

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.all() if f.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        if self._dict is not None:  # made with the full stacks
            return self._dict
        return {"source": self.source, "path": self.path,
                "devices": [{"device": name, "findings": [f.to_json() for f in found]}
                            for name, found in self.devices.items()],
                "warnings": list(self.warnings)}

    def text(self) -> str:
        """What ``memtui findings`` prints."""
        return self._text or ""


@dataclass(frozen=True)
class State:
    """The allocator state just after one event: ``to_dict()`` is ``memtui state --json``."""

    device: str | None  # (None: a capture without any device)
    event: int | None
    t: int | None
    level: dict[str, int | None] | None
    segments: list[dict[str, Any]]
    free_bytes: int
    largest_gap_bytes: int
    gaps: int
    # the free bytes split as every output splits them (pool_state.Fragmentation)
    fragmented_bytes: int
    fragmented_segments: int
    fragmented_share: float
    cached_bytes: int
    cached_segments: int
    rounding_bytes: int
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    _text: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], text: str | None = None) -> State:
        names = {f.name for f in fields(cls)} - {"extra", "_text"}
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names}, _text=text)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("extra", "_text")}
        return {**data, **self.extra}

    def text(self) -> str:
        """What ``memtui state`` prints."""
        return self._text or ""


class Comparison:
    """Capture B against capture A (deltas B - A) per matched device pair:
    ``to_dict()`` is ``memtui compare --json``."""

    def __init__(self, result: _Comparison) -> None:
        self._result = result

    @property
    def alignment(self) -> str:
        return self._result.mode

    @property
    def devices(self) -> list[DeviceComparison]:
        """Each device pair: ``device_a``, ``device_b``, the peaks and ends of each run
        (``a``, ``b``), and the attribution frames ``by_stack``, ``by_owner``, ``by_op``."""
        return self._result.devices

    def to_dict(self) -> dict[str, Any]:
        return self._result.to_json()

    def text(self, top: int = 10) -> str:
        """What ``memtui compare`` prints (``top`` rows of each attribution)."""
        from memtui.text.compare import format_comparison

        return format_comparison(self._result, top)


# -- the capture -----------------------------------------------------------------------------


class CheckResult:
    """``memtui check``'s verdict on a capture: every limit's result (``passed``,
    ``broken``, ``results``, ``limits``, ``exit_code``, ``to_dict()``, as
    :class:`~memtui.analysis.limits.check.LimitsVerdict` holds them) and its text for people
    and CI systems (``text()``, ``junit_xml()``, written by :mod:`memtui.text.check`)."""

    def __init__(self, verdict: LimitsVerdict) -> None:
        self.verdict = verdict

    @classmethod
    def of(cls, verdict: LimitsVerdict) -> CheckResult:
        return cls(verdict)

    path = property(lambda self: self.verdict.path)
    source = property(lambda self: self.verdict.source)
    baseline = property(lambda self: self.verdict.baseline)
    limits = property(lambda self: self.verdict.limits)
    results = property(lambda self: self.verdict.results)

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def broken(self) -> list[LimitResult]:
        return self.verdict.broken

    @property
    def exit_code(self) -> int:
        """0 when every limit holds, 1 when one is broken (``memtui check``'s status)."""
        return self.verdict.exit_code

    def text(self) -> str:
        """The verdict ``memtui check`` prints."""
        from memtui.text.check import format_verdict

        return format_verdict(self.verdict)

    def junit_xml(self) -> bytes:
        """The verdict as JUnit XML (``memtui check --junit``)."""
        from memtui.text.check import junit_xml

        return junit_xml(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return self.verdict.to_dict()


class Capture:
    """One capture, opened by :func:`open`."""

    def __init__(self, trace: MemoryTrace, cache_key: Any = None) -> None:
        self._trace = trace
        self._view: MemoryTrace | None = None
        self._findings: dict[str, list[Finding]] | None = None
        self._cache_key = cache_key

    def __repr__(self) -> str:
        return f"<memtui.Capture {self.path!r} ({self.source}, devices {self.devices})>"

    @property
    def path(self) -> str:
        return self._trace.meta.path

    @property
    def source(self) -> str:
        """The format: ``torch_snapshot``, ``memscope``, ``ascend_profiler``, ..."""
        return self._trace.meta.source

    @property
    def devices(self) -> list[str]:
        """The device names (``cuda:0``, ``npu:3``, ...), in the capture's order."""
        return list(self._trace.meta.device_names)

    @property
    def warnings(self) -> list[str]:
        return list(self._trace.meta.warnings)

    @property
    def trace(self) -> MemoryTrace:
        """The canonical model every analysis reads (``memtui.model.MemoryTrace``)."""
        return self._trace

    def events(self, device: str | None = None) -> pl.DataFrame:
        """The memory events of ``device`` (every device's without one), in time order:
        ``t`` (ns), ``seq``, ``device``, ``action``, ``addr``, ``size``, ``block_id``,
        ``stack_id``, ``allocated``, ``reserved``, ... (``memtui/model.py``)."""
        return self._rows(self._trace.events, device)

    def blocks(self, device: str | None = None) -> pl.DataFrame:
        """The allocation lifetimes of ``device`` (every device's without one):
        ``block_id``, ``addr``, ``size``, ``requested_size``, ``t_alloc``, ``t_free`` (null:
        alive at the end), ``stack_id``, ``owner``, ``pool``, ``ghost``, ..."""
        return self._rows(self._trace.blocks, device)

    def _rows(self, frame: pl.DataFrame, device: str | None) -> pl.DataFrame:
        if device is None:
            return frame
        self._known(device)
        import polars as pl

        return frame.filter(pl.col("device") == device)

    def _known(self, device: str) -> None:
        if device not in self.devices:
            raise CaptureError(self.path, f"no device {device!r} (it has "
                                          f"{', '.join(self.devices) or 'none'})")

    def view(self) -> MemoryTrace:
        """The trace the figures come from: each device's default memory layer for a
        layered capture (msMemScope), else the capture itself."""
        if self._view is None:
            from memtui.analysis.timeline.layers import has_layers, layer_view

            trace = self._trace
            if has_layers(trace) and "layers" not in trace.meta.extra:
                trace = layer_view(trace)
            self._view = trace
        return self._view

    def _found(self) -> dict[str, list[Finding]]:
        if self._findings is None:
            from memtui.analysis.findings import find_all
            from memtui.analysis.timeline.levels import allocated_level, reserved_level, seed_levels

            view = self.view()
            for name in view.meta.device_names:  # made once: the findings and the figures
                seed_levels(view, name, allocated_level(view, name),  # both read them
                            reserved_level(view, name))
            if self._cache_key is not None:  # kept beside the cache entry: found once
                from memtui.loading import findings_of

                self._findings = findings_of(view)
            else:
                self._findings = find_all(view)
        return self._findings

    def findings(self, stacks: bool = False) -> Findings:
        """Leaks, the peak, OOMs, fragmentation, inefficient blocks, capture limits
        (``stacks``: the text and the dict carry the full call stack of each finding's
        evidence and of each of the peak's stack groups, ``findings --stacks``)."""
        from memtui.analysis.findings import findings_json
        from memtui.text.findings import format_findings

        view, found = self.view(), self._found()
        return Findings(source=view.meta.source, path=view.meta.path, devices=found,
                        warnings=tuple(view.meta.warnings),
                        _text=format_findings(view, found, stacks=stacks),
                        _dict=findings_json(view, found, stacks=True) if stacks else None)

    def summary(self) -> Summary:
        """Per-device figures (peak allocated and reserved, at the end, counts)."""
        from memtui.analysis.summary import summary
        from memtui.text.summary import format_summary

        view = self.view()
        data = self._cached_summary()
        if data is None:
            data = summary(view, self._found())
        return Summary.from_dict(data, format_summary(data, view))

    def _cached_summary(self) -> dict[str, Any] | None:
        if self._cache_key is None or self._findings is not None:
            return None
        from memtui import cache

        data = cache.load_derived(self._cache_key, "summary")
        if not isinstance(data, dict):
            return None
        data["path"] = self.path  # the path as given this time
        return data

    def _keep_summary(self, result: Summary, text_name: str) -> None:
        """Keep the figures (and the text, as ``text_name``) beside the reopen cache's
        entry, for a reopened ``memtui summary`` (after it printed: it may wait for the
        entry's own store)."""
        if self._cache_key is None:
            return
        from memtui import cache

        data = result.to_dict()
        cache.save_derived(self._cache_key, "summary", data)
        cache.save_derived(self._cache_key, text_name, {"path": data["path"],
                                                        "text": result.text()})

    def state(self, event: int | str | None = None, *, device: str | None = None,
              time: int | str | None = None, layer: str | None = None) -> State:
        """The allocator state just after ``event`` (its position in the device's trace,
        or ``"first"``, ``"peak"``, ``"last"``: the default) or at ``time`` (a raw trace
        time, or ``"+1.5s"`` / ``"250ms"`` from the device's start), on ``device`` (default:
        the one with the most events), in memory ``layer`` (msMemScope)."""
        from memtui.analysis.layout.state import (
            EVENT_NAMES,
            allocator_state,
            busiest_device,
            empty_state,
        )
        from memtui.analysis.timeline.at_time import Timeline
        from memtui.text.state import format_state

        device = device or busiest_device(self._trace)
        if device is None:  # (a profiler folder's metadata alone): an answer, as summary gives
            text = "\n".join(["no device has events, blocks or levels",
                              *(f"warning: {w}" for w in self._trace.meta.warnings)])
            return State.from_dict(empty_state(), text)
        self._known(device)
        trace = self._layer(device, layer)
        timeline = Timeline.build(trace, device)
        if event is not None and event not in EVENT_NAMES:
            try:
                event = int(event)
            except (TypeError, ValueError):
                raise CaptureError(self.path, f"event {event!r}: a number, first, peak or "
                                              "last") from None
        t = None if time is None else self._time(time, timeline.start)
        try:
            data = allocator_state(trace, device, event, t)
        except ValueError as exc:
            raise CaptureError(self.path, str(exc)) from None
        return State.from_dict(data, format_state(data, trace.meta.time_unit, timeline.start))

    def _time(self, value: int | str, start: int) -> int:
        from memtui.analysis.tables import parse_time

        text = str(value)
        if text.lstrip("-").isdigit():
            return int(text)  # a raw trace time
        try:
            return parse_time(text, start, self._trace.meta.time_unit)
        except ValueError as exc:
            raise CaptureError(self.path, f"time {text!r}: {exc}") from None

    def _layer(self, device: str, layer: str | None) -> MemoryTrace:
        from memtui.analysis.timeline.layers import (
            default_layers,
            has_layers,
            layer_view,
            layers_of,
        )

        if not has_layers(self._trace):
            if layer is not None:
                raise CaptureError(self.path, "--layer: this capture has no memory layers")
            return self._trace
        if layer is None:
            return self.view()
        if layer not in layers_of(self._trace, device):
            known = ", ".join(layers_of(self._trace, device)) or "none"
            raise CaptureError(self.path, f"--layer {layer!r}: {device} has {known}")
        chosen = default_layers(self._trace)
        chosen[device] = layer
        return layer_view(self._trace, chosen)

    def check(self, baseline: Capture | PathLike | None = None, *,
              limits: Limits | Mapping[str, Any] | None = None,
              **values: Any) -> CheckResult:
        """Check the capture against memory limits (``memtui check``): keywords
        ``max_peak``, ``max_reserved``, ``max_end``, ``max_leak_per_step`` (sizes as
        ``"512MiB"``, ``"2.5 GiB"``, ``1e9``), ``tolerance`` (percent, against
        ``baseline``: a capture or a path), ``allow_oom``; or ``limits`` made ready.  The
        result says ``passed``, lists what is ``broken`` (each with its figure and
        evidence), and gives the verdict as ``text()``, ``junit_xml()`` and
        ``to_dict()``."""
        from memtui.analysis.limits.check import Limits, check

        try:
            chosen = limits if isinstance(limits, Limits) else Limits.from_mapping(limits or {})
            chosen = chosen.merged(Limits.from_mapping(values).to_dict() if values else {})
        except ValueError as exc:
            raise CaptureError(self.path, str(exc)) from None
        base = None
        if baseline is not None:
            other = baseline if isinstance(baseline, Capture) else open(baseline)
            base = (other.view(), other._found())
        view = self.view()
        figures = {d["device"]: d for d in self.summary().to_dict()["devices"]}
        return CheckResult.of(check(view, figures, self._found(), chosen, base))


# -- entry points ------------------------------------------------------------------------------


def open(path: PathLike, *, use_cache: bool | None = None) -> Capture:  # noqa: A001
    """Open a capture: a PyTorch snapshot pickle, an msMemScope DB / CSV / folder, an Ascend
    profiler folder or file (the format is sniffed from the content).  Bad input raises
    :class:`memtui.CaptureError` (its ``str()`` is the CLI's one line).  ``use_cache=False``
    neither reads nor writes the reopen cache."""
    return _open(path, use_cache=use_cache)


def _open(path: PathLike, *, use_cache: bool | None = None,
          store_in_background: bool = False) -> Capture:
    from memtui.loading import load_trace

    trace = load_trace(path, use_cache=use_cache, store_in_background=store_in_background)
    return Capture(trace, _cache_key(path, use_cache))


def _cache_key(path: PathLike, use_cache: bool | None) -> Any:
    from memtui import cache

    if use_cache is False or not cache.enabled():
        return None
    return cache.key_of(path)


def compare(a: Capture | PathLike, b: Capture | PathLike, *, align: str | None = None,
            shift: int = 0) -> Comparison:
    """What changed from capture A to capture B, and where: ``align`` ``"step"``,
    ``"time"`` or ``"position"`` (default: step where both have steps, else time, else
    position), ``shift`` B against A in those units.  Paths load side by side."""
    return _compare(a, b, align=align, shift=shift)


def _compare(a: Capture | PathLike, b: Capture | PathLike, *, align: str | None = None,
             shift: int = 0, store_in_background: bool = False) -> Comparison:
    from memtui.analysis.across.compare import compare as compare_traces

    traces = _traces(a, b, store_in_background=store_in_background)
    return Comparison(compare_traces(traces[0], traces[1], mode=align, shift=shift))


def _traces(*captures: Capture | PathLike, store_in_background: bool = False) -> list:
    from memtui.loading import load_traces

    paths = [c for c in captures if not isinstance(c, Capture)]
    loaded = iter(load_traces(paths, store_in_background=store_in_background) if paths
                  else [])
    return [c.trace if isinstance(c, Capture) else next(loaded) for c in captures]


__all__ = ["Capture", "Comparison", "DeviceSummary", "Findings", "State", "Summary",
           "compare", "open"]
