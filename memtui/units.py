"""How sizes and counts are written for people: helpers every layer shares (sources,
analysis and the UI import them; this imports nothing of memtui, so it closes no import
circle)."""

from __future__ import annotations


def format_bytes(n: int | None) -> str:
    """Human bytes in binary units, as memory_viz prints them (``1.5 GiB``)."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def at_least(n: int | None, floor: bool) -> str:
    """``format_bytes(n)``, written ``>= 1.5 GiB`` where ``n`` is only the least the figure
    can be (a file that contradicts itself: DESIGN.md's invariants)."""
    return f">= {format_bytes(n)}" if floor and n is not None else format_bytes(n)


def counted(count: int, noun: str) -> str:
    """``count`` with ``noun`` in the right number: ``1 block``, ``0 blocks``, ``1,234
    events``, ``2 matches``, ``3 entries`` (English's regular plurals)."""
    if count == 1:
        return f"{count:,} {noun}"
    if noun.endswith(("s", "x", "ch", "sh")):
        plural = noun + "es"
    elif noun.endswith("y") and noun[-2:-1] not in "aeiou":
        plural = noun[:-1] + "ies"
    else:
        plural = noun + "s"
    return f"{count:,} {plural}"


def signed_bytes(n: int | None) -> str:
    """``+1.5 GiB`` / ``-512 B`` / ``0`` (``-`` where unknown)."""
    if n is None:
        return "-"
    if n == 0:
        return "0"
    return ("+" if n > 0 else "-") + format_bytes(abs(n))


__all__ = ["counted", "format_bytes", "signed_bytes"]
