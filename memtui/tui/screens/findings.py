"""Screen 6, Findings: the answers memtui found by itself, and a key to their evidence.

One line per finding (:mod:`memtui.analysis.findings`), most severe first, its severity
written out and coloured; below, the highlighted finding's details one fact a line (where
its evidence is and its stack, then each figure), scrolled with ``J`` / ``K`` or the wheel.
Enter moves the shared cursor to the evidence and shows the screen that shows it best: a
leak's blocks in the Tables' Block View, an OOM or fragmentation on the Pool at that event,
the peak on the Stacks.  The findings are computed by the app in a thread after the first
paint (``app.findings``); until then the screen says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from memtui.analysis.findings.frames import stack_frames
from memtui.analysis.findings.model import Finding, ranked
from memtui.analysis.tables import format_time
from memtui.errors import printable
from memtui.tui.answer import evidence_changes
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.status import StatusBar
from memtui.units import counted, format_bytes

SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
SEVERITY_TAG = {"high": "HIGH", "medium": "MED ", "low": "LOW ", "info": "info"}
#: Where Enter takes each kind of finding.
DESTINATION = {"leak": "tables", "oom": "pool", "peak": "stacks", "fragmentation": "pool",
               "inefficient": "tables", "capture": "trend",
               "savings": "tables"}  # the role's blocks alive at the peak
DESTINATION_WORDS = {"tables": "its blocks in the Tables", "pool": "the Pool at that event",
                     "stacks": "the Stacks at that event", "trend": "the Trend at that event"}
#: Readable names of a finding's figures (others: the key, ``_`` as spaces, no ``bytes``).
LABELS = {
    "requested_bytes": "requested", "reserved_bytes": "reserved",
    "allocated_bytes": "allocated", "pending_free_bytes": "pending free",
    "pool_free_bytes": "free in the pool", "largest_gap_bytes": "largest free gap",
    "largest_gap_any_segment_bytes": "largest free gap of any segment",
    "device_free_bytes": "free on the device",
    "peak_allocated_bytes": "peak allocated", "peak_reserved_bytes": "peak reserved",
    "peak_t": "peak at", "peak_reserved_t": "reserved peak at",
    "reserved_at_allocated_peak_bytes": "reserved at the allocated peak",
    "blocks_alive": "blocks alive", "bytes_per_step": "per step",
    "held_bytes_per_step": "held per step", "every_steps": "every N steps",
    "bytes_per_occurrence": "per occurrence", "bytes_per_second": "per second",
    "first_t": "first at", "last_t": "last at", "regularity": "spacing's variation",
    "total_bytes": "in all",
    "steps_grown": "steps grown", "steps_from": "from step", "first_step": "first step",
    "first_step_name": "first step named",
    "end_largest_gap_bytes": "largest free gap at the end",
    "end_pool_free_bytes": "free in the pool at the end", "end_segments": "segments at the end",
    "rounding_bytes": "lost to rounding inside blocks",
    "fragmented_bytes": "fragmented (free inside partly used segments)",
    "fragmented_segments": "partly used segments", "fragmented_share": "of reserved",
    "cached_bytes": "cached (in wholly free segments)",
    "cached_segments": "wholly free segments", "measured_at": "measured at",
    "predicted_saving_bytes": "predicted saving",
    "explains_oom_t": "explains the OOM at", "ghost_bytes": "ghost bytes",
    "ghost_bytes_share": "ghost share of bytes", "ghost_share": "ghost share of blocks",
    "freed_without_alloc": "freed without an alloc", "without_stack": "without a stack",
    "role_bytes": "the role holds", "saving_bytes": "would save up to",
}


def figure_label(key: str) -> str:
    """What a finding's figure is called on screen (never the raw key)."""
    if key in LABELS:
        return LABELS[key]
    return key.removesuffix("_bytes").replace("_", " ")


_LISTS = ("by_stack", "by_metadata", "by_owner", "by_pool", "reserved_peak_by_stack")
_SKIP = {"level_at_steps", "kept_at_occurrences", "cause", "advice", "conflicts", "warnings",
         "cause_kind",
         "allocator_settings_known", "frame_is_user_code", "problem", "grouped_by",
         # the by_* lists hold the unattributed rows already; the evidence group is the
         # evidence's
         "unattributed", "evidence_group",
         # a leak's spacing and its first and last times: the title and the blocks say
         "every_steps", "regularity", "first_t", "last_t", *_LISTS}


