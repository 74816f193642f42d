"""A labelled corpus for the findings: captures in every format, the truth beside each.

Each :class:`Case` is a training run told as allocator operations (a seeded program: its
steps' activations, gradients and optimizer temporaries, and what the case plants: a
leak every step or every k-th step, one of 0.5% of a step's churn, one that starts late
or stops, a warm-up cache that plateaus, a pool that fragments and ends in an
out-of-memory error, one where the device is simply full, cached segments that are
merely free).  The program runs through the caching-allocator model of
:mod:`benchmarks.generate` (best fit, splitting, 2 MiB small segments, >= 20 MiB large
ones), which gives every block its address and every segment its place, and is rendered
as a real file in one format:

* ``snapshot``: a PyTorch snapshot pickle as ``torch.cuda.memory._dump_snapshot`` writes it
  (``segments``, ``device_traces`` with ``time_us`` and ``frames``, ``oom`` entries with
  ``device_free``, ``external_annotations`` ``ProfilerStep#N`` where the case has markers;
  ``ring`` keeps only the last entries, as a full ring buffer does);
* ``memscope_db`` / ``memscope_csv``: msMemScope's dump table in the writer's row order (a
  block's MALLOC and FREE written when it is freed, never-freed blocks and the buffered
  SYSTEM rows last), IDs from the event counter, HAL driver segments, PTA blocks with
  owners, ``total``/``used`` and Python call stacks, ``SYSTEM STEP`` rows where the case
  has markers, ``OOM_DETAIL`` triggers (../shared/formats/msmemscope.md);
* ``profiler``: an ``*_ascend_pt`` folder with ``ASCEND_PROFILER_OUTPUT/operator_memory.csv``
  and ``memory_record.csv`` as torch_npu writes them (operator names, no stacks, no
  segments; ../shared/formats/ascend_profiler.md).

The truth is written beside each capture as ``<capture>.truth.json``: the leaks (function,
msMemScope owner or profiler operator, bytes per step as the code keeps them, and what the
allocator's blocks hold per step), the OOM causes (worked out from
the allocator model's own state at the failed request: the request against the pool's
free bytes, its largest gap and the device's free bytes), and whether a fragmentation
finding of medium or higher is due (only where fragmentation explains the OOM).

    python benchmarks/findings_corpus.py OUT_DIR [--slice fast]
"""

from __future__ import annotations

import argparse
import csv
import json
import pickle
import random
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.generate import CachingAllocator, _segment_dict

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
START_NS = 1_764_000_000_000_000_000
FORMATS = ("snapshot", "memscope_db", "memscope_csv", "profiler")


def _frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


_LOOP = [_frame("/work/train.py", 180, "train"), _frame("/work/train.py", 212, "<module>")]


@dataclass(frozen=True)
class Site:
    """Where a block comes from: its call stack, msMemScope owner and profiler operator."""

    function: str
    filename: str
    line: int
    owner: str
    operator: str
    torch_frames: tuple[tuple[str, int, str], ...] = ()

    @property
    def frames(self) -> list[dict]:
        inner = [_frame(*f) for f in self.torch_frames]
        return [*inner, _frame(self.filename, self.line, self.function), *_LOOP]


SITES = {
    "attn": Site("Attention.forward", "/work/model.py", 132, "PTA@ops@aten", "aten::mm"),
    "mlp": Site("MLP.forward", "/work/model.py", 150, "PTA@ops@aten", "aten::gelu"),
    "norm": Site("LayerNorm.forward", "/work/model.py", 96, "PTA@ops@aten",
                 "aten::native_layer_norm"),
    "logits": Site("Transformer.forward", "/work/model.py", 201, "PTA@ops@aten",
                   "aten::addmm"),
    "grad": Site("train_step", "/work/train.py", 160, "PTA@model@gradient",
                 "aten::empty_strided",
                 (("/opt/torch/autograd/graph.py", 825, "_engine_run_backward"),)),
    "adam": Site("train_step", "/work/train.py", 171, "PTA@model@optimizer_state",
                 "aten::_foreach_mul",
                 (("/opt/torch/optim/adamw.py", 412, "_multi_tensor_adamw"),)),
    "param": Site("Transformer.__init__", "/work/model.py", 88, "PTA@model@weight",
                  "aten::empty"),
    "leak": Site("cache_kv_for_debug", "/work/debug.py", 41, "PTA@leaks_mem", "aten::cat"),
    "leak2": Site("log_metrics", "/work/metrics.py", 23, "PTA@metrics", "aten::stack"),
    "warmup": Site("Prefetcher.warm", "/work/data.py", 77, "PTA@prefetch", "aten::zeros"),
    "kv": Site("KVCache.grow", "/work/serve.py", 58, "PTA@kv_cache", "aten::new_empty"),
    "big": Site("Evaluator.run", "/work/eval.py", 19, "PTA@eval", "aten::empty_like"),
    "evalcache": Site("Evaluator.remember", "/work/eval.py", 33, "PTA@eval_cache",
                      "aten::empty"),
    **{f"expert{i}": Site("Expert.forward", "/work/moe.py", 40 + 3 * i, "PTA@ops@aten",
                          "aten::mm") for i in range(4)},
}


