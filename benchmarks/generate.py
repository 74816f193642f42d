"""Synthetic PyTorch memory snapshots: the demo captures and the benchmark inputs.

A small caching-allocator model (best fit, block splitting and merging, 2 MiB small-pool
segments and >= 20 MiB large ones, as PyTorch's CUDACachingAllocator does) runs a training
loop: parameters and optimizer state allocated once; each step allocates activations in
forward, gradients in backward, temporaries in the optimizer, and frees them.  One step
in the middle runs a larger batch (the clear peak, which also grows the pool), and every
step keeps one small tensor alive (the step-by-step leak).  Blocks left between
parameters and freed activations fragment the pool.

Steps that start from the same allocator state produce the same events, so each distinct
(step kind, state) is simulated once and replayed with new times: writing 5M events costs
little more than building their dicts.  The output is what ``torch.cuda.memory._dump_snapshot``
writes with torch 2.6: ``segments``, ``device_traces`` (with ``time_us`` and shared
``frames`` lists), ``allocator_settings`` and ``external_annotations``.

    python benchmarks/generate.py                 # rewrite the demos in snapshots/
    python benchmarks/generate.py --events 1000000 --out /tmp/snap_1m.pickle
"""

from __future__ import annotations

import argparse
import pickle
import random
from dataclasses import dataclass, field
from pathlib import Path

KiB = 1024
MiB = 1024 * KiB
SMALL_SIZE = 1 * MiB  # requests up to this go to the small pool
SMALL_SEGMENT = 2 * MiB
LARGE_SEGMENT = 20 * MiB
LEAK_SIZE = 256 * KiB
BASE_ADDRESS = 0x7F3A_0000_0000
LEAK_BASE = 0x7F5A_0000_0000
START_US = 1_763_800_000_000_000
DEMOS = Path(__file__).resolve().parents[1] / "snapshots"


def _frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


_MAIN = _frame("/work/train.py", 212, "<module>")
_LOOP = _frame("/work/train.py", 180, "train")


def _stack(*inner: dict) -> list[dict]:
    """A stack innermost first, ending in the training loop (shared list objects)."""
    return [*inner, _LOOP, _MAIN]


STACKS = {
    "param": _stack(_frame("/work/model.py", 41, "Linear.__init__"),
                    _frame("/work/model.py", 88, "Transformer.__init__")),
    "optim": _stack(_frame("/opt/torch/optim/adamw.py", 120, "_init_group"),
                    _frame("/opt/torch/optim/optimizer.py", 487, "step")),
    "attn": _stack(_frame("/work/model.py", 132, "Attention.forward"),
                   _frame("/work/model.py", 171, "Block.forward")),
    "mlp": _stack(_frame("/work/model.py", 150, "MLP.forward"),
                  _frame("/work/model.py", 172, "Block.forward")),
    "logits": _stack(_frame("/work/model.py", 201, "Transformer.forward")),
    "grad": _stack(_frame("/opt/torch/autograd/graph.py", 825, "_engine_run_backward"),
                   _frame("/opt/torch/_tensor.py", 626, "backward")),
    "adam_tmp": _stack(_frame("/opt/torch/optim/adamw.py", 412, "_multi_tensor_adamw"),
                       _frame("/opt/torch/optim/optimizer.py", 487, "step")),
    "leak": _stack(_frame("/work/train.py", 195, "log_metrics")),
}


@dataclass
class Block:
    addr: int
    size: int
    allocated: bool = False
    requested: int = 0
    frames: list = field(default_factory=list)


@dataclass
class Segment:
    addr: int
    size: int
    small: bool
    blocks: list[Block]


