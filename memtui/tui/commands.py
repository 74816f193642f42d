"""What the user can ask for by name: the help (``?``: every key, its id for
keymap.toml, the screen's legend), the command palette's entries (ctrl+p: screens,
actions, the shown screen's keys) and the Capture facts view (``A``).

:class:`Commands` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it reads
``self.BINDINGS``, the shown screen's bindings and the user's keymap.
"""

from __future__ import annotations

from functools import partial

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from memtui.tui.screens import SCREEN_KEYS, SCREEN_TITLES
from memtui.tui.screens.modals import FactsScreen, HelpScreen

#: The help's words on roles (docs/roles.md says more): what each is and where it shows.
ROLE_HELP = [
    ("parameter", "weights and buffers: made by module construction or loading"),
    ("gradient", "the .grad of parameters: what a backward leaves behind"),
    ("optimizer_state", "kept by the optimizer from step to step (Adam's exp_avg...)"),
    ("activation", "made in a forward, kept into its backward"),
    ("temporary", "freed within the phase (forward, backward, between) that made it"),
    ("input", "a batch and its copy to the device, used by the next forward"),
    ("cache", "kept from one forward into the next (KV cache, cuBLAS workspace)"),
    ("other", "what no rule explains, said so; [tool.memtui.roles] rules come first"),
    ("o (Trend)", "by stack, owner, role: by role the roles are stacked, a colour each"),
    ("R (Stacks, Blocks)", "only the blocks of one role, the next role each time"),
]

LEGEND_TITLE = "Legend (colours and marks of this screen)"


class Commands:
    """See the module docstring."""

    def action_facts(self) -> None:
        """The Capture facts view: source, devices, history kept, stacks, allocator
        settings, warnings."""
        from memtui.analysis.findings.capture_facts import capture_facts

        if self.trace is not None and not isinstance(self.screen, FactsScreen):
            self.push_screen(FactsScreen(capture_facts(self.trace)))

    def action_help_quit(self) -> None:
        """ctrl+c (Textual's binding): say which keys quit, in plain words (Textual's own
        toast is Rich markup, which the app's plain-text toasts would show raw)."""
        keys = sorted((key for key, active in self.active_bindings.items()
                       if active.binding.action in ("quit", "app.quit")),
                      key=lambda key: key.startswith("ctrl+"))  # q before ^q
        if keys:
            shown = " or ".join(self.get_key_display(Binding(key, "")) for key in keys)
            self.notify(f"Press {shown} to quit the app", title="Do you want to quit?")

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_sections()))

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """(title, [(keys, description)]) for the app and the current screen."""
        screen = self.screen
        sections = [("Everywhere", _binding_rows(self, self.BINDINGS))]
        if self.follow is not None:
            sections.append(("Following", [("G", "back to the end: LIVE again"),
                                           ("R", "read the followed file again")]))
        screen_rows = _binding_rows(self, getattr(screen, "BINDINGS", []))
        focused = screen.focused
        if focused is not None:
            screen_rows += _binding_rows(self, getattr(focused, "BINDINGS", []))
        if screen_rows:
            title = SCREEN_TITLES.get(self.current_mode, "This screen")
            sections.append((f"{title} screen", screen_rows))
        sections.append(("Palette", [("ctrl+p", "the command palette: screens, actions, themes")]))
        sections.append(("Memory by role", ROLE_HELP))
        legend = getattr(screen, "legend_rows", None)
        if legend is not None:
            sections.append((LEGEND_TITLE, legend()))
        return sections

    def get_system_commands(self, screen: Screen):
        for command in super().get_system_commands(screen):
            if command.title not in ("Keys", "Screenshot"):  # ours below, once each
                yield command
        yield SystemCommand("Screenshot", "Save an SVG picture of the screen (the folder "
                            "is $XDG_PICTURES_DIR, else the current one)",
                            lambda: self.set_timer(0.1, self.deliver_screenshot))
        if not self._has_cursor(quiet=True):
            return
        for key, name in SCREEN_KEYS.items():
            yield SystemCommand(f"{SCREEN_TITLES[name]} screen ({key})",
                                f"Show the {SCREEN_TITLES[name]} screen",
                                lambda name=name: self.action_show_screen(name))
        actions = [
            ("Go to the peak", "app.peak", "Move the cursor to the allocated peak",
             self.action_peak),
            ("Go to the start", "app.start", "Move the cursor to the first event",
             self.action_start),
            ("Go to the end", "app.end", "Move the cursor to the last event", self.action_end),
            ("Zoom in", "app.zoom_in", "Zoom to the window, or in around the cursor",
             self.action_zoom_in),
            ("Zoom out", "app.zoom_out", "Show twice as much time", self.action_zoom_out),
            ("Clear the window", "app.clear_window", "Forget the selected window",
             self.action_clear_window),
            ("Switch device", "app.device", "Pick another device or rank", self.action_device),
            ("Stack top rule", "app.stack_top", "Name stacks by their innermost user frame, "
             "outermost user frame or innermost frame", self.action_stack_top),
            ("Capture facts", "app.facts", "How the capture was recorded: devices, history "
             "kept, call stacks, allocator settings, warnings", self.action_facts),
            ("Keys", "app.help", "Show every key binding (and its id for keymap.toml)",
             self.action_help),
        ]
        if self.current_mode != "tables":
            actions.append(("Export a table as CSV", "", "Show the Tables screen: C there "
                            "saves every shown row to a CSV file, c copies the rows on screen",
                            partial(self.action_show_screen, "tables")))
        by_id = {b.id: b for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        for title, binding_id, help_text, callback in actions:
            keys = key_display(self, by_id[binding_id]) if binding_id in by_id else ""
            yield SystemCommand(f"{title} ({keys})" if keys else title, help_text, callback)
        yield from self._screen_commands(screen)

    def _screen_commands(self, screen: Screen):
        """A palette entry for each key of the screen shown (its description and keys)."""
        mode = SCREEN_TITLES.get(self.current_mode, "")
        for binding in getattr(screen, "BINDINGS", []):
            if not isinstance(binding, Binding) or not binding.description:
                continue
            keys = key_display(self, binding)
            said = getattr(screen, "PALETTE_HELP", {}).get(binding.id) or \
                f"{binding.description}: the {mode} screen's {keys}"
            yield SystemCommand(f"{mode}: {binding.description} ({keys})", said,
                                partial(screen.run_action, binding.action))


def _binding_rows(app: App, bindings) -> list[tuple[str, str, str]]:
    """(keys as the user's keymap sets them, description, binding id) of ``bindings``."""
    rows = []
    for binding in bindings:
        if not isinstance(binding, Binding) or not binding.description:
            continue  # a binding without a description is an internal one: never raw names
        rows.append((key_display(app, binding), binding.description, binding.id or ""))
    return rows


def key_display(app: App, binding: Binding) -> str:
    """The keys of ``binding`` as shown (``↑, k``), the user's keymap applied."""
    keys = getattr(app, "_keymap", {}).get(binding.id, binding.key) if binding.id else \
        binding.key
    return ", ".join(app.get_key_display(Binding(key, "")) for key in keys.split(","))


__all__ = ["LEGEND_TITLE", "Commands", "key_display"]