@dataclass(frozen=True)
class LeakPlan:
    """``size`` bytes kept from ``site`` every ``every``-th step in ``[start, stop)``
    (``with_churn``: the same code also allocates a block it frees within the step;
    ``growing``: one buffer re-allocated ``size`` bytes larger each step, the old one
    freed, as ``buf = torch.cat([buf, new])`` does)."""

    site: str = "leak"
    size: int = 1 * MiB
    every: int = 1
    start: int = 0
    stop: int | None = None
    with_churn: bool = False
    growing: bool = False

    def keeps_at(self, step: int) -> bool:
        stop = self.stop if self.stop is not None else 1 << 30
        return self.start <= step < stop and (step - self.start) % self.every == self.every - 1


@dataclass(frozen=True)
class Case:
    """One capture of the corpus (see the module docstring)."""

    name: str
    fmt: str
    seed: int = 0
    steps: int = 32
    markers: bool = True
    leaks: tuple[LeakPlan, ...] = ()
    #: a cache that grows for the first steps, then stays: a warm-up, not a leak
    warmup_steps: int = 0
    #: the batch grows over the first steps (new, larger segments), then stays
    cache_growth: bool = False
    #: keep only the last share of the trace entries (a full ring buffer); snapshots
    ring: float | None = None
    #: "fragmentation" or "full": the run ends in an out-of-memory error of that cause
    oom: str | None = None
    #: a large evaluation pass mid-run leaves big cached segments wholly free
    cached_free: bool = False
    #: steps of 3 to 6 layers (a data-dependent depth) with a backward burst of 20 blocks
    variable: bool = False
    #: the capture stops in the middle of one more step (its activations alive at the end)
    stop_mid_step: bool = False
    #: a cache keeps 2 MiB a step and frees what it kept this many steps ago: bounded
    window: int = 0
    #: activation sizes vary from step to step by up to this share (dynamic shapes)
    jitter: float = 0.0
    #: attention and MLP activations routed at random to one of this many experts
    mix: int = 0
    #: each MLP activation repeated 1 to 3 times (a data-dependent count)
    counts: bool = False
    #: micro-batches per step (gradient accumulation: gradients kept across them)
    accumulate: int = 1
    #: an evaluation pass every this many steps
    eval_every: int = 0
    #: with eval_every: a cache kept from one evaluation to the next (bounded)
    eval_cache: bool = False
    #: a KV cache grown through each step, freed at its end
    kv_grow: bool = False
    #: a pause of up to this many seconds after each step (a jittered clock)
    clock_jitter: float = 0.0
    description: str = ""


@dataclass
class _Event:
    t: int  # ns
    action: str  # alloc, free, segment_alloc, segment_free, oom, step
    key: int = -1  # block key
    addr: int = 0
    size: int = 0
    requested: int = 0
    site: str = ""
    device_free: int = 0


@dataclass
class Run:
    """A case's program run through the allocator model: events in time order, the final
    allocator, and the truth."""

    case: Case
    events: list[_Event]
    allocator: CachingAllocator
    truth: dict[str, Any] = field(default_factory=dict)


