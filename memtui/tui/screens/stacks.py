"""Screen 4, Stacks: the flame stack tree of bytes by call stack; for traces with Python
calls (msMemScope), the time-axis call flame of a thread.

The tree counts the blocks live at the cursor (``m`` switches to the peak of allocated,
then to the blocks allocated during the window, or the view without one).  ``up``/
``down`` (``k``/``j``) move, ``enter``/``space`` open and close, ``/`` searches frames
(``n``/``N``: next and previous match), ``f`` filters the Block table to the chosen
node's blocks; the tree opens on the user's own Python frames (no interpreter,
torch-internal, library or C++ frames; a stack without one is named as every screen names
it: the autograd node of a backward allocation) and ``u`` shows every frame.  The root is
the level (the status bar's): the bytes no block explains hang under it as their own nodes
("alive before the capture", "in no operator").  Profiler captures open by operator
(``O``: by owner layer).  Each node
says its bytes, share of all, and from 100 columns its self bytes, blocks and share of
its parent.  ``R`` counts only the blocks of one role (memory by role), the next role each
time.  ``v`` shows the call flame instead, ``e`` picks its thread (``t`` stays the
app's memory layer), and ``pageup``/``pagedown`` scroll its depth.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from memtui.analysis.roles import ROLE_LABELS, ROLES, block_roles, role_codes
from memtui.analysis.stacks.call_flame import CallFlame, threads
from memtui.analysis.stacks.owner_tree import OwnerTree, owner_tree
from memtui.analysis.stacks.stack_tree import BEFORE_STACK, MODES, ROOT, StackTree, block_rows_for
from memtui.analysis.timeline.attribution import Remainder, groups_by_operator, remainder_rows
from memtui.analysis.timeline.live import DeviceIndex, cached, device_index
from memtui.errors import printable
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState
from memtui.tui.screens.linked import LinkedScreen
from memtui.tui.widgets import paint
from memtui.tui.widgets.call_flame import CallFlameView
from memtui.tui.widgets.stack_tree import StackTreeView, heading
from memtui.units import counted, format_bytes

MODE_NAMES = {"cursor": "live at the cursor", "peak": "live at the peak",
              "window": "allocated in the window"}



def stack_analyses(trace: MemoryTrace, device: str, user_only: bool = False) -> tuple:
    """The device index, the stack tree (of every frame, or of the user's own only), the
    threads with calls and the first thread's call flame (shared cache)."""
    index = device_index(trace, device)
    tree = cached(trace, ("stack_tree", user_only),
                  lambda: StackTree(trace, user_only=user_only))
    names = threads(trace, device)
    flame = None
    if names:
        flame = cached(trace, ("flame", device, names[0]),
                       lambda: CallFlame(trace, names[0], device))
    return index, tree, names, flame


class StacksScreen(LinkedScreen):
    """The stack tree and the call flame (see the module docstring)."""

    NAME = "stacks"
    SEARCH_PLACEHOLDER = "frame name or file"
    DEFAULT_CSS = """
    StacksScreen #status-line { height: auto; max-height: 2; }
    StacksScreen #tree-heading { height: 1; color: $text-muted; text-style: bold; }
    StacksScreen.-flame #tree-heading { display: none; }
    StacksScreen #detail { height: 5; border-top: solid $primary-darken-2; padding: 0 1; }
    StacksScreen CallFlameView { display: none; }
    StacksScreen.-flame CallFlameView { display: block; }
    StacksScreen.-flame StackTreeView { display: none; }
    """
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False, id="stacks.move_minus_1"),
        Binding("down,j", "move(1)", "Down", show=False, id="stacks.move_1"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="stacks.page_minus_1"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="stacks.page_1"),
        Binding("enter,space", "toggle", "Open/close", id="stacks.toggle"),
        Binding("m", "mode", "Mode", id="stacks.mode"),
        Binding("slash", "search", "Search", id="stacks.search"),
        Binding("n", "match(1)", "Next match", show=False, id="stacks.match_1"),
        Binding("N", "match(-1)", "Prev match", show=False, id="stacks.match_minus_1"),
        Binding("f", "filter_blocks", "Filter blocks", id="stacks.filter_blocks"),
        Binding("v", "flame", "Call flame", id="stacks.flame"),
        Binding("e", "thread", "Thread", show=False, id="stacks.thread"),
        Binding("O", "owners", "Owner layers", show=False, id="stacks.owners"),
        Binding("u", "user_frames", "User frames", id="stacks.user_frames"),
        Binding("R", "role", "Role", id="stacks.role"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.mode = "cursor"
        self.user_only = True  # the user's own Python frames; u: every frame
        self.by_owner = False  # O: bytes by memory layer and owner instead of call stack
        self.by_owner_chosen: bool | None = None  # set once O is pressed
        self.owners: OwnerTree | None = None
        self.index: DeviceIndex | None = None
        self.match_list: list[int] = []
        self.match_at = -1
        self.thread_names: list[str] = []
        self.thread_at = 0
        self.flame: CallFlame | None = None
        self.rows_counted = np.zeros(0, dtype=np.int64)
        self.rest: list[Remainder] = []  # the counted level's bytes in no block
        self.taken_at: int | None = None
        self.role: str | None = None  # r: only the blocks of one role (memory by role)
        self.role_codes = np.zeros(0, dtype=np.int64)

    def compose(self) -> ComposeResult:
        yield from self.compose_layout("tree-heading")

    @staticmethod
    def warm(trace: MemoryTrace, device: str) -> None:
        stack_analyses(trace, device, user_only=True)  # the tree it opens on

    def prepare(self, device: str) -> None:
        if self.by_owner_chosen is None:  # profiler captures: by operator unless asked
            self.by_owner = groups_by_operator(self.trace)
        self.index, self.stack_tree, self.thread_names, self.flame = stack_analyses(
            self.trace, device, self.user_only)
        self.owners = None
        if self.by_owner:
            trace, blocks = self.trace, self.index.blocks
            self.owners = cached(trace, ("owner_tree", device),
                                 lambda: owner_tree(trace, blocks))
            self.stack_tree = self.owners.tree
        self.thread_at = 0
        self.role_codes = (role_codes(self.trace, device, self.index.block_id)
                           if self.role is not None else np.zeros(0, dtype=np.int64))

    async def build(self) -> None:
        await self.query("StackTreeView, CallFlameView").remove()
        self.tree_view = StackTreeView(self.stack_tree, id="stack-tree")
        widgets = [self.tree_view]
        if self.flame is not None:
            self.flame_view = CallFlameView(self.flame, id="call-flame")
            widgets.append(self.flame_view)
        await self.main_area().mount(*widgets, before=self.query_one("#detail"))
        self.tree_view.focus()

    def main_widget(self) -> Widget:
        return self.tree_view

    # -- following the cursor -----------------------------------------------------------------

    def follow(self, old: CursorState | None, new: CursorState) -> None:
        if self.flame is not None:
            self.flame_view.show(new)
        mode_moves = self.mode == "cursor" or (self.mode == "window" and (
            old is None or old.window != new.window or old.view != new.view))
        if old is None or mode_moves or old.device != new.device:
            self._recount(new)
        self._header(new)
        self._details()
        self._take_stack_request()

    def on_screen_resume(self) -> None:
        """(Textual runs LinkedScreen's handler too, after this one: a stale screen
        recounts there and takes the request in :meth:`follow`.)"""
        if not self._stale:
            self._take_stack_request()

    # -- selecting a node from outside (Findings, compare mode) ---------------------------

    @property
    def ready(self) -> bool:
        """The tree is built and counted: :meth:`select_stack` and :meth:`select_label`
        act at once."""
        return self._ready

    def select_stack(self, stack_id: int, frame_id: int | None = None) -> bool:
        """Select the node of stack ``stack_id`` that shows frame ``frame_id`` (the stack's
        deepest shown node where none does), opening its parents; False where the tree is
        not ready or the stack is not in it."""
        if not self._ready or self.has_class("-flame"):
            return False
        tree = self.stack_tree
        nodes = tree.pair_node[(tree.pair_stack == stack_id) & (tree.pair_node > 0)]
        if nodes.size == 0:
            return False
        named = nodes[tree.frame[nodes] == frame_id] if frame_id is not None else nodes[:0]
        node = int(named[0] if named.size else nodes[np.argmax(tree.depth[nodes])])
        self.tree_view.select(node)
        self._header(self.cursor)
        self._details()
        return True

    def select_label(self, label: str) -> bool:
        """Search the function of ``label`` (``name (file:line)``, as the findings and the
        diff name frames) and select the match that is this very frame, not the largest
        of that name; False where none holds bytes here."""
        if not self._ready:
            return False
        self.search(label.split(" (")[0])
        # a frame reads ``name  file:line`` in the tree; a name that is no frame (an
        # autograd node, a forward line) reads as the findings and the diff say it
        wanted = {label, label.replace(" (", "  ", 1).removesuffix(")")}
        for index, node in enumerate(self.match_list):
            if self.stack_tree.label(node) in wanted:
                self.match_at = index - 1
                self.action_match(1)
                return True
        return False

    def _take_stack_request(self) -> None:
        """Select the node the app was asked to show (``app.stack_request``: device,
        stack id, frame id), once ready on that device."""
        request = getattr(self.app, "stack_request", None)
        if request is None or not self._ready or request[0] != self.device:
            return
        self.app.stack_request = None  # type: ignore[attr-defined]
        self.select_stack(request[1], request[2])

    def _recount(self, cursor: CursorState) -> None:
        window = cursor.window or cursor.view
        rows, self.taken_at = block_rows_for(self.trace, self.index, self.mode, cursor.t,
                                             window, event=cursor.event)
        if self.role is not None and self.role_codes.size == self.index.block_id.size:
            rows = rows[self.role_codes[rows] == ROLES.index(self.role)]
        self.rows_counted = rows
        ix = self.index
        if self.owners is not None:
            paths = self.owners.codes[rows]
        else:  # ghosts under "alive before the capture", as the peak finding names them
            paths = np.where(ix.ghost[rows], BEFORE_STACK, ix.stack_id[rows])
        sizes = ix.size[rows]
        rest = self.rest = self._rest(cursor, int(sizes.sum()))
        self.tree_view.show(self.stack_tree.figures(paths, sizes, rest))

    def _rest(self, cursor: CursorState, counted: int) -> list[Remainder]:
        """The named bytes of the level (at the cursor's event, or the peak) that the
        counted blocks do not explain: the tree's root is then the status bar's level."""
        timeline_of = getattr(self.app, "timeline", None)
        if self.mode == "window" or timeline_of is None or self.role is not None:
            return []
        timeline = timeline_of(self.device)
        if self.mode == "peak":
            level = timeline.peak
        elif cursor.event is not None:
            level = timeline.levels_at_event(cursor.event).allocated
        else:
            level = timeline.levels_at(cursor.t).allocated
        return remainder_rows(self.trace, self.device, level, counted)

    def _header(self, cursor: CursorState) -> None:
        trace, origin = self.trace, self.index.t_start
        figures = self.tree_view.figures
        total = format_bytes(figures.total) if figures is not None else "-"
        if self.mode == "window":
            t0, t1 = cursor.window or cursor.view
            when = (f"{paint.format_time(trace, t0, origin, 3)} .. "
                    f"{paint.format_time(trace, t1, origin, 3)}")
        else:
            when = paint.format_time(trace, self.taken_at, origin)
        text = (f"[b]Stacks[/b] {paint.plain(cursor.device)}  {total} "
                f"{MODE_NAMES[self.mode]} {when}"
                f" in {counted(self.rows_counted.size, 'block')} (m)")
        unexplained = sum(r.bytes for r in self.rest)
        if unexplained:
            text += f", {format_bytes(unexplained)} of it in no block"
        if self.role is not None:
            text += f"  [b]role {ROLE_LABELS[self.role]}[/b] (R)"
        if self.owners is not None:
            text += "  [b]by owner layer[/b] (O: by call stack)"
        else:
            text += ("  [b]user frames[/b] (u: all)" if self.user_only
                     else "  [b]all frames[/b] (u: user)")
        if self.match_list:
            text += f"  [b]{counted(len(self.match_list), 'match')}[/b]"
        if self.has_class("-flame") and self.flame is not None:
            text = (f"[b]Call flame[/b] thread {paint.plain(self.flame.thread)} "
                    f"({len(self.thread_names)} threads, e: next)  depth from "
                    f"{self.flame_view.first_depth}  {len(self.flame.name):,} calls")
        self.query_one("#status-line", Static).update(text)
        self.query_one("#tree-heading", Static).update(heading(self.size.width))

    def _details(self) -> None:
        detail = self.query_one("#detail", Static)
        if self.has_class("-flame") and self.flame is not None:
            chain = self.flame.stack_at(self.cursor.t)
            names = " > ".join(self.flame.label(c) for c in chain) or "(no call open)"
            detail.update(Text(f"at the cursor: {printable(names)}"))
            return
        node = self.tree_view.selected
        figures = self.tree_view.figures
        if figures is None:
            return
        path = [self.stack_tree.label(n) for n in self.stack_tree.ancestors(node)[1:]] + [
            self.stack_tree.label(node)]
        share = figures.bytes[node] / max(figures.total, 1)
        parent = int(self.stack_tree.parent[node])
        of_parent = (f", {figures.bytes[node] / max(int(figures.bytes[parent]), 1):.1%} of "
                     "its parent") if parent >= 0 else ""
        detail.update(
            f"[b]{format_bytes(int(figures.bytes[node]))}[/b] ({share:.1%} of all{of_parent})"
            f" in {counted(int(figures.blocks[node]), 'block')}, self "
            f"{format_bytes(int(figures.self_bytes[node]))}   f: filter the Block table\n"
            + "\n".join("  " * min(k, 8) + paint.plain(p) for k, p in enumerate(path[-4:])))

    # -- keys ---------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        if self._ready and not self.has_class("-flame"):
            self.tree_view.move(step)
            self._details()

    def action_page(self, step: int) -> None:
        if not self._ready:
            return
        if self.has_class("-flame") and self.flame is not None:
            self.flame_view.scroll_depth(step * max(self.flame_view.size.height - 1, 1))
            self._header(self.cursor)
        else:
            self.tree_view.move(step * max(self.tree_view.size.height - 1, 1))
            self._details()

    def action_toggle(self) -> None:
        if self._ready and not self.has_class("-flame"):
            self.tree_view.toggle()
            self._details()

    def action_role(self) -> None:
        """Count only the blocks of one role (memory by role), the next role present each
        time, then every block again."""
        if not self._ready or self.has_class("-flame"):
            return
        present = [r for r in ROLES if r in set(block_roles(self.trace, self.device).frame[
            "role"].cast(str).to_list())]
        later = present[present.index(self.role) + 1:] if self.role in present else present
        self.role = later[0] if later and (self.role is None or self.role in present) \
            else None
        self.role_codes = (role_codes(self.trace, self.device, self.index.block_id)
                           if self.role is not None else np.zeros(0, dtype=np.int64))
        self._recount(self.cursor)
        self._header(self.cursor)
        self._details()

    def action_mode(self) -> None:
        if not self._ready:
            return
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self._recount(self.cursor)
        self._header(self.cursor)
        self._details()

    def search(self, text: str) -> None:
        found = self.stack_tree.search(text)
        figures = self.tree_view.figures
        if figures is not None:
            found = found[figures.bytes[found] > 0]
        self.match_list = [int(n) for n in found[np.argsort(-figures.bytes[found],
                                                            kind="stable")]]
        self.tree_view.set_matches(found)
        if not self.match_list:
            self.notify(f"no frame with {text!r} holds bytes here", severity="warning")
            self._header(self.cursor)
            return
        self.tree_view.reveal(self.match_list)
        self.match_at = -1
        self.action_match(1)

    def action_match(self, step: int) -> None:
        if not self.match_list:
            return
        self.match_at = (self.match_at + step) % len(self.match_list)
        self.tree_view.select(self.match_list[self.match_at])
        self._header(self.cursor)
        self._details()

    def action_filter_blocks(self) -> None:
        if not self._ready:
            return
        node = self.tree_view.selected
        if self.owners is not None:
            rows = self.owners.block_rows_under(node, self.rows_counted)
        else:
            rows = self.stack_tree.block_rows_under(node, self.index, self.rows_counted,
                                                    ghosts_apart=True)
        block_ids = self.index.block_id[rows]
        label = "all blocks" if node == ROOT else self.stack_tree.label(node)
        apply = getattr(self.app, "filter_blocks", None)
        if apply is None:
            self.notify("the Block table cannot be filtered from here", severity="warning")
            return
        apply(block_ids, f"{label} ({MODE_NAMES[self.mode]})")

    def action_owners(self) -> None:
        """Bytes by memory layer and owner (Insight's disassembly), or by call stack."""
        if not self._ready:
            return
        self.by_owner = self.by_owner_chosen = not self.by_owner
        self._start(self.cursor.device)

    def action_user_frames(self) -> None:
        """Show every frame, or only the user's own Python frames again."""
        if not self._ready:
            return
        self.user_only = not self.user_only
        self._start(self.cursor.device)  # the tree of the other kind, then redrawn

    def action_flame(self) -> None:
        if self.flame is None:
            self.notify("this capture has no Python call trace")
            return
        self.toggle_class("-flame")
        self._header(self.cursor)
        self._details()
        (self.flame_view if self.has_class("-flame") else self.tree_view).focus()

    def action_thread(self) -> None:
        if self.flame is None or len(self.thread_names) < 2:
            return
        self.thread_at = (self.thread_at + 1) % len(self.thread_names)
        thread, trace, device = self.thread_names[self.thread_at], self.trace, self.device
        self.flame = cached(trace, ("flame", device, thread),
                            lambda: CallFlame(trace, thread, device))
        self.flame_view.show(self.cursor, self.flame)
        self._header(self.cursor)
        self._details()

    def on_stack_tree_view_chosen(self, message: StackTreeView.Chosen) -> None:
        self.action_filter_blocks()
