"""The proof: replayed under the capture's own settings, does the replay do what the
allocator recorded?  Three agreements per device: allocs placed at the recorded address,
recorded segment events reproduced (same event, same action, size and address), and the
reserved curve (after every alloc and free, where the recording's own segment events
have all happened).  Where it first departs, :func:`explain_departure` says why.

A prediction (:mod:`.predict`) is only made on a device whose proof holds
(:data:`ADDRESS_GOAL` of the allocs at their address, every recorded segment event
reproduced, every free of a block the replay knows).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.replay.run import (
    SEGMENT_ACTIONS,
    ReplayError,
    ReplayRun,
    action_codes,
    is_action,
    replay_device,
)
from memtui.analysis.replay.settings import Settings, from_capture
from memtui.model import ACTIONS, MemoryTrace

#: The share of allocs the replay must place at the recorded address.
ADDRESS_GOAL = 0.99


@dataclass(frozen=True)
class Proof:
    """One device's agreement between the replay and the recording."""

    device: str
    settings: Settings
    allocs: int
    allocs_at_address: int
    segment_events: dict[str, int]  # recorded, by action
    segment_reproduced: dict[str, int]  # of those, reproduced by the replay
    replay_extra_segment_events: int  # made by the replay, not in the recording
    level_events: int  # events where the reserved curve is compared
    reserved_agree: int
    reserved_max_error: int
    first_departure: int | None  # event index
    departure_reason: str
    unknown_frees: int
    orphans: int
    refused: str  # why no replay could be made ("" where one was)

    @property
    def address_share(self) -> float:
        return self.allocs_at_address / self.allocs if self.allocs else 1.0

    @property
    def segments_recorded(self) -> int:
        return sum(self.segment_events.values())

    @property
    def segments_reproduced(self) -> int:
        return sum(self.segment_reproduced.values())

    @property
    def reserved_share(self) -> float:
        return self.reserved_agree / self.level_events if self.level_events else 1.0

    @property
    def holds(self) -> bool:
        return (not self.refused and self.address_share >= ADDRESS_GOAL
                and self.segments_reproduced == self.segments_recorded
                and self.unknown_frees == 0)

    def why_not(self) -> str:
        """Why a prediction is refused on this device ("" where the proof holds)."""
        if self.refused:
            return self.refused
        if self.address_share < ADDRESS_GOAL:
            return (f"only {self.address_share:.1%} of allocs replayed at their recorded "
                    f"address (goal {ADDRESS_GOAL:.0%})")
        if self.segments_reproduced != self.segments_recorded:
            return (f"{self.segments_recorded - self.segments_reproduced} recorded segment "
                    "events not reproduced")
        if self.unknown_frees:
            return f"{self.unknown_frees} frees of blocks the replay never saw"
        return ""

    def to_dict(self) -> dict:
        return {
            "device": self.device, "settings": self.settings.describe(),
            "allocs": self.allocs, "allocs_at_recorded_address": self.allocs_at_address,
            "address_share": self.address_share,
            "segment_events_recorded": self.segment_events,
            "segment_events_reproduced": self.segment_reproduced,
            "replay_extra_segment_events": self.replay_extra_segment_events,
            "reserved_compared_at": self.level_events,
            "reserved_agree": self.reserved_agree, "reserved_share": self.reserved_share,
            "reserved_max_error": self.reserved_max_error,
            "first_departure_event": self.first_departure,
            "departure_reason": self.departure_reason or None,
            "unknown_frees": self.unknown_frees, "orphans": self.orphans,
            "holds": self.holds, "refused": self.refused or None,
        }


def can_replay(trace: MemoryTrace, device: str) -> str:
    """Why ``device`` of ``trace`` cannot be replayed at all ("" where it can)."""
    if trace.meta.source != "torch_snapshot":
        return "only PyTorch snapshots record the caching allocator's decisions"
    events = trace.device_events(device)
    if not is_action(action_codes(events), "alloc").any():
        return "the trace has no alloc events (no history was recorded on this device)"
    return ""


