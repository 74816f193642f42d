"""``memtui state PATH [--device D] [--event K | --time T] [--json]``: the allocator state
just after one event, as the Pool screen shows it at that event.

K is the event's position in the device's trace (0-based, the number the status bar and
the Event View show), or ``first``, ``peak``, ``last`` (the default).  T is a time: ``+1.5s``
or ``250ms`` from the device's start, or a raw trace time; the state is then the one after
the last event at or before it.
"""

from __future__ import annotations

import argparse
import json

HELP = "print the allocator state (segments, blocks, free gaps) just after one event"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--device", metavar="D",
                        help="device or rank (default: the one with the most events)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--event", metavar="K", default=None,
                       help="event position (0-based), or first, peak, last (default: last)")
    which.add_argument("--time", metavar="T", default=None,
                       help="a time: +1.5s / 250ms from the start, or a raw trace time")
    parser.add_argument("--layer", metavar="L",
                        help="msMemScope memory layer: PTA, HAL, ATB, ... (default: the "
                             "framework pool, else HAL)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from memtui.analysis.at_time import Timeline
    from memtui.analysis.state import (
        EVENT_NAMES,
        allocator_state,
        busiest_device,
        empty_state,
        format_state,
    )
    from memtui.analysis.table_views import parse_time
    from memtui.commands.paths import capture_path
    from memtui.errors import CaptureError
    from memtui.loading import load_trace

    path = capture_path(args.path)
    trace = load_trace(path)
    device = args.device or busiest_device(trace)
    if device is None:  # (a profiler folder's metadata alone): an answer, as summary gives
        print(json.dumps(empty_state()) if args.json else
              "\n".join(["no device has events, blocks or levels",
                         *(f"warning: {w}" for w in trace.meta.warnings)]))
        return 0
    if device not in trace.meta.device_names:
        names = ", ".join(trace.meta.device_names)
        raise CaptureError(path, f"no device {device!r} (it has {names})")
    trace = _layer(path, trace, device, args.layer)
    timeline = Timeline.build(trace, device)
    event = args.event
    if event is not None and event not in EVENT_NAMES:
        try:
            event = int(event)
        except ValueError:
            raise CaptureError(path, f"--event {event!r}: a number, first, peak or last") from None
    t = None
    if args.time is not None:
        t = _parse_time(path, args.time, timeline.start, trace.meta.time_unit, parse_time)
    try:
        data = allocator_state(trace, device, event, t)
    except ValueError as exc:
        raise CaptureError(path, str(exc)) from None
    print(json.dumps(data) if args.json else format_state(data, trace.meta.time_unit,
                                                          timeline.start))
    return 0


def _parse_time(path, text: str, start: int, unit: str, parse_time) -> int:
    from memtui.errors import CaptureError

    if text.lstrip("-").isdigit():
        return int(text)  # a raw trace time
    try:
        return parse_time(text, start, unit)
    except ValueError as exc:
        raise CaptureError(path, f"--time {text!r}: {exc}") from None


def _layer(path, trace, device: str, layer: str | None):
    """The capture as one memory layer shows it (msMemScope); others as they are."""
    from memtui.analysis.layers import default_layers, has_layers, layer_view, layers_of
    from memtui.errors import CaptureError

    if not has_layers(trace):
        if layer is not None:
            raise CaptureError(path, "--layer: this capture has no memory layers")
        return trace
    chosen = default_layers(trace)
    if layer is not None:
        if layer not in layers_of(trace, device):
            known = ", ".join(layers_of(trace, device)) or "none"
            raise CaptureError(path, f"--layer {layer!r}: {device} has {known}")
        chosen[device] = layer
    return layer_view(trace, chosen)
