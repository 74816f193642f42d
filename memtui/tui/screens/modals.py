"""The small screens around the five views: loading, the device picker, the key help."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Center, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from memtui.errors import printable
from memtui.tui.keymap import keymap_path


class LoadingScreen(Screen):
    """The file's name, a progress bar and the loader's last message; q or Ctrl+C quits."""

    BINDINGS = [Binding("ctrl+c", "app.quit", "Quit", show=False, priority=True)]

    def __init__(self, name: str) -> None:
        super().__init__()
        self.file_name = name
        self._last_report = -1e9
        self._held: tuple[float, str] | None = None  # the newest report not yet shown

    def compose(self) -> ComposeResult:
        with Center(id="loading-box"):
            yield Static(Text.assemble(("memtui", "bold"), "  loading ", (self.file_name,
                                                                            "bold")),
                         id="loading-title")
            yield ProgressBar(total=100, show_eta=False, id="loading-bar")
            yield Static("", id="loading-message")

    class Progress(Message):
        """A loader thread's report (posted: the loader never waits for the screen)."""

        def __init__(self, fraction: float, message: str) -> None:
            super().__init__()
            self.fraction, self.message = fraction, message

    #: A loader's reports are shown at most this often (each costs the screen a paint;
    #: a 10M-row read reports every chunk).
    REPORT_EVERY_S = 0.1

    def set_progress(self, fraction: float, message: str) -> None:
        self.query_one(ProgressBar).update(progress=max(0.0, min(fraction, 1.0)) * 100)
        self.query_one("#loading-message", Static).update(Text(message))

    def report_from_thread(self, fraction: float, message: str) -> None:
        """A loader thread's ``progress`` callback: posted without waiting for the app's
        loop (``call_from_thread`` would hold the loader up a paint per report), at most
        every :attr:`REPORT_EVERY_S` but the last (``fraction`` 1.0); a report held back
        is shown at the next tick (a phase's first words stay, however long it runs)."""
        now = time.monotonic()
        if fraction < 1.0 and now - self._last_report < self.REPORT_EVERY_S:
            self._held = (fraction, message)
            return
        self._last_report, self._held = now, None
        self.post_message(self.Progress(fraction, message))

    def on_mount(self) -> None:
        self.set_interval(self.REPORT_EVERY_S, self._show_held)

    def _show_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self.set_progress(*held)

    def on_loading_screen_progress(self, report: Progress) -> None:
        self.set_progress(report.fraction, report.message)


class DeviceScreen(ModalScreen[str | None]):
    """Pick a device or rank: Enter picks, Escape keeps the current one."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, choices: list[tuple[str, str]], current: str) -> None:
        super().__init__()
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="device-box"):
            yield Static("Device or rank (Enter to pick, Esc to cancel)", classes="modal-title")
            # Device names come from the file: plain Text, never markup.
            yield OptionList(*[Option(Text(label), id=name) for name, label in self.choices],
                             id="device-list")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = [name for name, _ in self.choices]
        if self.current in names:
            options.highlighted = names.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(message.option.id)


MOUSE_HELP = (
    ("click", "Trend: set the cursor; Blocks: select the band and move the cursor there; "
              "Pool: select the block (or segment); Stacks: open/close a node (double: its "
              "blocks); Tables: highlight a row (double click: go to it)"),
    ("drag", "Trend, Blocks: select a window; Blocks' slider: pan the view (drag the shade) "
             "or choose a new one"),
    ("wheel", "Trend, Blocks: zoom around the pointer; Pool, Stacks, Tables: scroll"),
    ("header click", "Tables: sort by that column"),
)


class HelpScreen(ModalScreen[None]):
    """Every key binding of the app and of the current screen, and the mouse."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, expand=True, pad_edge=False)
        table.add_column("key", style="bold", no_wrap=True, width=16)
        table.add_column("what", ratio=1)
        table.add_column("id", style="dim", no_wrap=True)  # the id keymap.toml names
        for title, rows in [*self.sections, ("Mouse", list(MOUSE_HELP))]:
            table.add_row(Text(title, style="bold underline"), "")
            legend = title.startswith("Legend")  # samples are Rich markup
            for key, what, *binding_id in rows:
                table.add_row(Text.from_markup(key) if legend else Text(key), Text(what),
                              Text(binding_id[0] if binding_id else ""))
            table.add_row("", "")
        with VerticalScroll(id="help-box"):
            yield Static("Keys (Esc, q or ? to close).  Change them in "
                         f"{printable(str(keymap_path()))}: binding id = \"keys\"",
                         classes="modal-title", markup=False)
            yield Static(table)


class FactsScreen(ModalScreen[None]):
    """What the capture says about how it was recorded (analysis.capture_facts)."""

    BINDINGS = [Binding("escape,q,A", "dismiss(None)", "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, expand=True, pad_edge=False)
        table.add_column("name", style="bold", no_wrap=True, max_width=40)
        table.add_column("value", ratio=1)
        for title, rows in self.sections:
            table.add_row(Text(title, style="bold underline"), "")
            for name, value in rows:
                table.add_row(Text(printable(name)), Text(printable(value)))
            table.add_row("", "")
        with VerticalScroll(id="help-box"):
            yield Static("Capture facts (Esc, q or A to close)", classes="modal-title")
            yield Static(table)
