"""Hand-made snapshot pairs for the compare tests: the same loop, changed in known ways.

:func:`loop_snapshot` writes a torch-2.6-style snapshot of ``steps`` training steps in one
64 MiB segment.  Each step (a ``ProfilerStep#k`` annotation) allocates an activation
(``forward`` stack) and then a gradient (``backward`` stack), frees both, and, with
``leak``, then allocates a tensor from ``log_metrics`` that is never freed.  Addresses
are never reused, so every figure is a sum worked out by hand in the tests.
"""

from __future__ import annotations

import pickle
from pathlib import Path

MiB = 1 << 20
SEG = 0x7F00_0000_0000
SEGMENT_SIZE = 64 * MiB
FORWARD = [{"filename": "/home/u/model.py", "line": 10, "name": "forward"},
           {"filename": "/home/u/train.py", "line": 50, "name": "train"}]
BACKWARD = [{"filename": "/home/u/model.py", "line": 20, "name": "backward"},
            {"filename": "/home/u/train.py", "line": 51, "name": "train"}]
LEAK = [{"filename": "/home/u/train.py", "line": 60, "name": "log_metrics"},
        {"filename": "/home/u/train.py", "line": 52, "name": "train"}]
LOSS = [{"filename": "/home/u/model.py", "line": 30, "name": "loss"},
        {"filename": "/home/u/train.py", "line": 53, "name": "train"}]
STEP = [{"filename": "/home/u/optim.py", "line": 40, "name": "step"},
        {"filename": "/home/u/train.py", "line": 54, "name": "train"}]


def _entry(action: str, addr: int, size: int, t_us: int, frames: list) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t_us,
            "frames": frames}


def loop_snapshot(steps: int = 4, forward: int = 4 * MiB, backward: int = 2 * MiB,
                  leak: int = 0, start_us: int = 1_000_000, step_us: int = 1000,
                  temporaries: int = 0) -> dict:
    """The snapshot dict (see the module docstring); ``temporaries`` bytes are also
    allocated and freed by ``loss`` and by the optimizer's ``step`` in every step, as a
    real loop's other stacks keep time with its forward."""
    trace, notes, alive = [], [], []
    addr = SEG
    for k in range(steps):
        t = start_us + k * step_us
        notes.append({"stage": "START", "name": f"ProfilerStep#{k}", "time_us": t,
                      "device": 0})
        fwd, addr = addr, addr + forward
        bwd, addr = addr, addr + backward
        trace += [_entry("alloc", fwd, forward, t + 10, FORWARD),
                  _entry("alloc", bwd, backward, t + 20, BACKWARD),
                  _entry("free_requested", bwd, backward, t + 30, BACKWARD),
                  _entry("free_completed", bwd, backward, t + 31, BACKWARD),
                  _entry("free_requested", fwd, forward, t + 40, FORWARD),
                  _entry("free_completed", fwd, forward, t + 41, FORWARD)]
        for frames, at in ((LOSS, t + 42), (STEP, t + 45)) if temporaries else ():
            trace += [_entry("alloc", addr, temporaries, at, frames),
                      _entry("free_requested", addr, temporaries, at + 1, frames),
                      _entry("free_completed", addr, temporaries, at + 1, frames)]
            addr += temporaries
        if leak:
            trace.append(_entry("alloc", addr, leak, t + 50, LEAK))
            alive.append((addr, leak))
            addr += leak
        notes.append({"stage": "END", "name": f"ProfilerStep#{k}",
                      "time_us": t + step_us - 1, "device": 0})
    assert addr - SEG <= SEGMENT_SIZE
    return {"segments": [_segment(alive)], "device_traces": [trace],
            "external_annotations": notes}


def _segment(alive: list[tuple[int, int]]) -> dict:
    blocks, at = [], SEG
    for addr, size in alive:
        if addr > at:
            blocks.append(_block(at, addr - at, "inactive", []))
        blocks.append(_block(addr, size, "active_allocated", LEAK))
        at = addr + size
    if at < SEG + SEGMENT_SIZE:
        blocks.append(_block(at, SEG + SEGMENT_SIZE - at, "inactive", []))
    used = sum(size for _, size in alive)
    return {"device": 0, "address": SEG, "total_size": SEGMENT_SIZE, "allocated_size": used,
            "active_size": used, "requested_size": used, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": [], "blocks": blocks}


def _block(addr: int, size: int, state: str, frames: list) -> dict:
    return {"address": addr, "size": size, "requested_size": size, "state": state,
            "frames": frames}


def write_loop(path: Path, **options) -> Path:
    path.write_bytes(pickle.dumps(loop_snapshot(**options), protocol=4))
    return path


def devices_snapshot(loops: dict[int, dict]) -> dict:
    """One snapshot holding a :func:`loop_snapshot` per device index (``{1: {"leak": MiB}}``:
    device 1 runs the leaking loop); devices not named have an empty trace."""
    snapshot: dict = {"segments": [], "device_traces": [[] for _ in range(max(loops) + 1)],
                      "external_annotations": []}
    for device, options in loops.items():
        one = loop_snapshot(**options)
        snapshot["segments"] += [{**seg, "device": device} for seg in one["segments"]]
        snapshot["device_traces"][device] = one["device_traces"][0]
        snapshot["external_annotations"] += [
            {**note, "device": device} for note in one["external_annotations"]]
    return snapshot


def write_devices(path: Path, loops: dict[int, dict]) -> Path:
    path.write_bytes(pickle.dumps(devices_snapshot(loops), protocol=4))
    return path
