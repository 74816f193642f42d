"""``memtui whatif``'s text: the proof per device, then each prediction beside the
recorded run, then what the replay cannot know."""

from __future__ import annotations

from memtui.analysis.replay.predict import Prediction, RunFigures
from memtui.analysis.replay.proof import ADDRESS_GOAL, Proof
from memtui.errors import printable, safe_line, safe_text
from memtui.units import format_bytes as fb


def format_proof(proof: Proof) -> str:
    if proof.refused:
        return safe_line(f"{proof.device}  no replay: {proof.refused}")
    head = f"{printable(proof.device)}  proof: replayed under the recorded settings " \
           f"({proof.settings.describe()})"
    recorded = ", ".join(f"{a} {proof.segment_reproduced.get(a, 0)}/{n}"
                         for a, n in sorted(proof.segment_events.items())) or "none recorded"
    lines = [
        head,
        f"  allocs at the recorded address  {proof.allocs_at_address} / {proof.allocs}"
        f"  {proof.address_share:.1%}  (goal {ADDRESS_GOAL:.0%})",
        f"  segment events reproduced       {proof.segments_reproduced} / "
        f"{proof.segments_recorded}  ({recorded})"
        + (f"; {proof.replay_extra_segment_events} made by the replay only"
           if proof.replay_extra_segment_events else ""),
        f"  reserved curve                  {proof.reserved_agree} / {proof.level_events}"
        f" allocs and frees agree  (largest error {fb(proof.reserved_max_error)})",
    ]
    if proof.first_departure is None:
        lines.append("  first departure                 none: the replay is the recording")
    else:
        lines.append(f"  first departure                 {printable(proof.departure_reason)}")
    if proof.orphans:
        lines.append(f"  {proof.orphans} blocks alive at the start lie in no segment")
    verdict = "proven: a prediction (--set) can be made" if proof.holds else \
        f"NOT proven ({printable(proof.why_not())}): no prediction is made"
    lines.append(f"  => {verdict}")
    return safe_text(lines)


def _row(name: str, recorded: str, predicted: str, change: str = "") -> str:
    return f"  {name:<26}{recorded:>18}{predicted:>18}  {change}".rstrip()


def _delta(before: int, after: int) -> str:
    if before == after:
        return "same"
    sign = "+" if after > before else "-"
    share = f" ({(after - before) / before:+.1%})" if before else ""
    return f"{sign}{fb(abs(after - before))}{share}"


def _fragmented(f: RunFigures) -> str:
    """Fragmented bytes at the reserved peak and their share of it (the one measure every
    screen and finding calls fragmentation)."""
    return f"{fb(f.fragmented_at_peak)} ({f.fragmented_share_at_peak:.1%})"


def format_prediction(prediction: Prediction) -> str:
    p = prediction
    head = f"{printable(p.device)}  what if {p.settings.describe()}"
    if p.refused:
        return safe_text([head, f"  refused: {p.refused}"])
    capacity = (f"capacity {fb(p.settings.capacity)} ({printable(p.capacity_source)})"
                if p.settings.capacity is not None else "capacity unknown")
    r, n = p.recorded, p.predicted
    assert r is not None and n is not None
    lines = [
        f"{head}  [{capacity}]",
        _row("", "recorded", "predicted", "change"),
        _row("reserved peak", fb(r.reserved_peak), fb(n.reserved_peak),
             _delta(r.reserved_peak, n.reserved_peak)),
        _row("reserved at end", fb(r.reserved_at_end), fb(n.reserved_at_end),
             _delta(r.reserved_at_end, n.reserved_at_end)),
        _row("cudaMalloc calls", str(r.cuda_malloc), str(n.cuda_malloc),
             f"{n.cuda_malloc - r.cuda_malloc:+d}"),
        _row("cudaFree calls", str(r.cuda_free), str(n.cuda_free),
             f"{n.cuda_free - r.cuda_free:+d}"),
        _row("at the reserved peak:", "", ""),
        _row("  fragmented", _fragmented(r), _fragmented(n)),
        _row("  largest gap", fb(r.largest_gap_at_peak), fb(n.largest_gap_at_peak)),
        _row("  cached", fb(r.cached_at_peak), fb(n.cached_at_peak)),
        _row("OOMs", str(r.ooms), str(n.ooms)),
    ]
    for change in p.oom_changes[:5]:
        lines.append(f"  OOM {change.change} at event {change.event}: "
                     f"{fb(change.requested)} asked")
    if len(p.oom_changes) > 5:
        lines.append(f"  ... {len(p.oom_changes) - 5} more OOM changes (--json lists all)")
    lines.append("  cannot know:")
    lines += [f"    - {limit}" for limit in p.limits]
    return safe_text(lines)
