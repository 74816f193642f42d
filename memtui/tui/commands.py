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
        settings, warnings (the capture's, then the app's own: the keymap's)."""
        from memtui.analysis.findings.capture_facts import capture_facts

        if self.trace is not None and not isinstance(self.screen, FactsScreen):
            sections = capture_facts(self.trace)
            if self.app_warnings:
                sections.append(("memtui", [(str(i + 1), text) for i, text
                                            in enumerate(self.app_warnings)]))
            self.push_screen(FactsScreen(sections))

    def warnings_said(self) -> list[str]:
        """Every warning the status bar counts: the capture's, then the app's own."""
        said = list(self.trace.meta.warnings) if self.trace is not None else []
        return said + self.app_warnings

    def add_warning(self, text: str) -> None:
        """A warning of the app's own (the keymap): counted on the status bar, listed by
        the Capture facts, never a popup over the figures."""
        self.app_warnings.append(text)
        for bar in self.screen.query("StatusBar"):
            bar.refresh(layout=True)

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
        """(title, [(keys, description, binding id)]) of what each key does now: the app's
        keys, then the shown screen's (its widgets' too), each key once, under the binding
        it reaches (a key a widget takes, such as the Tables' arrows, is listed there and not
        under the app's); then the palette, the status bar's abbreviations, the legend."""
        from memtui.tui.widgets.status import ABBREVIATIONS

        screen = self.screen
        everywhere, here = _active_rows(self, screen)
        sections = [("Everywhere", everywhere)]
        if here:
            title = SCREEN_TITLES.get(self.current_mode, "This screen")
            sections.append((f"{title} screen", here))
        sections.append(("Palette", [("ctrl+p", "the command palette: screens, actions, themes")]))
        sections.append(("Memory by role", ROLE_HELP))
        sections.append(("Status bar", list(ABBREVIATIONS)))
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


#: Textual's own bindings the help leaves out: focus moves, copying selected text, and the
#: palette's key (a row of its own).
_UNLISTED_ACTIONS = {"app.focus_next", "app.focus_previous", "focus_next", "focus_previous",
                     "screen.copy_text", "command_palette"}


def _active_rows(app: App, screen: Screen) -> tuple[list[tuple[str, str, str]],
                                                     list[tuple[str, str, str]]]:
    """(keys, description, binding id) rows of the app's keys and of the screen's (with its
    focused widgets', after the screen's own), from the binding each key reaches now: every
    key once, the keys of one description in one row, in the order the code lists them."""
    rows: dict[tuple[bool, str], list] = {}  # (the app's?, description) -> order, keys, id
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if not binding.description or binding.action in _UNLISTED_ACTIONS:
            continue
        own = active.node is app
        order = _listed_at(active.node, binding, screen)
        row = rows.setdefault((own, binding.description), [order, [], binding.id or ""])
        row[0] = min(row[0], order)
        row[1].append(key)
        row[2] = row[2] or binding.id or ""  # ^q (Textual's, no id) joins q's app.quit
    ordered = sorted(rows.items(), key=lambda item: item[1][0])
    return tuple([(_keys_shown(app, keys), description, binding_id)  # type: ignore[return-value]
                  for (is_app, description), (_, keys, binding_id) in ordered
                  if is_app == own] for own in (True, False))


def _listed_at(node, binding: Binding, screen: Screen) -> tuple[int, int]:
    """Where ``binding`` stands: the app's and the screen's keys first, then the focused
    widgets', each in the order of its own list."""
    own = [b for b in getattr(type(node), "BINDINGS", []) if isinstance(b, Binding)]
    place = next((i for i, b in enumerate(own) if (b.id and b.id == binding.id)
                  or (b.action, b.description) == (binding.action, binding.description)),
                 len(own))
    return (0 if node is screen or node is screen.app else 1, place)


def _keys_shown(app: App, keys: list[str]) -> str:
    """Keys as shown, plain ones before those with a modifier (``q, ^q``)."""
    keys = sorted(keys, key=lambda key: "+" in key)
    return ", ".join(app.get_key_display(Binding(key, "")) for key in keys)


def key_display(app: App, binding: Binding) -> str:
    """The keys of ``binding`` as shown (``↑, k``), the user's keymap applied."""
    keys = getattr(app, "_keymap", {}).get(binding.id, binding.key) if binding.id else \
        binding.key
    return ", ".join(app.get_key_display(Binding(key, "")) for key in keys.split(","))


__all__ = ["LEGEND_TITLE", "Commands", "key_display"]