class FindingsScreen(Screen):
    """See the module docstring."""

    BINDINGS = [
        # priority: Enter is the screen's, not the list's "Select" (one meaning in the help)
        Binding("enter", "jump", "Go to evidence", show=True, priority=True),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("J", "scroll_detail(1)", "Details down", show=False),
        Binding("K", "scroll_detail(-1)", "Details up", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: list[Finding] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="findings-main"):
            yield Static("", id="findings-title")
            yield OptionList(id="findings-list")
            with VerticalScroll(id="findings-detail-box"):
                yield Static("", id="findings-detail")
        yield StatusBar()
        yield KeyBar(compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "findings", self._findings_changed, init=False)
        self._findings_changed(getattr(self.app, "findings", None))
        self.query_one(OptionList).focus()
        self.call_after_refresh(self.app.mark_painted, "findings")

    def on_screen_resume(self) -> None:
        self.query_one(OptionList).focus()

    # -- the list ---------------------------------------------------------------------------

    def _findings_changed(self, found: dict | None) -> None:
        title = self.query_one("#findings-title", Static)
        options = self.query_one(OptionList)
        options.clear_options()
        if found is None:
            self.items = []
            title.update("[b]Findings[/b]  looking for leaks, the peak, OOMs... "
                         "(the other screens work meanwhile)")
            self._show_detail(None)
            return
        error = getattr(self.app, "findings_error", None)
        if error:
            self.items = []
            title.update(Text.assemble(("Findings", "bold"), "  could not be found: ",
                                       (error, "bold red"),
                                       "  (the other screens work; details in the toast)"))
            self.query_one("#findings-detail", Static).update("")
            return
        self.items = ranked([f for items in found.values() for f in items])
        high = sum(f.severity == "high" for f in self.items)
        title.update(f"[b]Findings[/b]  {len(self.items)} found, {high} of high severity"
                     "   (Enter: go to the evidence)")
        several = len(found) > 1
        options.add_options([Option(self._line(f, several), id=str(i))
                             for i, f in enumerate(self.items)])
        if self.items:
            options.highlighted = 0
        self._show_detail(self.items[0] if self.items else None)

    @staticmethod
    def _line(finding: Finding, several_devices: bool) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(SEVERITY_TAG[finding.severity], SEVERITY_STYLE[finding.severity])
        line.append(f" {finding.kind:<13} ", "bold")
        if several_devices:
            line.append(f"{finding.device}: ", "dim")
        line.append(finding.title)
        return line

    def on_option_list_option_highlighted(self, message: OptionList.OptionHighlighted) -> None:
        self._show_detail(self._finding(message.option_index))

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.jump(self._finding(message.option_index))

    def _finding(self, index: int | None) -> Finding | None:
        if index is None or not 0 <= index < len(self.items):
            return None
        return self.items[index]

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if step > 0:
            options.action_cursor_down()
        else:
            options.action_cursor_up()

    def action_scroll_detail(self, lines: int) -> None:
        """The details pane a few lines down or up (the list keeps the keyboard)."""
        box = self.query_one("#findings-detail-box", VerticalScroll)
        box.scroll_relative(y=lines * 3, animate=False)

    def action_jump(self) -> None:
        self.jump(self._finding(self.query_one(OptionList).highlighted))

    # -- the detail pane --------------------------------------------------------------------

    def _show_detail(self, finding: Finding | None) -> None:
        pane = self.query_one("#findings-detail", Static)
        self.query_one("#findings-detail-box", VerticalScroll).scroll_home(animate=False)
        if finding is None:
            pane.update("" if self.items or getattr(self.app, "findings", None) is None
                        else "Nothing to report: no leak, no OOM, nothing unusual.")
            return
        pane.update(detail_text(finding, self._when(finding.device, finding.evidence.t),
                                lambda t: self._when(finding.device, t)))

    def _when(self, device: str, t: int | None) -> str | None:
        if t is None:
            return None
        app = self.app
        try:
            start = app.timeline(device).start  # type: ignore[attr-defined]
        except KeyError:
            return None
        return format_time(t, start, app.trace.meta.time_unit)  # type: ignore[attr-defined]

    # -- going to the evidence ----------------------------------------------------------------

    def jump(self, finding: Finding | None) -> None:
        """Move the shared cursor to ``finding``'s evidence and show it best."""
        if finding is None:
            return
        app: Any = self.app
        evidence = finding.evidence
        changes = evidence_changes(app.trace, finding, app.cursor)
        try:  # the cursor on the very event (several can share a timestamp)
            app.move_cursor(**changes)
        except TypeError:  # a cursor that addresses times only
            changes.pop("event", None)
            if evidence.t is not None:
                changes["t"] = evidence.t
            app.move_cursor(**changes)
        target = DESTINATION.get(finding.kind, "trend")
        if target == "tables" and evidence.block_ids:
            label = (finding.detail.get("function") or finding.detail.get("flag")
                     or finding.detail.get("role") or finding.kind)
            app.filter_blocks(list(evidence.block_ids), f"{finding.kind}: {label}")
            return
        if target == "tables":
            target = "trend"
        if target == "stacks" and evidence.stack_id is not None and hasattr(app, "show_stack"):
            app.show_stack(evidence.stack_id, _naming_frame(app.trace, evidence.stack_id))
            return
        app.switch_mode(target)


def _naming_frame(trace, stack_id: int) -> int | None:
    """The frame that names ``stack_id`` in the findings (its innermost user frame)."""
    row = stack_frames(trace).filter(pl.col("stack_id") == stack_id)
    return int(row["frame_id"][0]) if row.height and row["frame_id"][0] is not None else None


def detail_text(finding: Finding, when: str | None,
                time_text: Callable[[int], str | None] | None = None) -> Text:
    """The detail pane of one finding, one fact a line (text from the capture is escaped:
    Text objects): the title and its cause and advice, where Enter goes and the evidence's
    stack, the live bytes per step, then each figure on a line of its own, its label in
    words, and the lists (by stack, owner, pool).

    ``when`` is the evidence's time as shown; ``time_text`` shows the detail's times."""
    text = Text()
    text.append(f"{SEVERITY_TAG[finding.severity].strip()} ", SEVERITY_STYLE[finding.severity])
    text.append(f"{finding.kind} on {printable(str(finding.device))}\n", "bold")
    text.append(printable(finding.title) + "\n")
    for key in ("cause", "advice"):
        if finding.detail.get(key) and str(finding.detail[key]) not in finding.title:
            text.append(f"{key}: ", "bold")
            text.append(printable(str(finding.detail[key])) + "\n")
    for conflict in finding.detail.get("conflicts") or []:
        text.append("conflict: ", "bold yellow")
        text.append(printable(str(conflict)) + "\n")
    _append_evidence(text, finding, when)
    levels = finding.detail.get("level_at_steps")
    what = "live bytes at each step: "
    if not levels:  # a leak found without steps
        levels, what = finding.detail.get("kept_at_occurrences"), "kept at each occurrence: "
    if levels:
        text.append(what, "bold")
        text.append(f"{format_bytes(min(levels))} .. {format_bytes(max(levels))}\n")
        text.append("  " + sparkline(levels, 60) + "\n")
    same = {"held_bytes_per_step": "bytes_per_step",
            "bytes_per_occurrence": "bytes_per_step"}  # said once where they agree
    figures = [(figure_label(key), _value(key, value, time_text))
               for key, value in finding.detail.items()
               if key not in _SKIP and value is not None
               and not isinstance(value, list | dict | bool)
               and not (key in same and finding.detail.get(same[key]) == value)]
    width = max((len(label) for label, _ in figures), default=0)
    for label, value in figures:
        text.append(f"  {label:<{width}}  ", "dim")
        text.append(printable(str(value)) + "\n")
    lists = _LISTS
    if finding.detail.get("grouped_by") == "operator":  # profiler: operators first
        lists = ("by_owner", *[k for k in _LISTS if k != "by_owner"])
    for key in lists:
        rows = finding.detail.get(key) or []
        if rows:
            name = "by operator" if key == "by_owner" and lists[0] == key else \
                key.replace("_", " ")
            text.append(name + ":\n", "bold")
            for row in rows[:5]:
                share = f"{row['share']:>4.0%}" if "share" in row else ""
                text.append(f"  {format_bytes(row['bytes']):>10} {share} {row['blocks']:>6} "
                            f"blocks  {printable(str(row['label']))}\n")
    return text


def _append_evidence(text: Text, finding: Finding, when: str | None) -> None:
    """Where the evidence is, where Enter takes it, and its stack (innermost first)."""
    evidence = finding.evidence
    where = DESTINATION_WORDS[DESTINATION.get(finding.kind, "trend")]
    parts = []
    if when is not None:
        parts.append(f"at {when}")
    if evidence.block_ids:
        parts.append(counted(len(evidence.block_ids), "block"))
    if evidence.owner:
        parts.append(f"owner {printable(str(evidence.owner))}")
    text.append("evidence: ", "bold")
    text.append((", ".join(parts) or "the whole capture") + f"  (Enter: {where})\n")
    for frame in evidence.stack[:6]:
        base = (frame.filename or "").replace("\\", "/").rsplit("/", 1)[-1]
        text.append(f"  {printable(frame.name or '?')}  {printable(base)}:{frame.line or ''}\n",
                    "dim")


def sparkline(values: list[int], width: int) -> str:
    """``values`` as at most ``width`` block characters (the largest value of each cell),
    scaled to their own range: the least cell is the lowest bar, the greatest the highest."""
    bars = "▁▂▃▄▅▆▇█"
    count = min(width, len(values))
    cells = [max(values[i * len(values) // count:(i + 1) * len(values) // count])
             for i in range(count)]
    if not cells:
        return ""
    low, high = min(cells), max(cells)
    span = (high - low) or 1
    return "".join(bars[(v - low) * (len(bars) - 1) // span] for v in cells)


def _value(key: str, value: Any, time_text: Callable[[int], str | None] | None) -> str:
    if key == "bytes_per_second" and isinstance(value, int):
        return f"{format_bytes(value)}/s"
    if (key.endswith("_bytes") or key.startswith("bytes_per_")
            or key.endswith("bytes_per_step")) and isinstance(value, int):
        return format_bytes(value)
    if (key.endswith("_t") or key.startswith("t_")) and isinstance(value, int) and time_text:
        return time_text(value) or str(value)
    if isinstance(value, float) and "share" in key:
        return f"{value:.0%}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


__all__ = ["FindingsScreen", "detail_text", "sparkline"]
