"""The flame stack tree: bytes by call stack, root first, one line per node (Line API).

Each line is ``███▌      42.1%  1.2G  ▾ name  file.py:12``: a bar of the node's share of
the total (an icicle of the flame graph, turned on its side), the share, the bytes (from
100 columns also the node's self bytes, its blocks and its share of its parent), then
the expander indented by depth and the frame.  Children are sorted by bytes, largest
first, and nodes holding nothing are hidden.  Opening a node also opens the chain below
it while it does not branch, so deep C++ stacks take one key.  Search matches are gold;
their ancestors are opened.  The lines are recomputed when the figures or the opened
nodes change; only the visible ones are drawn.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.analysis.stacks.stack_tree import ROOT, StackTree, TreeFigures
from memtui.errors import printable
from memtui.tui.widgets import paint

BAR = 10
WIDE = 100  # from this width each line also shows self bytes, blocks and % of parent


def heading(width: int) -> str:
    """The column names above the tree's lines at ``width``."""
    text = "share of all".ljust(BAR) + "      bytes "
    if width >= WIDE:
        text += " self  blocks  parent "
    return text + " frame (innermost last)"
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def share_bar(share: float, width: int = BAR) -> str:
    """``share`` (0..1) as a bar of ``width`` cells in eighths."""
    eighths = int(round(max(0.0, min(share, 1.0)) * width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(width)


class StackTreeView(ScrollView, can_focus=True, inherit_bindings=False):
    """A :class:`StackTree` with figures (see the module docstring)."""

    DEFAULT_CSS = """
    StackTreeView { height: 1fr; min-height: 3; }
    """

    class Chosen(Message):
        """The user chose a node (Enter on it, or a double click)."""

        def __init__(self, node: int) -> None:
            super().__init__()
            self.node = node

    def __init__(self, tree: StackTree, *, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.stack_tree = tree
        self.figures: TreeFigures | None = None
        self.expanded: set[int] = {ROOT}
        self.selected = ROOT
        self.matches: set[int] = set()
        self.rows: list[int] = []
        self._lines: LRUCache[tuple, Strip] = LRUCache(512)
        self._generation = 0

    # -- state -----------------------------------------------------------------------------

    def show(self, figures: TreeFigures) -> None:
        """New figures (the cursor moved, or the mode changed)."""
        first = self.figures is None
        self.figures = figures
        if first:
            self.open_heavy_path()
        self._rebuild()

    def _rebuild(self) -> None:
        self.rows = self._flatten()
        if self.selected not in self.rows:
            self.selected = self._nearest_visible(self.selected)
        self._generation += 1
        self.virtual_size = Size(self.size.width, len(self.rows))
        self._scroll_to_selected()
        self.refresh()

    def _flatten(self) -> list[int]:
        """Visible nodes in display order (depth first, children by bytes)."""
        if self.figures is None:
            return []
        rows: list[int] = []
        stack = [ROOT]
        while stack:
            node = stack.pop()
            rows.append(node)
            if node in self.expanded:
                stack.extend(reversed(self.stack_tree.children(node, self.figures).tolist()))
        return rows

    def _nearest_visible(self, node: int) -> int:
        for ancestor in reversed(self.stack_tree.ancestors(node)):
            if ancestor in self.rows:
                return ancestor
        return ROOT

    def _scroll_to_selected(self) -> None:
        if self.selected in self.rows:
            y = self.rows.index(self.selected)
            self.scroll_to_region(Region(0, y, 1, 1), animate=False, immediate=True)

    # -- opening and closing ----------------------------------------------------------------

    def open(self, node: int) -> None:
        """Open ``node`` and the chain below it while it does not branch."""
        for _ in range(500):
            self.expanded.add(node)
            kids = self.stack_tree.children(node, self.figures)
            if kids.size != 1:
                break
            node = int(kids[0])
        self._rebuild()

    def close(self, node: int) -> None:
        self.expanded.discard(node)
        self._rebuild()

    def toggle(self, node: int | None = None) -> None:
        node = self.selected if node is None else node
        if node in self.expanded and node != ROOT:
            self.close(node)
        else:
            self.open(node)

    def open_heavy_path(self, floor: float = 0.25) -> None:
        """Open the heaviest chain from the root while it holds ``floor`` of the total."""
        if self.figures is None or self.figures.total <= 0:
            return
        node = ROOT
        for _ in range(500):
            self.expanded.add(node)
            kids = self.stack_tree.children(node, self.figures)
            if not kids.size or self.figures.bytes[kids[0]] < floor * self.figures.total:
                break
            node = int(kids[0])

    def reveal(self, nodes: np.ndarray | list[int]) -> None:
        """Open the ancestors of ``nodes`` so they show."""
        for node in list(nodes):
            self.expanded.update(self.stack_tree.ancestors(int(node)))
        self._rebuild()

    def select(self, node: int) -> None:
        if node not in self.rows:
            self.reveal([node])
        self.selected = node
        self._generation += 1
        self._scroll_to_selected()
        self.refresh()

    def move(self, delta: int) -> None:
        if not self.rows:
            return
        at = self.rows.index(self.selected) if self.selected in self.rows else 0
        self.select(self.rows[min(max(at + delta, 0), len(self.rows) - 1)])

    def set_matches(self, nodes: np.ndarray) -> None:
        self.matches = {int(n) for n in nodes}
        self._generation += 1
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        row = y + int(self.scroll_offset.y)
        width = self.size.width
        if self.figures is None or row >= len(self.rows):
            return Strip.blank(width, paint.PLAIN)
        node = self.rows[row]
        key = (self._generation, row, width, node == self.selected)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._draw(node, width)
            self._lines[key] = strip
        return strip

    def _draw(self, node: int, width: int) -> Strip:
        figures = self.figures
        total = max(figures.total, 1)
        held = int(figures.bytes[node])
        depth = int(self.stack_tree.depth[node])
        indent = " " * min(depth, max(width // 3, 1))
        if node in self.expanded and self.stack_tree.children(node, figures).size:
            marker = "▾"
        elif self.stack_tree.children(node, figures).size:
            marker = "▸"
        else:
            marker = "·"
        selected = node == self.selected
        bg = "#3a4a6a" if selected else None
        name_style = paint.style(paint.MATCH if node in self.matches else "#e0e0e0", bg,
                                 bold=selected or node in self.matches)
        figures_text = f" {100 * held / total:5.1f}% {paint.short_bytes(held):>5} "
        if width >= WIDE:
            parent = int(self.stack_tree.parent[node])
            of_parent = held / max(int(figures.bytes[parent]), 1) if parent >= 0 else 1.0
            figures_text += (f"{paint.short_bytes(int(figures.self_bytes[node])):>5} "
                             f"{int(figures.blocks[node]):>7,} {100 * of_parent:5.0f}% ")
        segments = [
            Segment(share_bar(held / total), paint.style(paint.TREND_IN_VIEW, bg)),
            Segment(figures_text + " ", paint.style("#b0b0b0", bg)),
            Segment(f"{indent}{marker} ", paint.style("#9a9a9a", bg)),
            Segment(printable(self.stack_tree.label(node)), name_style),  # a name's CR, tab
        ]
        return Strip(segments).adjust_cell_length(width, paint.style(None, bg))

    # -- the mouse -------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        row = event.y + int(self.scroll_offset.y)
        if not 0 <= row < len(self.rows):
            return
        node = self.rows[row]
        self.select(node)
        if event.chain >= 2:
            self.post_message(self.Chosen(node))
        else:
            self.toggle(node)

    def on_resize(self) -> None:
        self._generation += 1
        self.virtual_size = Size(self.size.width, len(self.rows))
