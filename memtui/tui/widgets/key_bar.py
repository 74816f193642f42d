"""The key bar at the foot of every screen: the screen's shown keys that fit the width, and
always Help and Quit.

Textual's ``Footer`` lays out every shown binding and lets the last ones run off the edge,
which at 80 columns cut ``? Help`` and ``q Quit``.  :class:`KeyBar` is that footer, keeping
the keys that fit: Help and Quit always, then the others in the footer's order (the
focused widget's, the screen's, the app's) until the width is used, the palette's
``^p palette`` last where there is room.  Keys left out are in the help (``?``) and the
command palette (``^p``).  It lays itself out again when the terminal is resized.

Any screen adds it with ``yield KeyBar(compact=True)``.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: Actions whose keys the bar always shows.
ALWAYS = ("help", "app.help", "quit", "app.quit")
#: Cells around a key in the compact footer: the space between key and label, the margin.
KEY_EXTRA = 2
#: ``^p palette``: its key, label, border and space.
PALETTE_CELLS = 12


def key_cells(display: str, description: str) -> int:
    """The cells one key takes in the compact bar."""
    return cell_len(display) + cell_len(description) + KEY_EXTRA


def fitting(keys: list[tuple[str, str, str]], width: int) -> tuple[list[int], bool]:
    """Which of ``keys`` (display, description, action) fit ``width`` cells, by index, in
    their order: those of :data:`ALWAYS` first, then the others from the first; and whether
    the palette's key fits beside them."""
    kept = [i for i, (_, _, action) in enumerate(keys) if action in ALWAYS]
    used = sum(key_cells(display, text) for display, text, _ in (keys[i] for i in kept))
    for index, (display, text, _) in enumerate(keys):
        if index in kept:
            continue
        cells = key_cells(display, text)
        if used + cells + PALETTE_CELLS > width:
            break
        kept.append(index)
        used += cells
    return sorted(kept), used + PALETTE_CELLS <= width


class KeyBar(Footer):
    """See the module docstring."""

    def compose(self):
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        first: dict[str, tuple[Binding, bool, str]] = {}
        for _node, binding, enabled, tooltip in sorted(active.values(), key=self._listed_at):
            if binding.show:
                first.setdefault(binding.action, (binding, enabled, tooltip))
        shown = list(first.values())
        keys = [(self.app.get_key_display(binding), binding.description, binding.action)
                for binding, _, _ in shown]
        width = self.size.width or self.app.size.width
        kept, palette = fitting(keys, width)
        for index in kept:
            binding, enabled, tooltip = shown[index]
            yield FooterKey(binding.key, keys[index][0], binding.description, binding.action,
                            disabled=not enabled,
                            tooltip=tooltip).data_bind(compact=Footer.compact)
        if palette and self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = active[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            yield FooterKey(binding.key, self.app.get_key_display(binding),
                            binding.description, binding.action, classes="-command-palette",
                            disabled=not enabled,
                            tooltip=binding.tooltip or binding.description)

    def _listed_at(self, active) -> tuple[bool, int]:
        """The screen's and widgets' keys first, in the order found, then the app's in the
        order of its bindings before the user's keymap: a key the keymap moved keeps its
        binding's place (``P`` for Peak stays where ``p`` was, not after every other key)."""
        node, binding = active[0], active[1]
        if node is not self.app or binding.priority:  # Textual lists priority keys first
            return (False, 0)
        merged = type(node)._merged_bindings  # the class's keys before the keymap moved any
        own = [] if merged is None else \
            [b for bindings in merged.key_to_bindings.values() for b in bindings]
        same = (lambda b: b.id == binding.id) if binding.id else \
            (lambda b: (b.key, b.action) == (binding.key, binding.action))
        return (True, next((i for i, b in enumerate(own) if same(b)), len(own)))

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != getattr(self, "_laid_out_for", None):
            self._laid_out_for = event.size.width
            if self._bindings_ready:
                self.call_after_refresh(self.recompose)
