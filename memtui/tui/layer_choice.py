"""The memory layer shown of a layered source (msMemScope: PTA, HAL, ...): the user's
choice per device, the view of the capture it gives, and ``t`` that cycles it.

:class:`LayerChoice` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it keeps
``self.full_trace`` (the whole capture) and ``self.layers`` (the layer per device), and
shows a new layer with ``self.replace_trace`` (memtui.tui.follow).  The views themselves
are built by memtui.analysis.timeline.layers (called through the module, so that one patch of it
is seen everywhere).
"""

from __future__ import annotations

from memtui.analysis.timeline import layers as layer_analysis
from memtui.model import MemoryTrace


class LayerChoice:
    """See the module docstring."""

    def layer_choice(self, trace: MemoryTrace) -> dict[str, str]:
        """The memory layer each device of a layered ``trace`` is shown with: the user's
        choice while the capture still has it, else the default.  Reads only: the
        follower calls it in its worker to build the view beside the trace."""
        chosen = layer_analysis.default_layers(trace)
        for device, layer in dict(self.layers).items():
            if device in chosen and layer in layer_analysis.layers_of(trace, device):
                chosen[device] = layer
        return chosen

    def view_beside(self, trace: MemoryTrace) -> MemoryTrace | None:
        """The view of a layered ``trace`` in the layers chosen now, None for a source
        without layers.  Reads only: a worker or the loader builds it beside the trace
        shown, and :meth:`_layered` takes it in the UI thread."""
        if not layer_analysis.has_layers(trace) or "layers" in trace.meta.extra:
            return None
        return layer_analysis.layer_view(trace, self.layer_choice(trace))

    def _layered(self, trace: MemoryTrace, view: MemoryTrace | None = None) -> MemoryTrace:
        """``trace`` as the chosen memory layer of each device shows it (layered sources;
        others, or a view already, come back as they are); ``view``, built beside it in a
        worker, is taken where it shows the layers chosen now."""
        if not layer_analysis.has_layers(trace) or "layers" in trace.meta.extra:
            return trace
        self.full_trace = trace
        chosen = self.layer_choice(trace)
        self.layers = chosen
        if view is not None and view.meta.extra.get("layers") == chosen:
            return view
        return layer_analysis.layer_view(trace, chosen)

    def layer_label(self, device: str) -> str | None:
        """The memory layer shown for ``device`` (None for a source without layers)."""
        return self.layers.get(device) if self.full_trace is not None else None

    def action_cycle_layer(self) -> None:
        """Show the next memory layer of the cursor's device (msMemScope: PTA, HAL, ...)."""
        if not self._has_cursor():
            return
        device = self.cursor.device
        if self.full_trace is None:
            self.notify("This capture has one memory layer.")
            return
        layers = layer_analysis.layers_of(self.full_trace, device)
        if len(layers) < 2:
            self.notify(f"{device} has one memory layer: {', '.join(layers) or 'none'}.")
            return
        current = self.layers.get(device, layers[0])
        self.layers[device] = layers[(layers.index(current) + 1) % len(layers)] \
            if current in layers else layers[0]
        self.replace_trace(layer_analysis.layer_view(self.full_trace, self.layers))
        self.notify(f"{device}: memory layer {self.layers[device]}", timeout=3)


__all__ = ["LayerChoice"]
