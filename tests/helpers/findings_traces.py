"""A small builder of hand-made traces for the findings tests (answers known by hand).

``TraceBuilder`` records allocs and frees one event at a time (``t = 1000 * seq`` ns, plus
whatever :meth:`TraceBuilder.wait` added: a jittered clock),
each from a named call stack ``[name (/work/NAME.py:LINE), train (/work/train.py:10)]``,
optional segments with explicit addresses (for pool states) and step markers, and builds
a :class:`~memtui.model.MemoryTrace` with blocks, levels and frames as a source would.
"""

from __future__ import annotations

import polars as pl

from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

MiB = 1 << 20
DEVICE = "cuda:0"


class TraceBuilder:
    def __init__(self, source: str = "torch_snapshot", path: str = "/toy/run.pickle",
                 settings: dict | None = None) -> None:
        self.source = source
        self.path = path
        self.settings = settings or {}
        self.events: list[dict] = []
        self.blocks: dict[int, dict] = {}
        self.segments: list[dict] = []
        self.markers: list[dict] = []
        self.stack_names: dict[str, int] = {}
        self.next_addr = 0x10_0000_0000
        self.level = 0
        self.reserved = 0
        self.offset = 0  # ns added to every later event's time by wait()

    @property
    def seq(self) -> int:
        return len(self.events)

    @property
    def now(self) -> int:
        """The time (ns) of the next event."""
        return self.seq * 1000 + self.offset

    def wait(self, ns: int) -> None:
        """Let ``ns`` nanoseconds pass before the next event (a sleep, a data load)."""
        self.offset += ns

    def _stack(self, name: str | None) -> int | None:
        if name is None:
            return None
        return self.stack_names.setdefault(name, len(self.stack_names))

    def _event(self, action: str, addr: int, size: int, block: int | None,
               stack: str | None) -> dict:
        row = {"t": self.now, "seq": self.seq, "device": DEVICE, "action": action,
               "addr": addr, "size": size, "stream": 0, "pool": "CUDA", "block_id": block,
               "stack_id": self._stack(stack), "allocated": self.level,
               "reserved": self.reserved}
        self.events.append(row)
        return row

    def segment(self, addr: int, size: int, kind: str = "large") -> None:
        self.reserved += size
        self.segments.append({"segment_id": len(self.segments), "device": DEVICE,
                              "addr": addr, "size": size, "t_alloc": self.now,
                              "seq_alloc": self.seq, "stream": 0, "kind": kind,
                              "ghost": False})
        self._event("segment_alloc", addr, size, None, None)

    def alloc(self, stack: str | None, size: int, addr: int | None = None,
              requested: int | None = None, owner: str | None = None) -> int:
        if addr is None:
            addr = self.next_addr
            self.next_addr += size + 4096
        block = len(self.blocks)
        self.level += size
        self.blocks[block] = {"block_id": block, "device": DEVICE, "addr": addr, "size": size,
                              "requested_size": requested or size, "t_alloc": self.now,
                              "seq_alloc": self.seq, "stack_id": self._stack(stack),
                              "pool": "CUDA", "stream": 0, "ghost": False, "owner": owner}
        self._event("alloc", addr, size, block, stack)
        return block

    def free(self, block: int) -> None:
        info = self.blocks[block]
        self.level -= info["size"]
        info["t_free"] = self.now
        info["seq_free"] = self.seq
        self._event("free", info["addr"], info["size"], block,
                    self._name_of(info["stack_id"]))

    def ghost_free(self, size: int, stack: str | None = None) -> None:
        """Free a block allocated before the history began (its alloc fell out)."""
        block = len(self.blocks)
        addr = self.next_addr
        self.next_addr += size + 4096
        self.blocks[block] = {"block_id": block, "device": DEVICE, "addr": addr, "size": size,
                              "requested_size": size, "t_alloc": 0, "stack_id": None,
                              "pool": "CUDA", "stream": 0, "ghost": True,
                              "t_free": self.now, "seq_free": self.seq}
        self.level -= size
        self._event("free", addr, size, block, stack)

    def oom(self, size: int, device_free: int, stack: str | None = "oom_site") -> None:
        self._event("oom", 0, size, None, stack)
        self.markers.append({"t": self.now - 1000, "t_end": None, "device": DEVICE,
                             "kind": "oom",
                             "name": f"out of memory: {size} bytes requested, "
                                     f"{device_free} free on the device"})

    def oom_trigger(self, size: int) -> None:
        """msMemScope's OOM_DETAIL trigger: a marker only, the request in its detail."""
        self.markers.append({"t": self.now - 1, "t_end": None, "device": DEVICE,
                             "kind": "oom", "name": "oom trigger",
                             "detail": f"{{func:malloc,req_size:{size},flag:0}}"})

    def step(self, name: str, kind: str = "annotation") -> None:
        """A step marker (``ProfilerStep#N``) starting at the next event."""
        if self.markers and self.markers[-1].get("kind") == kind \
                and self.markers[-1]["t_end"] is None:
            self.markers[-1]["t_end"] = self.now
        self.markers.append({"t": self.now, "t_end": None, "device": DEVICE,
                             "kind": kind, "name": name})

    def _name_of(self, stack_id: int | None) -> str | None:
        for name, sid in self.stack_names.items():
            if sid == stack_id:
                return name
        return None

    def build(self) -> MemoryTrace:
        start = -min([0] + [e["allocated"] for e in self.events])  # ghosts alive before
        events = pl.DataFrame(self.events).with_columns(
            allocated=pl.col("allocated") + start, active=pl.col("allocated") + start)
        names = list(self.stack_names)
        frames = pl.DataFrame({
            "frame_id": list(range(len(names) + 1)),
            "filename": [f"/work/{n}.py" for n in names] + ["/work/train.py"],
            "line": [10 + i for i in range(len(names))] + [10],
            "name": names + ["train"],
        })
        stacks = pl.DataFrame(
            {"stack_id": list(range(len(names))),
             "frame_ids": [[i, len(names)] for i in range(len(names))]},
            schema={"stack_id": pl.Int32, "frame_ids": pl.List(pl.Int32)})
        blocks = pl.DataFrame(list(self.blocks.values()), infer_schema_length=None)
        info = DeviceInfo(DEVICE, kind="cuda", has_segments=bool(self.segments),
                          start_allocated=start, start_reserved=0,
                          segments_at_end=len(self.segments))
        meta = TraceMeta(source=self.source, path=self.path, devices=[info],
                         extra={"allocator_settings": self.settings, "device_kind": "cuda"})
        markers = (pl.DataFrame(self.markers, schema={
            "t": pl.Int64, "t_end": pl.Int64, "device": pl.String, "kind": pl.String,
            "name": pl.String, "detail": pl.String}) if self.markers else None)
        segments = pl.DataFrame(self.segments) if self.segments else None
        return MemoryTrace(
            meta=meta, events=conform(events, "events"), blocks=conform(blocks, "blocks"),
            segments=conform(segments, "segments"), frames=conform(frames, "frames"),
            stacks=conform(stacks, "stacks"), markers=conform(markers, "markers"),
        )


def training_loop(steps: int, leak: int = MiB, every: int = 1, churn: int = 100 * MiB,
                  markers: bool = True, clean_allocs: int = 0, clean_size: int = MiB,
                  stop_mid_step: bool = False) -> MemoryTrace:
    """Parameters, then ``steps`` steps that allocate and free ``churn`` bytes of
    activations and keep ``leak`` bytes every ``every``-th step (``leak=0``: clean)."""
    b = TraceBuilder()
    for _ in range(3):
        b.alloc("init_params", 50 * MiB)
    for k in range(steps):
        if markers:
            b.step(f"ProfilerStep#{k}")
        acts = [b.alloc("forward", churn // 2), b.alloc("forward_mlp", churn - churn // 2)]
        clean = [b.alloc("metrics", clean_size) for _ in range(clean_allocs)]
        if leak and k % every == every - 1:
            b.alloc("leaky_cache", leak)
        for block in clean:
            b.free(block)
        grad = b.alloc("backward", churn // 4)
        for block in acts:
            b.free(block)
        b.free(grad)
    if stop_mid_step:
        if markers:
            b.step(f"ProfilerStep#{steps}")
        b.alloc("forward", churn // 2)
        b.alloc("forward_mlp", churn - churn // 2)
    return b.build()