def prove(trace: MemoryTrace, device: str,
          run: ReplayRun | None = None) -> tuple[Proof, ReplayRun | None]:
    """Replay ``device`` under the capture's recorded settings and compare."""
    settings = from_capture(trace.meta.extra.get("allocator_settings"))
    refused = can_replay(trace, device)
    if refused:
        return _refused(device, settings, refused), None
    if run is None:
        try:
            run = replay_device(trace, device, settings, replay_retries=True)
        except ReplayError as err:
            return _refused(device, settings, f"the replay stopped at {err}"), None
    return compare(run), run


def _refused(device: str, settings: Settings, why: str) -> Proof:
    return Proof(device, settings, 0, 0, {}, {}, 0, 0, 0, 0, None, "", 0, 0, why)


def compare(run: ReplayRun) -> Proof:
    """The three agreements of ``run`` (a replay under the recorded settings)."""
    events = run.events
    codes = action_codes(events)
    recorded_addr = events["addr"].fill_null(0).to_numpy().astype(np.uint64, copy=False)
    is_alloc = is_action(codes, "alloc")
    wrong_addr = np.flatnonzero(is_alloc & (run.replay_addr != recorded_addr))
    owners = _recorded_owners(codes)
    recorded, replayed = _segment_keys(events, codes, owners), _replay_keys(run)
    reproduced_keys = recorded & replayed
    by_action = Counter(k[1] for k in recorded.elements())
    reproduced = Counter(k[1] for k in reproduced_keys.elements())
    missing = sorted(k[0] for k in (recorded - replayed).elements())
    extra = sorted(k[0] for k in (replayed - recorded).elements())
    level = ~is_action(codes, SEGMENT_ACTIONS)
    recorded_reserved = events["reserved"].fill_null(-1).to_numpy()
    agree = level & (recorded_reserved == run.reserved)
    errors = np.abs(recorded_reserved[level] - run.reserved[level])
    firsts = [(int(wrong_addr[0]), "address")] if wrong_addr.size else []
    firsts += [(missing[0], "missing")] if missing else []
    firsts += [(extra[0], "extra")] if extra else []
    level_bad = np.flatnonzero(level & ~agree)
    firsts += [(int(level_bad[0]), "reserved")] if level_bad.size else []
    first, kind = min(firsts) if firsts else (None, "")
    return Proof(
        device=run.device, settings=run.settings, allocs=int(is_alloc.sum()),
        allocs_at_address=int(is_alloc.sum() - wrong_addr.size),
        segment_events=dict(by_action), segment_reproduced=dict(reproduced),
        replay_extra_segment_events=sum((replayed - recorded).values()),
        level_events=int(level.sum()), reserved_agree=int(agree.sum()),
        reserved_max_error=int(errors.max()) if errors.size else 0,
        first_departure=first, departure_reason=explain_departure(run, first, kind),
        unknown_frees=run.unknown_frees, orphans=run.orphans, refused="",
    )


def _recorded_owners(codes: np.ndarray) -> np.ndarray:
    """For each event (``codes``: :func:`~.run.action_codes`), the event that owns it as
    the replay logs it: a cudaMalloc (or page map) belongs to the next alloc (the malloc
    that made it; the trace writes the alloc last); a segment free (or unmap) to the first
    event of its run."""
    n = codes.size
    index = np.arange(n)
    is_alloc = is_action(codes, "alloc")
    next_alloc = np.where(is_alloc, index, n)
    next_alloc = np.minimum.accumulate(next_alloc[::-1])[::-1]
    release = is_action(codes, ("segment_free", "segment_unmap"))
    run_start = np.where(release & ~np.concatenate([[False], release[:-1]]), index, -1)
    run_start = np.maximum.accumulate(run_start)
    grows = is_action(codes, ("segment_alloc", "segment_map"))
    # a cudaMalloc with no alloc after it (a trace cut there): its own event
    next_alloc = np.where(next_alloc < n, next_alloc, index)
    return np.where(grows, next_alloc, np.where(release, run_start, index))


