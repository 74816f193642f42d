"""The delta strip under the compare Trend: B - A over the same view, two rows high.

Each column shows the change of largest magnitude in its time bin (min-max downsampled,
as the Trend plot is, with the same axis width so the columns line up): growth as eighth
blocks rising in the top row, shrinkage as blocks hanging from the middle in the bottom
row, so the sign reads from the shape, not only from the colour.  The cursor column is a
``│``.  Scale labels on the left: the largest growth and shrinkage in the view.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from memtui.analysis.timeline.downsample import bin_of, minmax_bins
from memtui.analysis.timeline.levels import Level
from memtui.tui.widgets.status import short_bytes

UP_CHARS = " ▁▂▃▄▅▆▇█"
DOWN_CHARS = " ▔▔▀▀▀▀██"  # eighths hanging from the top of the cell (coarser: no glyphs)
AXIS_WIDTH = 7


class DeltaStrip(Widget):
    """See the module docstring.  :meth:`set_data` sets the delta level and the state."""

    COMPONENT_CLASSES = {"deltastrip--up", "deltastrip--down", "deltastrip--axis",
                         "deltastrip--cursor"}
    DEFAULT_CSS = """
    DeltaStrip { height: 2; }
    DeltaStrip > .deltastrip--up { color: $error; }
    DeltaStrip > .deltastrip--down { color: $success; }
    DeltaStrip > .deltastrip--axis { color: $foreground-muted; }
    DeltaStrip > .deltastrip--cursor { color: $foreground; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.delta: Level | None = None
        self.view: tuple[int, int] = (0, 1)
        self.cursor_t = 0
        self._rows: tuple | None = None
        self._key: tuple | None = None

    def set_data(self, delta: Level | None, view: tuple[int, int], t: int) -> None:
        changed = delta is not self.delta or view != self.view or t != self.cursor_t
        self.delta, self.view, self.cursor_t = delta, view, t
        if changed:
            self.refresh()

    @property
    def axis_width(self) -> int:
        return AXIS_WIDTH if self.size.width >= 50 else 6

    def columns(self) -> tuple[np.ndarray, int, int]:
        """Per column the change of largest magnitude, and the view's largest growth and
        shrinkage (computed once per data, view and width)."""
        cols = max(self.size.width - self.axis_width, 1)
        key = (id(self.delta), self.view, cols)
        if self._rows is None or self._key != key:
            if self.delta is None or self.delta.values.size == 0:
                value = np.zeros(cols, dtype=np.int64)
            else:
                bins = minmax_bins(self.delta.t, self.delta.values, *self.view, cols)
                value = np.where(np.abs(bins.hi) >= np.abs(bins.lo), bins.hi, bins.lo)
                value = np.where(bins.known, value, 0)
            self._rows = (value, int(max(value.max(), 0)), int(min(value.min(), 0)))
            self._key = key
        return self._rows

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y > 1 or self.delta is None:
            return Strip.blank(width)
        value, top, bottom = self.columns()
        styles = {name: self.get_component_rich_style(f"deltastrip--{name}")
                  for name in ("up", "down", "axis", "cursor")}
        scale = max(top, -bottom, 1)
        label = _scale_label(top if y == 0 else bottom, self.axis_width - 1)
        segments = [Segment(label.rjust(self.axis_width - 1) + "┤", styles["axis"])]
        eighths = np.rint(np.abs(value) / scale * 8).astype(np.int64)
        eighths = np.where(value != 0, np.maximum(eighths, 1), 0)
        if y == 0:
            chars = np.where(value > 0, np.array(list(UP_CHARS))[eighths], " ")
            style = styles["up"]
        else:
            chars = np.where(value < 0, np.array(list(DOWN_CHARS))[eighths], " ")
            style = styles["down"]
        chars = chars.tolist()
        v0, v1 = self.view
        cursor = None
        if v0 <= self.cursor_t <= v1:
            cursor = int(bin_of(np.array([self.cursor_t]), v0, v1, len(chars))[0])
        if cursor is None:
            segments.append(Segment("".join(chars), style))
        else:
            segments += [Segment("".join(chars[:cursor]), style),
                         Segment("│", styles["cursor"] + Style()),
                         Segment("".join(chars[cursor + 1:]), style)]
        return Strip(segments, width)


def _scale_label(value: int, width: int) -> str:
    """``+3.0M`` / ``-269M``: signed short bytes in ``width`` characters."""
    if value == 0:
        return "0"
    text = ("+" if value > 0 else "-") + short_bytes(abs(value))
    if len(text) > width and "." in text:
        number, unit = text[:-1], text[-1]
        text = number.split(".")[0] + unit
    return text[-width:]


__all__ = ["DeltaStrip"]
