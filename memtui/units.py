"""How sizes are written for people: one helper every layer shares (sources, analysis and
the UI import it; it imports nothing of memtui, so it closes no import circle)."""

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


__all__ = ["format_bytes"]