def _segment_keys(events: pl.DataFrame, codes: np.ndarray, owners: np.ndarray) -> Counter:
    mask = is_action(codes, SEGMENT_ACTIONS)
    rows = pl.Series(np.flatnonzero(mask))
    addr = events["addr"].gather(rows).fill_null(0).to_list()
    size = events["size"].gather(rows).fill_null(0).to_list()
    actions = [ACTIONS[code] for code in codes[mask].tolist()]
    return Counter(zip(owners[mask].tolist(), actions, size, addr, strict=True))


def _replay_keys(run: ReplayRun) -> Counter:
    log = run.segments
    return Counter(zip(log.owner, log.action, log.size, log.addr, strict=True))


def explain_departure(run: ReplayRun, index: int | None, kind: str) -> str:
    """Why the replay first left the recording at event ``index``."""
    if index is None:
        return ""
    events = run.events
    row = events.row(index, named=True)
    action = row["action"]
    where = f"event {index} ({action}"
    where += f", block {row['block_id']})" if row["block_id"] is not None else ")"
    if kind == "address":
        return (f"{where}: the recording put the block at {int(row['addr']):#x}, the replay "
                f"at {int(run.replay_addr[index]):#x}; "
                + _address_cause(run, index))
    if kind == "missing":
        return (f"{where}: a recorded {action} of {row['size']} bytes that the replay did "
                "not make there: the replay's pool differed (an earlier block placed "
                "elsewhere, or a segment the dump did not show)")
    if kind == "extra":
        log = run.segments
        hit = log.owner.index(index)
        return (f"{where}: the replay made a {log.action[hit]} of {log.size[hit]} bytes "
                "that the recording does not have: it found no free block where the "
                "recording had one (an allocation made outside the trace, or ring-buffer "
                "history lost before the first event)")
    return (f"{where}: reserved {int(row['reserved'] or 0)} recorded, "
            f"{int(run.reserved[index])} replayed: a segment the replay holds or lacks "
            "(the start pool walked back from the dump differs from the allocator's)")


def _address_cause(run: ReplayRun, index: int) -> str:
    """Why the replay put this alloc elsewhere, read from the replay's pool just before."""
    from memtui.analysis.replay.allocator import get_allocation_size, round_size
    from memtui.units import format_bytes as fb

    events = run.events
    actions = events["action"].cast(pl.String)
    recorded = int(events["addr"][index])
    size = round_size(int(events["size"][index] or 0), run.settings)
    # the segment_alloc of the same malloc: after the previous alloc, at this address
    previous_alloc = max((i for i in range(index) if actions[i] == "alloc"), default=-1)
    made = [i for i in range(previous_alloc + 1, index) if actions[i] == "segment_alloc"
            and int(events["addr"][i]) == recorded]
    if made:
        segment = int(events["size"][made[0]])
        rule = get_allocation_size(size)
        if segment != rule:
            return (f"the recording made a new segment of {fb(segment)} for a request of "
                    f"{fb(size)}, where get_allocation_size gives {fb(rule)}: not the "
                    "caching allocator's rules (a synthetic capture, or an allocator this "
                    "replay does not model)")
        return (f"the recording made a new segment for it, the replay served it from a "
                f"free block at {int(run.replay_addr[index]):#x}: a block the recorded "
                "allocator did not have free (an earlier departure, or a free that "
                "completed later than the trace says)")
    if run.pool_before is None:
        return "the replay's pool differed before this event"
    held = run.pool_before(index).block_at(recorded)
    if held is None:
        return ("the recorded address lies in no segment the replay holds: a segment "
                "allocated outside the trace (the ring buffer lost its segment_alloc, or "
                "the dump lacks it)")
    state, start, block_size = held
    if state == "free" and block_size >= size:
        return (f"the replay had the recorded place free too (a block of {fb(block_size)} at "
                f"{start:#x}) but its best fit (stream, size, address) chose another: the "
                "free blocks differed earlier")
    return (f"the replay holds the recorded address {state}"
            + (f" (a free block of only {fb(block_size)})" if state == "free" else "")
            + ": an earlier block was placed or freed differently")
