"""``memtui state``'s text: the figures at the event, then one line per segment."""

from __future__ import annotations

from typing import Any

from memtui.errors import safe_text

#: Rows of the roles split by the capture's own labels the text shows (``--json`` has all).
DETAIL_ROWS = 8


def format_state(data: dict[str, Any], unit: str, start: int) -> str:
    """The human text of ``memtui state``: the figures, then one line per segment."""
    from memtui.analysis.tables import format_time
    from memtui.units import at_least
    from memtui.units import format_bytes as fb

    level = data["level"]
    where = ("at the start, before event #0" if data["event"] is None
             else f"after event #{data['event']}")
    lines = [
        f"{data['device']} {where} ({format_time(data['t'], start, unit)})",
        f"  allocated {fb(level['allocated'])}, active {fb(level['active'])}, "
        f"reserved {at_least(level['reserved'], bool(level.get('reserved_is_floor')))}"
        + (f" (at most {fb(level['reserved_ceiling'])})"
           if level.get("reserved_is_floor") and level.get("reserved_ceiling") is not None
           else ""),
        f"  free {fb(data['free_bytes'])} in {data['gaps']} gaps, largest "
        f"{fb(data['largest_gap_bytes'])}: fragmented {fb(data['fragmented_bytes'])} "
        f"({data['fragmented_share']:.0%} of reserved, free inside "
        f"{data['fragmented_segments']} partly used segments), cached "
        f"{fb(data['cached_bytes'])} (in {data['cached_segments']} wholly free segments); "
        f"lost to rounding {fb(data['rounding_bytes'])}",
    ]
    if data.get("unplaced_bytes"):
        lines.append(_unplaced_line(data))
    if data.get("overlap_bytes"):
        lines.append(f"  overlapping {fb(data['overlap_bytes'])}: live blocks share these "
                     "addresses (the file holds a block where another is not yet freed: a "
                     "free missing), so a segment's blocks add up to more than it")
    if data.get("by_role"):
        from memtui.text.roles import roles_text

        outside = data.get("by_role_other_outside_rows") or 0
        lines.append(f"  by role: {roles_text(data['by_role'], outside)}")
        for row in data.get("by_role_detail", [])[:DETAIL_ROWS]:
            labels = ", ".join(f"{k} {row[k]}" for k in ("user_metadata", "compile_context")
                               if row.get(k))
            if labels:
                lines.append(f"    {row['role']} {labels}: {fb(row['bytes'])}")
    for row in data.get("unattributed", []):
        lines.append(f"  {fb(row['bytes'])} {row['label']} (in the level, in no block "
                     "shown below)")
    for segment in data["segments"]:
        where = "no segment" if segment["addr"] is None else (
            f"0x{segment['addr']:x} {fb(segment['size'])} stream {segment['stream']}"
            + (f" pool {segment['pool']}" if segment["pool"] else ""))
        lines.append(f"  {where}: {segment_contents(segment['blocks'])}")
    return safe_text(lines)


def _unplaced_line(data: dict[str, Any]) -> str:
    """The reserved bytes in segments the file does not list, and what is known of them:
    the blocks under "no segment" lie in them; the rest may be free or held."""
    from memtui.units import format_bytes as fb

    loose = sum(b["size"] for s in data["segments"] if s["addr"] is None
                for b in s["blocks"] if b["state"] != "free")
    return (f"  unplaced {fb(data['unplaced_bytes'])}: reserved in segments the file does "
            "not list" + (f" (they hold the {fb(loose)} of blocks in no segment below)"
                          if loose else ""))


def segment_contents(blocks: list[dict[str, Any]]) -> str:
    """What a segment holds, each state with its own bytes: ``2 blocks allocated (40.0 MiB),
    1 pending free (2.0 MiB), 2 free gaps (22.0 MiB)``; a state with nothing in it is left
    out, but for the allocated blocks (``no block allocated``)."""
    from memtui.units import counted
    from memtui.units import format_bytes as fb

    count = {"allocated": 0, "pending_free": 0, "free": 0}
    held = dict(count)
    for block in blocks:
        count[block["state"]] += 1
        held[block["state"]] += block["size"] or 0
    parts = [f"{counted(count['allocated'], 'block')} allocated ({fb(held['allocated'])})"
             if count["allocated"] else "no block allocated"]
    if count["pending_free"]:
        parts.append(f"{count['pending_free']} pending free ({fb(held['pending_free'])})")
    if count["free"]:
        parts.append(f"{counted(count['free'], 'free gap')} ({fb(held['free'])})")
    return ", ".join(parts)
