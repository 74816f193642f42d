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

from collections.abc import Iterator, Mapping, Sequence
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
    from memtui.analysis.replay.predict import Prediction
    from memtui.analysis.replay.proof import Proof
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

    @property
    def by_role(self) -> dict[str, int]:
        """Bytes per role at the peak, summing to ``peak_allocated_bytes``."""
        return dict(self.extra.get("by_role") or {})

    @property
    def roles(self) -> dict[str, Any]:
        """The roles at the peak (``at_peak``) and the end (``at_end``), each role's own
        peak (``peaks``), what the phases were read from (``phases_from``)."""
        return dict(self.extra.get("roles") or {})

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
    #: Per device, bytes by role at its allocated peak (summing to it)
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)

    def all(self) -> list[Finding]:
        """Every device's findings in one list, most severe first."""
        from memtui.analysis.findings import flat

        return flat(self.devices)

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.all() if f.kind == kind]

    def __iter__(self) -> Iterator[Finding]:
        """``for finding in capture.findings()``: every finding, most severe first."""
        return iter(self.all())

    def __len__(self) -> int:
        return sum(len(found) for found in self.devices.values())

    def to_dict(self) -> dict[str, Any]:
        if self._dict is not None:  # made with the full stacks
            return self._dict
        return {"source": self.source, "path": self.path,
                "devices": [{"device": name, "findings": [f.to_json() for f in found],
                             "by_role": self.by_role.get(name, {})}
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

    @property
    def by_role(self) -> dict[str, int]:
        """Bytes per role at the event, summing to ``level["allocated"]``."""
        return dict(self.extra.get("by_role") or {})

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


@dataclass(frozen=True)
class WhatIf:
    """The caching allocator replayed on each device (``memtui whatif``): the ``proof``
    that the replay reproduces the recording and, where settings or a capacity were asked
    about, the ``prediction`` under them.  ``to_dict()`` is ``memtui whatif --json``."""

    path: str
    devices: tuple[tuple[Proof, Prediction | None], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "devices": [
            {"proof": proof.to_dict(),
             "prediction": prediction.to_dict() if prediction else None}
            for proof, prediction in self.devices]}

    @property
    def refusal(self) -> str:
        """Why no device answered ("" where one did): no replay could be made (not a
        PyTorch snapshot, no history recorded), or every prediction asked for was refused
        (an unproven replay makes none).  The proof of a replay that does not hold is an
        answer where no prediction was asked for.  ``memtui whatif`` exits 2 on one."""
        reasons = []
        for proof, prediction in self.devices:
            if proof.refused:
                reasons.append(f"{proof.device}: no replay ({proof.refused})")
            elif prediction is not None and prediction.refused:
                reasons.append(f"{proof.device}: prediction refused ({prediction.refused})")
            else:
                return ""
        if not reasons:
            return "no device to replay"
        more = f" (and {len(reasons) - 1} more devices)" if len(reasons) > 1 else ""
        return f"no what-if answer: {reasons[0]}{more}"

    def text(self) -> str:
        """What ``memtui whatif`` prints."""
        from memtui.text.replay import format_prediction, format_proof

        blocks = []
        for proof, prediction in self.devices:
            blocks.append(format_proof(proof))
            if prediction is not None:
                blocks.append(format_prediction(prediction))
        return "\n\n".join(blocks)


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

    def __init__(self, trace: MemoryTrace, cache_key: Any = None, roles: Any = None) -> None:
        if roles is not None:
            from memtui.analysis.roles.user_rules import with_rules

            trace = with_rules(trace, _role_rules(roles, trace.meta.path))
        self._trace = trace
        self._view: MemoryTrace | None = None
        self._findings: dict[str, list[Finding]] | None = None
        # what is kept beside the reopen cache was found under memtui's own role rules
        self._cache_key = cache_key if not _has_rules(trace) else None

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

    def roles(self, device: str | None = None) -> pl.DataFrame:
        """Every block (of ``device``, else of every device) with its ``role``
        (``parameter``, ``gradient``, ``optimizer_state``, ``activation``, ``temporary``,
        ``input``, ``cache``, ``other``), the ``rule`` that gave it (see
        ``memtui.analysis.roles.RULES``) and whether it was ``inferred`` by pairing; the
        blocks of each device's default memory layer for a layered capture."""
        from memtui.analysis.roles import blocks_with_roles

        if device is not None:
            self._known(device)
        return blocks_with_roles(self.view(), device)

    def by_role(self, event: int | str | None = None, *,
                device: str | None = None) -> dict[str, int]:
        """Bytes per role just after ``event`` (its position in the device's trace, or
        ``"first"``, ``"peak"``, ``"last"``: the default) on ``device`` (default: the one
        with the most events): every role, summing to allocated there."""
        from memtui.analysis.layout.state import START, busiest_device, resolve_event
        from memtui.analysis.roles import by_role_at
        from memtui.analysis.timeline.at_time import Timeline

        view = self.view()
        device = device or busiest_device(view)
        if device is None:
            return {}
        self._known(device)
        timeline = Timeline.build(view, device)
        try:
            position = resolve_event(timeline, event)
        except (TypeError, ValueError) as exc:
            raise CaptureError(self.path, f"event {event!r}: {exc}") from None
        return by_role_at(view, device, -1 if position == START else position)

    def view(self) -> MemoryTrace:
        """The trace the figures come from: each device's default memory layer for a
        layered capture (msMemScope), else the capture itself."""
        if self._view is None:
            from memtui.analysis.timeline.layers import has_layers, layer_view

            trace = self._trace
            if has_layers(trace) and "layers" not in trace.meta.extra:
                from memtui.progress import Phases, default

                events = trace.events.height
                layering = Phases(default()).start("memory layers", (0.0, 0.99), events,
                                                   unit="events")
                trace = layer_view(trace)
                layering.finish(events)
            self._view = trace
        return self._view

    def _found(self) -> dict[str, list[Finding]]:
        if self._findings is None:
            from memtui.analysis.findings import find_all
            from memtui.analysis.timeline.levels import allocated_level, reserved_level, seed_levels
            from memtui.progress import Phases, default

            view = self.view()
            events = view.events.height
            finding = Phases(default()).start("finding", (0.0, 1.0), events, unit="events")
            for name in view.meta.device_names:  # made once: the findings and the figures
                seed_levels(view, name, allocated_level(view, name),  # both read them
                            reserved_level(view, name))
            if self._cache_key is not None:  # kept beside the cache entry: found once
                from memtui.loading import findings_of

                self._findings = findings_of(view)
            else:
                self._findings = find_all(view)
            finding.finish(events)
        return self._findings

    def findings(self, stacks: bool = False) -> Findings:
        """Leaks, the peak, OOMs, fragmentation, inefficient blocks, capture limits
        (``stacks``: the text and the dict carry the full call stack of each finding's
        evidence and of each of the peak's stack groups, ``findings --stacks``)."""
        from memtui.analysis.findings import findings_json, peak_roles
        from memtui.text.findings import format_findings

        view, found = self.view(), self._found()
        return Findings(source=view.meta.source, path=view.meta.path, devices=found,
                        warnings=tuple(view.meta.warnings),
                        _text=format_findings(view, found, stacks=stacks),
                        _dict=findings_json(view, found, stacks=True) if stacks else None,
                        by_role={name: peak_roles(view, name) for name in found})

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
        from memtui.analysis.roles.figures import annotate_state

        data = annotate_state(trace, device, data)
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

    def whatif(self, changes: Sequence[str] = (), *, capacity: str | int | None = None,
               fraction_limit: str | int | None = None,
               device: str | None = None) -> WhatIf:
        """Replay the caching allocator on each device (or ``device``), prove it on the
        recording, and predict what ``changes`` (``"expandable_segments:True"``,
        ``"max_split_size_mb:512"``, as in PYTORCH_CUDA_ALLOC_CONF; one string is one
        setting, or several joined by commas) or a ``capacity``
        (``"80GiB"``: would it fit on a smaller card), or a per-process
        ``fraction_limit``, would change (``memtui whatif``)."""
        from dataclasses import replace

        from memtui.analysis.replay.predict import predict
        from memtui.analysis.replay.proof import prove
        from memtui.analysis.replay.settings import (
            SettingError,
            apply_changes,
            from_capture,
            parse_size,
        )

        trace = self._trace
        devices = self.devices
        if device is not None:
            self._known(device)
            devices = [device]
        if capacity is not None and fraction_limit is not None:
            raise CaptureError(self.path, "a capacity or a fraction limit, not both")
        recorded = from_capture(trace.meta.extra.get("allocator_settings"))
        if isinstance(changes, str):  # one PYTORCH_CUDA_ALLOC_CONF, not its characters
            changes = [changes]
        try:
            changed = apply_changes(recorded, list(changes))
            if capacity is not None:
                changed = replace(changed, capacity=parse_size(str(capacity), "--capacity"))
            if fraction_limit is not None:
                changed = replace(changed, capacity=parse_size(str(fraction_limit),
                                                               "--fraction-limit"),
                                  memory_fraction=True)
        except SettingError as err:
            raise CaptureError(self.path, str(err)) from None
        predicting = bool(changes) or changed.capacity is not None
        out = []
        for name in devices:
            proof, baseline = prove(trace, name)
            prediction = predict(trace, name, changed, (proof, baseline)) if predicting \
                else None
            out.append((proof, prediction))
        return WhatIf(path=self.path, devices=tuple(out))

    def check(self, baseline: Capture | PathLike | None = None, *,
              limits: Limits | Mapping[str, Any] | None = None,
              **values: Any) -> CheckResult:
        """Check the capture against memory limits (``memtui check``): keywords
        ``max_peak``, ``max_reserved``, ``max_end``, ``max_leak_per_step`` (sizes as
        ``"512MiB"``, ``"2.5 GiB"``, ``1e9``), ``tolerance`` (percent, against
        ``baseline``: a capture or a path), ``allow_oom``; or ``limits`` made ready.  The
        result says ``passed``, lists what is ``broken`` (each with its figure and
        evidence), and gives the verdict as ``text()``, ``junit_xml()`` and
        ``to_dict()``.  An unknown limit or a value that is no size raises
        :class:`memtui.CaptureError`; ``limits`` that is neither a Limits nor a mapping,
        TypeError."""
        from memtui.analysis.limits.check import Limits, check

        if limits is not None and not isinstance(limits, Limits | Mapping):
            raise TypeError("limits is a memtui Limits or a mapping of limit names to values "
                            f"(max_peak='40GiB', ...), not {type(limits).__name__}")
        try:
            chosen = limits if isinstance(limits, Limits) else Limits.from_mapping(limits or {})
            chosen = chosen.merged(Limits.from_mapping(values).to_dict() if values else {})
        except ValueError as exc:
            raise CaptureError(self.path, str(exc)) from None
        base = None
        if baseline is not None:
            from memtui.analysis.roles.user_rules import rules_of

            other = baseline if isinstance(baseline, Capture) \
                else open(baseline, roles=rules_of(self._trace))
            base = (other.view(), other._found())
        view = self.view()
        figures = {d["device"]: d for d in self.summary().to_dict()["devices"]}
        return CheckResult.of(check(view, figures, self._found(), chosen, base))


# -- entry points ------------------------------------------------------------------------------


def open(path: PathLike, *, use_cache: bool | None = None,  # noqa: A001
         roles: Mapping[str, Any] | Any = None) -> Capture:
    """Open a capture: a PyTorch snapshot pickle, an msMemScope DB / CSV / folder, an Ascend
    profiler folder or file (the format is sniffed from the content); a folder holding
    several captures is their ranks, not one capture (``memtui summary`` lists them).  Bad
    input (a path with a NUL in it too) raises :class:`memtui.CaptureError` (its ``str()``
    is the CLI's one line).  ``use_cache=False`` neither reads nor writes the reopen
    cache.  ``roles``: the user's role rules, applied before memtui's, as
    ``[tool.memtui.roles]`` writes them (``{"cache": "kv_cache", "parameter":
    ["load_weights", ...]}``: regular expressions on frames, owners and metadata).  The
    capture holds no open file: what is reopened from the cache is memory-mapped, the
    files closed."""
    return open_capture(path, use_cache=use_cache, roles=roles)


def open_capture(path: PathLike, *, use_cache: bool | None = None,
                 store_in_background: bool = False, roles: Any = None) -> Capture:
    """:func:`open` for the commands: ``store_in_background`` writes the reopen cache in
    a thread while the command answers (the process waits for it before exiting)."""
    from memtui.loading import load_trace

    trace = load_trace(path, use_cache=use_cache, store_in_background=store_in_background)
    return Capture(trace, trace.meta.cache_key, roles)  # the file as it was read, once


def _role_rules(roles: Any, where: str) -> Any:
    """``roles`` made :class:`~memtui.analysis.roles.user_rules.RoleRules` (a mapping is
    parsed; a bad one is a CaptureError naming ``where``)."""
    from memtui.analysis.roles.user_rules import RoleRules, parse_rules

    if isinstance(roles, RoleRules):
        return roles
    try:
        return parse_rules(roles, "roles")
    except ValueError as exc:
        raise CaptureError(where, str(exc)) from None


def _has_rules(trace: MemoryTrace) -> bool:
    from memtui.analysis.roles.user_rules import rules_of

    return rules_of(trace) is not None



def compare(a: Capture | PathLike, b: Capture | PathLike, *, align: str | None = None,
            shift: int = 0, roles: Mapping[str, Any] | Any = None) -> Comparison:
    """What changed from capture A to capture B, and where: ``align`` ``"step"``,
    ``"time"`` or ``"position"`` (default: step where both have steps, else time, else
    position), ``shift`` B against A in those units.  Paths load side by side; ``roles``
    are the user's role rules for both (as :func:`open` takes them).  A capture that
    cannot be read, an unknown ``align`` or a ``shift`` beyond any capture raise
    :class:`memtui.CaptureError`; an ``align`` or ``shift`` of the wrong type TypeError."""
    return compare_captures(a, b, align=align, shift=shift, roles=roles)


#: How B's time may be mapped onto A's (``compare(..., align=...)``).
ALIGNMENTS = ("step", "time", "position")


def compare_captures(a: Capture | PathLike, b: Capture | PathLike, *,
                     align: str | None = None, shift: int = 0,
                     store_in_background: bool = False, roles: Any = None) -> Comparison:
    """:func:`compare` for the commands (``store_in_background`` as :func:`open_capture`)."""
    from memtui.analysis.across.compare import compare as compare_traces

    if align is not None and not isinstance(align, str):
        raise TypeError(f"align is one of {', '.join(ALIGNMENTS)} or None, not "
                        f"{type(align).__name__}")
    if align is not None and align not in ALIGNMENTS:
        raise CaptureError("align", f"{align!r} is not one of {', '.join(ALIGNMENTS)}")
    if isinstance(shift, bool) or not isinstance(shift, int):
        raise TypeError(f"shift is a whole number of align's units, not "
                        f"{type(shift).__name__}")
    if not -(2**62) <= shift <= 2**62:
        raise CaptureError("shift", f"{shift} is beyond any capture's time or positions")
    traces = _traces(a, b, store_in_background=store_in_background)
    if roles is not None:
        from memtui.analysis.roles.user_rules import with_rules

        traces = [with_rules(t, _role_rules(roles, t.meta.path)) for t in traces]
    return Comparison(compare_traces(traces[0], traces[1], mode=align, shift=shift))


def _traces(*captures: Capture | PathLike, store_in_background: bool = False) -> list:
    from memtui.loading import load_traces

    paths = [c for c in captures if not isinstance(c, Capture)]
    loaded = iter(load_traces(paths, store_in_background=store_in_background) if paths
                  else [])
    return [c.trace if isinstance(c, Capture) else next(loaded) for c in captures]


__all__ = ["Capture", "Comparison", "DeviceSummary", "Findings", "State", "Summary",
           "WhatIf", "compare", "open"]