class _Program:
    """Builds a case's events through the allocator model."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.rng = random.Random(case.seed)
        self.alloc = CachingAllocator()
        self.events: list[_Event] = []
        self.now = START_NS
        self.addr_of: dict[int, int] = {}
        self.leaked: dict[LeakPlan, list[int]] = {}  # plan -> keys of its blocks
        self.window: list[int] = []  # keys the sliding-window cache holds
        self.eval_kept: int | None = None  # the evaluation cache's block
        self.next_key = 0
        self._frames = {name: site.frames for name, site in SITES.items()}
        self.frames_site = {id(frames): name for name, frames in self._frames.items()}

    def tick(self) -> int:
        self.now += self.rng.randint(2_000, 40_000)
        return self.now

    def malloc(self, site: str, requested: int) -> int:
        before = len(self.alloc.trace)
        addr = self.alloc.malloc(requested, self._frames[site])
        key = self.next_key
        self.next_key += 1
        self.addr_of[key] = addr
        for entry in self.alloc.trace[before:]:
            t = self.tick()
            if entry["action"] == "segment_alloc":
                self.events.append(_Event(t, "segment_alloc", addr=entry["addr"],
                                          size=entry["size"], site=site))
            else:
                self.events.append(_Event(t, "alloc", key, entry["addr"], entry["size"],
                                          requested, site))
        return key

    def free(self, key: int) -> None:
        addr = self.addr_of.pop(key)
        size = next(b.size for s in self.alloc.segments for b in s.blocks if b.addr == addr)
        site = self.frames_site.get(id(next(b.frames for s in self.alloc.segments
                                            for b in s.blocks if b.addr == addr)), "")
        self.alloc.free(addr)
        self.events.append(_Event(self.tick(), "free", key, addr, size, site=site))

    def step_marker(self, k: int) -> None:
        self.events.append(_Event(self.now + 1, "step", key=k))

    # -- the program ---------------------------------------------------------------------

    def run(self) -> Run:
        case = self.case
        for size in (64 * MiB, 96 * MiB, 128 * MiB, 32 * MiB):
            self.malloc("param", size)
        for k in range(case.steps):
            if case.markers:
                self.step_marker(k)
            batch = min(k + 1, 4) / 4 if case.cache_growth else 1.0
            self.training_step(k, batch)
            if case.cached_free and k == case.steps // 2:
                self.evaluation_pass()
        if case.stop_mid_step:
            if case.markers:
                self.step_marker(case.steps)
            for layer_sizes in step_sizes()["forward"][:4]:
                for site, size in layer_sizes:
                    self.malloc(site, size)
        truth = self.truth(step_churn())
        if case.oom:
            truth["ooms"] = [self.out_of_memory(case.oom)]
        return Run(case, self.events, self.alloc, truth)

    def training_step(self, k: int, batch: float) -> None:
        """Forward (activations kept for backward), backward (gradients), optimizer
        temporaries; everything freed by the step's end (sizes: :func:`step_sizes`).
        With ``accumulate`` micro-batches the gradients are allocated in the first
        backward and freed at the step's end; ``mix`` routes each attention and MLP
        activation to one of that many experts at random, ``counts`` repeats each MLP
        activation 1 to 3 times; ``kv_grow`` grows a cache through the step, freed at
        its end; an evaluation every ``eval_every`` steps; ``clock_jitter`` a pause."""
        case = self.case
        sizes = step_sizes(batch * (1 + self.rng.uniform(-case.jitter, case.jitter)))
        if case.variable:
            sizes["forward"] = sizes["forward"][:self.rng.randint(3, 6)]
        temps: list[int] = []  # freed at the step's end
        grads: list[int] = []
        for micro in range(case.accumulate):
            acts: list[int] = []
            for layer, layer_sizes in enumerate(sizes["forward"]):
                for site, size in layer_sizes:
                    for _ in range(self.rng.randint(1, 3) if case.counts and site == "mlp"
                                   else 1):
                        acts.append(self.malloc(self.routed(site), size))
                    if case.kv_grow:
                        temps.append(self.malloc("kv", 256 * KiB))
                if layer == 2 and micro == 0:
                    temps += self.planted(k)
            logits = self.malloc("logits", sizes["logits"])
            for size in sizes["grad"][:len(sizes["forward"])]:
                if micro == 0:
                    grads.append(self.malloc("grad", size))
                for _ in range(min(3, len(acts))):
                    self.free(acts.pop())
            for key in reversed(acts):
                self.free(key)
            if case.variable and micro == 0:  # a burst of small gradient buckets
                grads += [self.malloc("grad", 512 * KiB) for _ in range(20)]
            self.free(logits)
        temps += [self.malloc("adam", size) for size in sizes["adam"]]
        for key in temps + grads:
            self.free(key)
        if case.eval_every and k % case.eval_every == case.eval_every - 1:
            self.quick_evaluation()
        if case.clock_jitter:
            self.now += self.rng.randint(0, int(case.clock_jitter * 1e9))

    def routed(self, site: str) -> str:
        """The site an activation comes from: one of ``mix`` experts, chosen at random for
        each attention and MLP activation (the data routes it)."""
        if self.case.mix and site in ("attn", "mlp"):
            return f"expert{self.rng.randrange(self.case.mix)}"
        return site

    def planted(self, k: int) -> list[int]:
        """What the case plants in step ``k`` (mid-forward): its leaks, their churn (the
        blocks returned: freed at the step's end), the sliding window, the warm-up."""
        case = self.case
        temps = []
        for plan in case.leaks:
            if plan.keeps_at(k):
                self.keep(plan, k)
            if plan.with_churn:
                temps.append(self.malloc(plan.site, plan.size))
        if case.window:
            self.window.append(self.malloc("kv", 2 * MiB))
            if len(self.window) > case.window:
                self.free(self.window.pop(0))
        if k < case.warmup_steps:
            self.malloc("warmup", 2 * MiB)
        return temps

    def quick_evaluation(self) -> None:
        """An evaluation pass (a few activations, all freed); with ``eval_cache`` a cache
        kept until the next evaluation replaces it (bounded: not a leak)."""
        keys = [self.malloc("big", 24 * MiB + i * MiB) for i in range(4)]
        if self.case.eval_cache:
            kept = self.malloc("evalcache", 2 * MiB)
            if self.eval_kept is not None:
                self.free(self.eval_kept)
            self.eval_kept = kept
        for key in keys:
            self.free(key)

    def keep(self, plan: LeakPlan, k: int) -> None:
        """The planted leak's block of step ``k``."""
        kept = self.leaked.setdefault(plan, [])
        if not plan.growing:
            kept.append(self.malloc(plan.site, plan.size))
            return
        grown = self.malloc(plan.site, plan.size * (len(kept) + 1))
        if kept:
            self.free(kept[-1])
        kept.append(grown)

    def evaluation_pass(self) -> None:
        """Large activations once (an evaluation batch): new segments, then all freed."""
        keys = [self.malloc("big", 300 * MiB + i * 20 * MiB) for i in range(4)]
        for key in keys:
            self.free(key)

    def out_of_memory(self, cause: str) -> dict[str, Any]:
        """Leave the pool in a state whose failed request has ``cause``; the OOM event,
        and its truth worked out from the allocator model's state."""
        if cause == "fragmentation":
            # one big segment cut into 40 MiB blocks, every other one freed
            staging = self.malloc("kv", 400 * MiB)
            self.free(staging)
            blocks = [self.malloc("kv", 40 * MiB) for _ in range(10)]
            for key in blocks[::2]:
                self.free(key)
            self.release_cached()
            free, gap = self._pool_free()
            requested = gap + 24 * MiB
            device_free = 16 * MiB
        else:
            self.release_cached()
            free, gap = self._pool_free()
            requested = free + 2 * GiB
            device_free = 64 * MiB
        t = self.tick()
        self.events.append(_Event(t, "oom", size=requested, site="kv", device_free=device_free))
        truth_cause = ("full" if requested > free + device_free else
                       "fragmentation" if requested > gap else "outside")
        assert truth_cause == cause, (cause, requested, free, gap)
        return {"cause": truth_cause, "requested_bytes": requested, "pool_free_bytes": free,
                "largest_gap_bytes": gap, "device_free_bytes": device_free}

    def release_cached(self) -> None:
        """Give back every segment that holds no block, as the caching allocator does
        (``release_cached_blocks``) before it raises an out-of-memory error."""
        for segment in [s for s in self.alloc.segments
                        if not any(b.allocated for b in s.blocks)]:
            self.alloc.segments.remove(segment)
            self.events.append(_Event(self.tick(), "segment_free", addr=segment.addr,
                                      size=segment.size))

    def _pool_free(self) -> tuple[int, int]:
        """Free bytes of the pool and the largest free block of its large segments."""
        free = [(b.size, s.small) for s in self.alloc.segments for b in s.blocks
                if not b.allocated]
        return (sum(size for size, _ in free),
                max((size for size, small in free if not small), default=0))

    def truth(self, churn: int) -> dict[str, Any]:
        case = self.case
        leaks = []
        for plan in case.leaks:
            site = SITES[plan.site]
            keys = set(self.leaked.get(plan, []))
            kept = [e for e in self.events if e.action == "alloc" and e.key in keys]
            held = [e.size for e in kept]
            leaks.append({"function": site.function, "file": site.filename,
                          "owner": site.owner, "operator": site.operator,
                          "bytes_per_step": _bytes_per_step(plan, held),
                          # the allocator's block sizes: a large block is not split
                          # where less than 1 MiB would remain, so it may hold more
                          "held_bytes_per_step": _held_per_step(plan, held),
                          "block_sizes": held, "block_times_ns": [e.t for e in kept],
                          "requested_bytes_per_step": plan.size / plan.every,
                          "blocks": len(held),
                          "block_size": plan.size, "every": plan.every,
                          "start_step": plan.start, "stop_step": plan.stop,
                          "growing": plan.growing,
                          "share_of_step_churn": round(plan.size / plan.every / churn, 5)})
        return {"leaks": leaks, "ooms": [], "not_leaks": (
            [SITES["warmup"].function] if case.warmup_steps else [])
            + ([SITES["kv"].function] if case.kv_grow else [])
            + ([SITES["evalcache"].function] if case.eval_cache else []),
            "fragmentation_medium": case.oom == "fragmentation"}


def _bytes_per_step(plan: LeakPlan, held: list[int]) -> float:
    """What ``plan`` keeps per step as its code asks it: one block of ``size`` (rounded
    to the allocator's 512 bytes) every ``every`` steps, whatever larger free block the
    allocator handed out for it (``held``: its blocks' sizes); a growing buffer: its
    growth from its first size to its last."""
    if plan.growing:
        return (held[-1] - held[0]) / (len(held) - 1)
    return -(-plan.size // 512) * 512 / plan.every


def _held_per_step(plan: LeakPlan, held: list[int]) -> float:
    """What memory grows by per step: the mean of the blocks' sizes over ``every``."""
    if plan.growing:
        return (held[-1] - held[0]) / (len(held) - 1)
    return sum(held) / len(held) / plan.every


def step_sizes(batch: float = 1.0) -> dict[str, Any]:
    """The block sizes of one training step: per layer of the forward (site, size) pairs,
    the logits, the gradients (one per layer, backward order) and the optimizer's."""
    def scaled(size: int, layer: int) -> int:
        return int(size * batch * (1 + (layer % 3) / 8)) // 512 * 512

    return {
        "forward": [[(site, scaled(size, layer)) for site, size in (
            ("norm", 256 * KiB), ("attn", 12 * MiB), ("mlp", 24 * MiB))]
            for layer in range(6)],
        "logits": int(32 * MiB * batch) // 512 * 512,
        "grad": [8 * MiB + layer * 256 * KiB for layer in reversed(range(6))],
        "adam": [4 * MiB] * 3,
    }


def step_churn(batch: float = 1.0) -> int:
    """Bytes one training step allocates and frees again."""
    sizes = step_sizes(batch)
    return (sum(size for layer in sizes["forward"] for _, size in layer) + sizes["logits"]
            + sum(sizes["grad"]) + sum(sizes["adam"]))


def run_case(case: Case) -> Run:
    """The case's events through the allocator model, with its truth."""
    return _Program(case).run()


# -- PyTorch snapshot ---------------------------------------------------------------------


def _only_what_the_ring_kept(run: Run, start_ns: int) -> None:
    """The truth of a ring-truncated capture: a leak's blocks allocated before the ring's
    first entry are ghosts (alive from the start, no growth seen), so its bytes per step
    are those of the blocks the capture still shows allocated."""
    for leak in run.truth["leaks"]:
        seen = [size for size, t in zip(leak["block_sizes"], leak["block_times_ns"],
                                        strict=True) if t >= start_ns]
        plan = LeakPlan(size=leak["block_size"], every=leak["every"],
                        growing=leak["growing"])
        leak["bytes_per_step"] = _bytes_per_step(plan, seen)
        leak["held_bytes_per_step"] = _held_per_step(plan, seen)
        leak["blocks_seen"] = len(seen)


def write_snapshot(run: Run, path: Path) -> Path:
    frames = {name: site.frames for name, site in SITES.items()}
    trace = []
    annotations = []
    for event in run.events:
        time_us = event.t // 1000
        if event.action == "step":
            annotations.append({"stage": "START", "name": f"ProfilerStep#{event.key}",
                                "device": 0, "time_us": time_us})
            continue
        entry: dict[str, Any] = {"addr": event.addr, "size": event.size, "stream": 0,
                                 "time_us": time_us, "frames": frames.get(event.site, [])}
        if event.action == "free":
            trace.append({**entry, "action": "free_requested"})
            trace.append({**entry, "action": "free_completed"})
            continue
        if event.action == "oom":
            entry = {"action": "oom", "size": event.size, "stream": 0, "time_us": time_us,
                     "device_free": event.device_free, "frames": frames[event.site]}
        else:
            entry["action"] = event.action
        trace.append(entry)
    if run.case.ring:
        trace = trace[int(len(trace) * (1 - run.case.ring)):]
        _only_what_the_ring_kept(run, trace[0]["time_us"] * 1000)
    segments = [_segment_dict(s.addr, s.size, s.small, [
        (b.addr, b.size, b.requested, b.allocated, b.frames) for b in s.blocks])
        for s in run.allocator.segments]
    snapshot = {
        "segments": segments, "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "expandable_segments": False},
        "external_annotations": annotations,
    }
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path


# -- msMemScope -----------------------------------------------------------------------------

MEMSCOPE_COLUMNS = ["ID", "Event", "Event Type", "Name", "Timestamp(ns)", "Process Id",
                    "Thread Id", "Device Id", "Ptr", "Attr", "Call Stack(Python)",
                    "Call Stack(C)"]
PID = 3101864
_C_STACK = ('"/opt/msmemscope/lib64/libleaks_ascend_hal_hook.so(halMemAlloc+0x118) '
            '[0xf79b279760c8]\n/usr/local/Ascend/latest/lib64/libruntime.so(+0x3e1214) '
            '[0xf79abf7d1214]\n"')


def _py_stack(site: Site) -> str:
    return '"' + "".join(f"{f['filename']}({f['line']}): {f['name']}\n"
                         for f in site.frames) + '"'


def memscope_rows(run: Run) -> list[dict[str, Any]]:
    """The dump table's rows in the order msMemScope writes them (module docstring)."""
    rows: list[dict[str, Any]] = []  # with "write" (when written) and "id" (event counter)
    open_rows: dict[int, list[dict]] = {}  # block key -> its rows so far
    hal: dict[int, dict] = {}  # segment address -> its MALLOC row, until it is freed
    hal_id: dict[int, int] = {}
    system: list[dict] = []
    used, total, counter, aid = 0, 0, 0, 0
    alloc_id: dict[int, int] = {}

    def new_row(**values: Any) -> dict:
        nonlocal counter
        counter += 1
        return {"ID": counter, "Process Id": PID, "Thread Id": PID, "Device Id": "0",
                "Ptr": "N/A", "Name": "N/A", "Attr": {}, "Call Stack(Python)": "",
                "Call Stack(C)": "", **values}

    system.append(new_row(Event="SYSTEM", **{"Event Type": "START_TRACE"},
                          **{"Timestamp(ns)": START_NS, "Device Id": "N/A"}))
    step_number = 0
    for event in run.events:
        if event.action == "segment_alloc":
            total += event.size
            aid += 1
            hal_id[event.addr] = aid
            hal[event.addr] = new_row(
                Event="MALLOC", **{"Event Type": "HAL"},
                **{"Timestamp(ns)": event.t, "Ptr": f"0x{event.addr:016x}",
                   "Call Stack(C)": _C_STACK},
                Attr={"allocation_id": aid, "addr": f"0x{event.addr:016x}",
                      "size": event.size, "page_type": "huge", "owner": "CANN@RUNTIME"})
        elif event.action == "segment_free":
            total -= event.size
            rows.extend([hal.pop(event.addr), new_row(  # written when it is freed
                Event="FREE", **{"Event Type": "HAL", "Timestamp(ns)": event.t,
                                 "Ptr": f"0x{event.addr:016x}"},
                Attr={"allocation_id": hal_id[event.addr], "addr": f"0x{event.addr:016x}",
                      "size": event.size})])
        elif event.action == "alloc":
            used += event.size
            aid += 1
            alloc_id[event.key] = aid
            site = SITES[event.site]
            open_rows[event.key] = [new_row(
                Event="MALLOC", **{"Event Type": "PTA", "Timestamp(ns)": event.t,
                                   "Ptr": f"0x{event.addr:016x}",
                                   "Call Stack(Python)": _py_stack(site)},
                Attr={"allocation_id": aid, "addr": f"0x{event.addr:016x}",
                      "size": event.size, "total": total, "used": used, "owner": site.owner})]
        elif event.action == "free":
            used -= event.size
            mine = open_rows.pop(event.key)
            mine.append(new_row(
                Event="FREE", **{"Event Type": "PTA", "Timestamp(ns)": event.t,
                                 "Ptr": f"0x{event.addr:016x}"},
                Attr={"allocation_id": alloc_id[event.key], "addr": f"0x{event.addr:016x}",
                      "size": event.size, "total": total, "used": used}))
            rows.extend(mine)  # written when the block is freed
        elif event.action == "step":
            if event.key > 0:  # msmemscope.step() at the end of each step
                step_number += 1
                system.append(new_row(Event="SYSTEM", **{"Event Type": "STEP",
                                                         "Timestamp(ns)": event.t - 1,
                                                         "Device Id": "N/A"},
                                      Name=str(step_number)))
        elif event.action == "oom":
            rows.append(new_row(Event="OOM_DETAIL", **{"Event Type": "OOM_TRIGGER",
                                                       "Timestamp(ns)": event.t},
                                Attr={"func": "malloc", "req_size": event.size, "flag": 0}))
    end = run.events[-1].t + 1000
    system.append(new_row(Event="SYSTEM", **{"Event Type": "STOP_TRACE",
                                             "Timestamp(ns)": end, "Device Id": "N/A"}))
    for mine in open_rows.values():  # never freed: written at the end
        rows.extend(mine)
    return rows + list(hal.values()) + system


def _db_attr(attr: dict) -> str:
    return json.dumps({k: str(v) for k, v in attr.items()}, separators=(",", ":")) \
        if attr else "{}"


def _csv_attr(attr: dict) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in attr.items()) + "}" if attr else ""


def write_memscope_db(run: Run, path: Path) -> Path:
    rows = memscope_rows(run)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    types = {"ID": "INTEGER", "Timestamp(ns)": "INTEGER", "Process Id": "INTEGER",
             "Thread Id": "INTEGER"}
    decl = ", ".join(f'"{c}" {types.get(c, "TEXT")}' for c in MEMSCOPE_COLUMNS)
    con.execute(f"CREATE TABLE memscope_dump ({decl})")
    con.executemany(
        f"INSERT INTO memscope_dump VALUES ({','.join('?' * len(MEMSCOPE_COLUMNS))})",
        [tuple(_db_attr(r[c]) if c == "Attr" else r[c] for c in MEMSCOPE_COLUMNS)
         for r in rows])
    con.commit()
    con.close()
    return path


def write_memscope_csv(run: Run, path: Path) -> Path:
    with open(path, "w", newline="") as fh:
        fh.write(",".join(MEMSCOPE_COLUMNS) + "\n")
        for r in memscope_rows(run):
            attr = _csv_attr(r["Attr"])
            cells = [str(r[c]) for c in MEMSCOPE_COLUMNS]
            cells[MEMSCOPE_COLUMNS.index("Attr")] = f'"{attr}"' if attr else ""
            fh.write(",".join(cells) + "\n")  # the writer's fprintf: stacks quoted already
    return path


# -- Ascend profiler ------------------------------------------------------------------------

OPERATOR_HEADER = [
    "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
    "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
    "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
    "Stream Ptr", "Device Type"]
RECORD_HEADER = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Stream Ptr", "Device Type"]


def _us(t_ns: int) -> str:
    return f"{t_ns // 1000}.{t_ns % 1000:03d}\t"


def _mb(value: int) -> str:
    return repr(value / MiB)


def write_profiler(run: Run, folder: Path) -> Path:
    """An ``*_ascend_pt`` folder (``folder``) for rank 0."""
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    (folder / "profiler_info_0.json").write_text(json.dumps(
        {"rank_id": "0", "torch_npu_version": "2.7.1", "cann_version": "8.3.RC1"}))
    used = reserved = 0
    open_ops: dict[int, list] = {}
    ops, records = [], []
    for event in run.events:
        if event.action in ("segment_alloc", "segment_free"):
            reserved += event.size if event.action == "segment_alloc" else -event.size
            continue
        if event.action not in ("alloc", "free"):
            continue
        used += event.size if event.action == "alloc" else -event.size
        record = ["PTA+GE", _us(event.t), _mb(used), _mb(reserved), _mb(used), "2", "NPU:0"]
        records.append(record)
        records.append(["PTA", *record[1:]])
        if event.action == "alloc":
            open_ops[event.key] = [SITES[event.site].operator, repr(event.size / KiB),
                                   _us(event.t), event.t, _mb(used), _mb(reserved)]
        else:
            name, size_kb, t_alloc, t0, a_used, a_reserved = open_ops.pop(event.key)
            duration = f"{(event.t - t0) / 1000:.3f}\t"
            ops.append((t0, [name, size_kb, t_alloc, _us(event.t), _us(event.t), duration,
                             duration, a_used, a_reserved, a_used, _mb(used), _mb(reserved),
                             _mb(used), "2", "NPU:0"]))
    for name, size_kb, t_alloc, t0, a_used, a_reserved in open_ops.values():
        ops.append((t0, [name, size_kb, t_alloc, "", "", "", "", a_used, a_reserved, a_used,
                         "", "", "", "2", "NPU:0"]))
    ops.sort(key=lambda pair: pair[0])
    with open(out / "operator_memory.csv", "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(OPERATOR_HEADER)
        writer.writerows(row for _, row in ops)
    with open(out / "memory_record.csv", "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(RECORD_HEADER)
        writer.writerows(records)
    return folder


# -- the corpus -----------------------------------------------------------------------------

WRITERS = {
    "snapshot": (".pickle", write_snapshot),
    "memscope_db": (".db", write_memscope_db),
    "memscope_csv": (".csv", write_memscope_csv),
    "profiler": ("_ascend_pt", write_profiler),
}


def _variants() -> list[tuple[str, dict[str, Any], str]]:
    """(name, Case fields, description) of every scenario, format apart."""
    churn_half_percent = int(0.005 * step_churn()) // 512 * 512  # 1.7 MiB of 340.5 MiB
    return [
        ("leak_every_step", {"leaks": (LeakPlan(size=1 * MiB),)},
         "1 MiB kept every step"),
        ("leak_every_3rd", {"leaks": (LeakPlan(size=3 * MiB, every=3),)},
         "3 MiB kept every third step"),
        ("leak_half_percent", {"leaks": (LeakPlan(size=churn_half_percent),)},
         "a leak of 0.5% of a step's churn"),
        ("leak_small_blocks", {"leaks": (LeakPlan(site="leak2", size=256 * KiB, every=2),)},
         "256 KiB every second step (small pool)"),
        ("leak_starts_late", {"leaks": (LeakPlan(size=2 * MiB, start=16),)},
         "2 MiB per step from step 16 of 32"),
        ("leak_stops", {"leaks": (LeakPlan(size=2 * MiB, stop=24),)},
         "2 MiB per step for the first 24 of 32 steps"),
        ("two_leaks", {"leaks": (LeakPlan(size=1 * MiB), LeakPlan(site="leak2",
                                                                 size=512 * KiB, every=2))},
         "two leaks at once"),
        ("warmup_plateau", {"warmup_steps": 6},
         "a prefetch cache grows over 6 steps, then stays: not a leak"),
        ("clean", {}, "a clean training loop"),
        ("clean_cache_growth", {"cache_growth": True},
         "the batch grows over the first steps (new segments), then plateaus: clean"),
        ("clean_cached_free", {"cached_free": True},
         "an evaluation pass leaves big cached segments wholly free: clean"),
        ("oom_fragmentation", {"oom": "fragmentation", "steps": 12},
         "ends in an OOM that fragmentation explains"),
        ("oom_full", {"oom": "full", "steps": 12}, "ends in an OOM: the device is full"),
        ("leak_every_2nd_variable", {"leaks": (LeakPlan(size=256 * KiB, every=2),),
                                     "variable": True},
         "256 KiB every second step; steps of varying depth with a backward burst of 20"),
        ("clean_variable", {"variable": True},
         "a clean loop whose steps vary in depth, with a backward burst of 20"),
        ("clean_stops_mid_step", {"stop_mid_step": True},
         "a clean loop; the capture stops mid-step, its activations alive: not a leak"),
        ("leak_stops_mid_step", {"leaks": (LeakPlan(size=1 * MiB),), "stop_mid_step": True},
         "1 MiB per step; the capture stops mid-step"),
        ("leak_growing_buffer", {"leaks": (LeakPlan(size=512 * KiB, growing=True),)},
         "one buffer re-allocated 512 KiB larger every step, the old one freed"),
        ("leak_beside_churn", {"leaks": (LeakPlan(size=1 * MiB, with_churn=True),)},
         "the leaking code also allocates a block it frees within the step"),
        ("clean_sliding_window", {"window": 5},
         "a cache keeps 2 MiB a step and frees what it kept 5 steps ago: bounded, clean"),
        ("oom_full_after_leak", {"oom": "full", "steps": 16,
                                 "leaks": (LeakPlan(size=4 * MiB),)},
         "4 MiB kept every step, then the device is full"),
        ("oom_fragmentation_cached", {"oom": "fragmentation", "steps": 16,
                                      "cached_free": True},
         "big cached segments wholly free, then an OOM that fragmentation explains"),
        ("leak_dynamic_shapes", {"leaks": (LeakPlan(size=1 * MiB),), "jitter": 0.2},
         "1 MiB per step; activations vary by up to 20% from step to step"),
        ("clean_dynamic_shapes", {"jitter": 0.2},
         "a clean loop whose activations vary by up to 20% from step to step"),
        # shapes no corpus author controls (issue 33): the data picks the stacks and the
        # counts, micro-batches, evaluations, a jittered clock
        ("leak_moe_mix", {"leaks": (LeakPlan(size=1 * MiB),), "mix": 4, "counts": True,
                          "jitter": 0.2, "clock_jitter": 0.002},
         "1 MiB per step; activations routed at random to 4 experts, MLP counts vary"),
        ("leak_moe_every_2nd", {"leaks": (LeakPlan(size=128 * KiB, every=2),), "mix": 2,
                                "counts": True, "clock_jitter": 0.004},
         "128 KiB every second step in a two-expert mixture (cuda_moe_leak's shape)"),
        ("leak_every_4th_mix", {"leaks": (LeakPlan(size=2 * MiB, every=4),), "mix": 3,
                                "counts": True},
         "2 MiB every fourth step; three experts, MLP counts vary"),
        ("leak_grad_accumulation", {"leaks": (LeakPlan(size=1 * MiB),), "accumulate": 2},
         "1 MiB per step; two micro-batches a step, gradients kept across them"),
        ("leak_eval_every_5th", {"leaks": (LeakPlan(size=512 * KiB),), "eval_every": 5},
         "512 KiB per step; an evaluation pass every fifth step"),
        ("leak_everything_varies", {"leaks": (LeakPlan(size=768 * KiB),), "mix": 4,
                                    "counts": True, "accumulate": 2, "eval_every": 4,
                                    "jitter": 0.2, "clock_jitter": 0.003, "variable": True},
         "768 KiB per step; experts, counts, depth, micro-batches and evaluations vary"),
        ("clean_moe_mix", {"mix": 4, "counts": True, "jitter": 0.2, "clock_jitter": 0.002},
         "a clean mixture of 4 experts whose counts vary: not a leak"),
        ("clean_grad_accumulation", {"accumulate": 3},
         "a clean loop of three micro-batches a step, gradients freed at the step: clean"),
        ("clean_kv_grows", {"kv_grow": True, "mix": 2},
         "a KV cache grown through each step and freed at its end: clean"),
        ("clean_eval_cache", {"eval_every": 3, "eval_cache": True, "mix": 2},
         "an evaluation every third step keeps a cache until the next: bounded, clean"),
        ("warmup_plateau_mix", {"warmup_steps": 6, "mix": 3, "counts": True},
         "a prefetch cache grows over 6 steps, then stays, in a mixture: not a leak"),
    ]


def cases(slice_: str = "full") -> list[Case]:
    """The corpus: every scenario in the formats it applies to (``"fast"``: a small slice
    for the tests, one of each kind of truth)."""
    out = []
    for seed, (name, fields, description) in enumerate(_variants()):
        for fmt in FORMATS:
            if fields.get("oom") and fmt == "profiler":
                continue  # the profiler writes no OOM record
            for markers in (True, False):
                if not markers and (fields.get("oom") or fmt == "profiler"):
                    continue  # profiler folders have no step markers in their CSVs
                extra = {} if markers else {"markers": False}
                label = f"{name}{'' if markers else '_nomarkers'}"
                out.append(Case(name=f"{fmt}__{label}", fmt=fmt, seed=seed,
                                description=description, **fields, **extra))
        if fields.get("leaks") and not any(p.stop for p in fields["leaks"]):
            # (a leak that stopped, seen through the ring buffer's window, is a plateau)
            out.append(Case(name=f"snapshot__{name}_ring", fmt="snapshot", seed=seed,
                            ring=0.6, description=description + "; ring buffer kept the "
                            "last 60% of the trace", **fields))
    if slice_ == "fast":
        keep = {"snapshot__leak_every_3rd", "memscope_db__leak_every_step",
                "memscope_db__leak_every_step_nomarkers", "snapshot__warmup_plateau",
                "snapshot__clean_cached_free", "snapshot__oom_fragmentation",
                "snapshot__oom_full", "profiler__leak_every_step", "memscope_csv__clean",
                "snapshot__leak_moe_every_2nd_nomarkers", "memscope_db__clean_moe_mix_nomarkers",
                "snapshot__leak_grad_accumulation_nomarkers"}
        out = [c for c in out if c.name in keep]
    return out


def write_case(case: Case, folder: Path) -> tuple[Path, dict[str, Any]]:
    """Write ``case``'s capture and its truth JSON into ``folder``; (capture, truth)."""
    folder.mkdir(parents=True, exist_ok=True)
    run = run_case(case)
    suffix, writer = WRITERS[case.fmt]
    path = writer(run, folder / f"{case.name}{suffix}")
    truth = {"case": case.name, "format": case.fmt, "capture": path.name,
             "description": case.description, "markers": case.markers,
             "plan": {k: v for k, v in asdict(case).items() if k not in ("name", "fmt")},
             **run.truth}
    Path(f"{path}.truth.json").write_text(json.dumps(truth, indent=1, default=str))
    return path, truth


def write_corpus(folder: Path, slice_: str = "full") -> list[tuple[Path, dict[str, Any]]]:
    """Write every case of the slice into ``folder``."""
    return [write_case(case, folder) for case in cases(slice_)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--slice", default="full", choices=["full", "fast"])
    args = parser.parse_args()
    written = write_corpus(args.out, args.slice)
    print(f"wrote {len(written)} captures and their truth to {args.out}")


if __name__ == "__main__":
    main()


__all__ = ["FORMATS", "Case", "LeakPlan", "Run", "cases", "memscope_rows", "run_case",
           "write_case", "write_corpus"]