class CachingAllocator:
    """Best-fit caching allocator over segments; records trace entries as it goes."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.next_addr = BASE_ADDRESS
        self.trace: list[dict] = []

    def clone(self) -> CachingAllocator:
        """A copy of the allocator state that shares the frames lists (as torch's do)."""
        other = CachingAllocator()
        other.next_addr = self.next_addr
        other.segments = [
            Segment(s.addr, s.size, s.small,
                    [Block(b.addr, b.size, b.allocated, b.requested, b.frames) for b in s.blocks])
            for s in self.segments
        ]
        return other

    def signature(self) -> tuple:
        return tuple(
            (s.addr, tuple((b.addr, b.size, b.allocated) for b in s.blocks))
            for s in self.segments
        )

    def _emit(self, action: str, addr: int, size: int, frames: list | None) -> None:
        entry = {"action": action, "addr": addr, "size": size, "stream": 0}
        if frames is not None:
            entry["frames"] = frames
        self.trace.append(entry)

    def malloc(self, requested: int, frames: list) -> int:
        small = requested <= SMALL_SIZE
        size = max(512, -(-requested // 512) * 512)
        fits = [(b.size, b.addr, s, i) for s in self.segments if s.small == small
                for i, b in enumerate(s.blocks) if not b.allocated and b.size >= size]
        if fits:
            _, _, segment, index = min(fits)
        else:
            segment = self._new_segment(size, small, frames)
            index = 0
        block = segment.blocks[index]
        remainder = block.size - size
        if remainder >= (512 if small else SMALL_SIZE + 1):
            segment.blocks.insert(index + 1, Block(block.addr + size, remainder))
            block.size = size
        block.allocated, block.requested, block.frames = True, requested, frames
        self._emit("alloc", block.addr, block.size, frames)
        return block.addr

    def _new_segment(self, size: int, small: bool, frames: list) -> Segment:
        seg_size = SMALL_SEGMENT if small else max(LARGE_SEGMENT, -(-size // (2 * MiB)) * 2 * MiB)
        segment = Segment(self.next_addr, seg_size, small, [Block(self.next_addr, seg_size)])
        self.next_addr += seg_size + 2 * MiB  # leave a gap, as the driver does
        self.segments.append(segment)
        self._emit("segment_alloc", segment.addr, seg_size, frames)
        return segment

    def free(self, addr: int) -> None:
        for segment in self.segments:
            if segment.addr <= addr < segment.addr + segment.size:
                break
        else:
            raise KeyError(addr)
        index = next(i for i, b in enumerate(segment.blocks) if b.addr == addr)
        block = segment.blocks[index]
        self._emit("free_requested", addr, block.size, block.frames)
        self._emit("free_completed", addr, block.size, block.frames)
        block.allocated, block.requested, block.frames = False, 0, []
        blocks = segment.blocks
        if index + 1 < len(blocks) and not blocks[index + 1].allocated:
            block.size += blocks.pop(index + 1).size
        if index > 0 and not blocks[index - 1].allocated:
            blocks[index - 1].size += blocks.pop(index).size


def _training_step(alloc: CachingAllocator, rng: random.Random, batch: int) -> None:
    """One step: forward activations, backward gradients, optimizer temporaries."""
    activations = []
    for layer in range(12):
        for kind, size in (("attn", 24 * MiB), ("mlp", 48 * MiB), ("attn", 512 * KiB)):
            jitter = 1 + (layer % 3) * 0.125
            activations.append(alloc.malloc(int(size * batch * jitter), STACKS[kind]))
    logits = alloc.malloc(96 * MiB * batch, STACKS["logits"])
    grads = []
    for layer in reversed(range(12)):
        grads.append(alloc.malloc(16 * MiB + layer * 256 * KiB, STACKS["grad"]))
        for _ in range(3):
            alloc.free(activations.pop())
    alloc.free(logits)
    temps = [alloc.malloc(8 * MiB, STACKS["adam_tmp"]) for _ in range(4)]
    for addr in temps + grads:
        alloc.free(addr)
    del rng


@dataclass
class _Template:
    entries: list[dict]
    after: CachingAllocator


def make_snapshot(n_events: int = 30_000, seed: int = 0, peak_batch: int = 3,
                  oom: bool = False) -> dict:
    """A snapshot dict of about ``n_events`` trace entries (see the module docstring).

    With ``oom``, the run ends as an out-of-memory auto-dump does: the last entry is an
    ``oom`` for a request larger than any free gap of the (fragmented) pool.
    """
    rng = random.Random(seed)
    alloc = CachingAllocator()
    params = [alloc.malloc(s, STACKS["param"]) for s in (64 * MiB, 96 * MiB, 128 * MiB) * 4]
    params += [alloc.malloc(s, STACKS["optim"]) for s in (64 * MiB, 96 * MiB, 128 * MiB) * 4]
    trace = alloc.trace
    alloc.trace = []
    templates: dict[tuple, _Template] = {}
    steps_per_event = 1 / 160  # about 160 entries per step
    n_steps = max(3, int(n_events * steps_per_event))
    peak_step = n_steps // 2
    leaks: list[tuple[int, int]] = []  # (addr, step)
    step_bounds = []
    step = 0
    while len(trace) < n_events or step < 3:
        batch = peak_batch if step == peak_step else 1
        key = (batch, alloc.signature())
        template = templates.get(key)
        if template is None:
            _training_step(alloc, rng, batch)
            template = templates[key] = _Template(alloc.trace, alloc.clone())
        else:
            alloc = template.after.clone()
        alloc.trace = []
        start = len(trace)
        trace.extend(dict(entry) for entry in template.entries)
        trace.extend(_leak(len(leaks)))
        leaks.append((_leak_address(len(leaks)), step))
        step_bounds.append((start, len(trace) - 1))
        step += 1
    if oom:
        largest_gap = max((b.size for seg in alloc.segments for b in seg.blocks
                           if not b.allocated), default=0)
        trace.append({"action": "oom", "size": largest_gap + 64 * MiB, "stream": 0,
                      "device_free": 48 * MiB, "frames": STACKS["logits"]})
    _stamp_times(trace, rng)
    annotations = [
        {"stage": stage, "name": f"ProfilerStep#{i}", "device": 0,
         "time_us": trace[index]["time_us"]}
        for i, (first, last) in enumerate(step_bounds)
        for stage, index in (("START", first), ("END", last))
    ]
    del params
    return {
        "segments": _final_segments(alloc, len(leaks)),
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "expandable_segments": False},
        "external_annotations": annotations,
    }


def _leak_address(index: int) -> int:
    per_segment = SMALL_SEGMENT // LEAK_SIZE
    segment, slot = divmod(index, per_segment)
    return LEAK_BASE + segment * (SMALL_SEGMENT + 2 * MiB) + slot * LEAK_SIZE


def _leak(index: int) -> list[dict]:
    """The leaked tensor of a step, in its own small segments (a new one every 8 steps)."""
    addr = _leak_address(index)
    entries = []
    if index % (SMALL_SEGMENT // LEAK_SIZE) == 0:
        entries.append({"action": "segment_alloc", "addr": addr, "size": SMALL_SEGMENT,
                        "stream": 0, "frames": STACKS["leak"]})
    entries.append({"action": "alloc", "addr": addr, "size": LEAK_SIZE, "stream": 0,
                    "frames": STACKS["leak"]})
    return entries


def _stamp_times(trace: list[dict], rng: random.Random) -> None:
    now = START_US
    for entry in trace:
        now += rng.randint(2, 40)
        entry["time_us"] = now


def _final_segments(alloc: CachingAllocator, n_leaks: int) -> list[dict]:
    """The final state in snapshot form: allocator segments plus the leak segments."""
    segments = []
    for segment in alloc.segments:
        segments.append(_segment_dict(segment.addr, segment.size, segment.small, [
            (b.addr, b.size, b.requested, b.allocated, b.frames) for b in segment.blocks]))
    per_segment = SMALL_SEGMENT // LEAK_SIZE
    for first in range(0, n_leaks, per_segment):
        base = _leak_address(first)
        blocks = [(base + k * LEAK_SIZE, LEAK_SIZE, LEAK_SIZE, first + k < n_leaks,
                   STACKS["leak"]) for k in range(per_segment)]
        segments.append(_segment_dict(base, SMALL_SEGMENT, True, blocks))
    return segments


def _segment_dict(addr: int, size: int, small: bool, blocks: list[tuple]) -> dict:
    block_dicts = [
        {"address": a, "size": s, "requested_size": r if used else s,
         "state": "active_allocated" if used else "inactive", "frames": f if used else []}
        for a, s, r, used, f in blocks
    ]
    allocated = sum(b["size"] for b in block_dicts if b["state"] == "active_allocated")
    return {
        "device": 0, "address": addr, "total_size": size, "allocated_size": allocated,
        "active_size": allocated,
        "requested_size": sum(b["requested_size"] for b in block_dicts
                              if b["state"] == "active_allocated"),
        "stream": 0, "segment_type": "small" if small else "large",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": block_dicts,
    }


def write_snapshot(path: str | Path, n_events: int = 30_000, seed: int = 0,
                   protocol: int = 4, oom: bool = False, markers: bool = True) -> Path:
    """Write a generated snapshot pickle to ``path`` and return the path (``markers``:
    with its ``ProfilerStep#N`` annotations; without, the steps are the trace's own)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    snapshot = make_snapshot(n_events, seed, oom=oom)
    if not markers:
        snapshot["external_annotations"] = []
    with open(path, "wb") as fh:
        pickle.dump(snapshot, fh, protocol=protocol)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--oom", action="store_true", help="end in an out-of-memory event")
    parser.add_argument("--out", help="output file (default: write both demos to snapshots/)")
    args = parser.parse_args()
    if args.out:
        written = [write_snapshot(args.out, args.events, args.seed, oom=args.oom)]
    else:
        written = [write_snapshot(DEMOS / "demo_training.pickle", args.events, args.seed),
                   write_snapshot(DEMOS / "demo_oom.pickle", 6_000, args.seed + 1, oom=True)]
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
