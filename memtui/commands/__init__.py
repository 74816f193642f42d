"""One module per ``memtui`` subcommand; ``memtui.cli`` only dispatches to them.

A command module exposes ``HELP`` (one line for ``memtui --help``),
``add_arguments(parser)`` and ``run(args) -> int``.  Modules import their heavy
dependencies (polars, textual, the sources) inside ``run`` so that ``memtui --help``
stays fast.  Every command raises :class:`memtui.errors.CaptureError` for bad input;
``memtui.cli.main`` turns it into the one line on stderr and exit status 2.
"""

from __future__ import annotations

#: Subcommand name -> module under ``memtui.commands`` (imported on use).
COMMANDS: dict[str, str] = {
    "summary": "memtui.commands.summary",
    "state": "memtui.commands.state",
    "findings": "memtui.commands.findings",
    "compare": "memtui.commands.compare",
    "check": "memtui.commands.check",
    "report": "memtui.commands.report",
    "export": "memtui.commands.export",
    "record": "memtui.commands.record",
    "cache": "memtui.commands.cache",
    "serve": "memtui.commands.serve",
    "whatif": "memtui.commands.whatif",
    "mcp": "memtui.commands.mcp",
}
