"""The browser mode's web server (``memtui serve``): textual-serve, guarded.

``textual-serve`` runs one ``memtui PATH`` process pair per browser tab and relays its
screen over a websocket.  As it comes, any web page the user happens to open could
connect to that websocket (browsers let pages open websockets to any address, sending
their own ``Origin``), read the screen (device names, stack frames) and type keys; every
connection starts new processes and may ask for any screen size.  :class:`GuardedServer`
keeps textual-serve's page and relay and adds:

* a secret token per run, printed with the address (as Jupyter does): the page wants it
  in its query (``/?token=...``), the websocket in its path (``/ws/TOKEN``);
* the ``Host`` of every request must be an address, ``localhost`` or the ``--host`` name
  given (a name another site's DNS rebinds to 127.0.0.1 is refused, as Jupyter does), and
  the websocket's ``Origin``, where the browser sends one, the address the page was
  served from; a plain GET on the websocket's path is answered (426), not dropped;
* at most :data:`MAX_CLIENTS` connections at once, screens of at most
  :data:`MAX_COLUMNS` x :data:`MAX_ROWS` cells (asked for at the start or in a resize);
* the page's websocket address is the one the browser came from (``--host 0.0.0.0`` or
  ``::1`` gave ``ws://0.0.0.0:...`` or an invalid URL), and the page loads no font from
  another site (the browser's monospace font is used);
* the served app gets :data:`SERVED_ENV`: it writes no file on the server (a CSV export
  becomes a browser download).

Needs the ``serve`` extra (textual-serve, which brings aiohttp): imported by the serve
command only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import logging
import re
import secrets
import signal
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

log = logging.getLogger("memtui.serve")

#: Connections served at once (each is a process pair running the UI).
MAX_CLIENTS = 4
#: The largest screen a browser may ask for.
MAX_COLUMNS, MAX_ROWS = 400, 200
#: Set in the served app's environment: it writes no file on the server.
SERVED_ENV = "MEMTUI_SERVED"
_FONT_LINK = re.compile(r"<link[^>]*fonts\.(?:googleapis|gstatic)\.com[^>]*>\s*", re.I)
_FONT_NAME = re.compile(r'"Roboto Mono",\s*')


def clamp_size(width: Any, height: Any) -> tuple[int, int]:
    """A screen size a browser asked for, within 1..MAX_COLUMNS x 1..MAX_ROWS (80x24 for
    what is not a number)."""
    def number(value: Any, default: int, most: int) -> int:
        try:
            return min(max(int(value), 1), most)
        except (TypeError, ValueError, OverflowError):
            return default

    return number(width, 80, MAX_COLUMNS), number(height, 24, MAX_ROWS)


def host_name(host: str) -> str:
    """The name or address of a ``Host`` header (its port and IPv6 brackets off)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@functools.lru_cache(maxsize=8)
def served_names(served: str) -> frozenset[str]:
    """The names a browser may give this server by: the ``--host`` given, and for a
    wildcard host (``0.0.0.0``, ``::``) this machine's own names, which memtui prints in
    the address to open (no other site's DNS answers for them)."""
    import socket

    names = {host_name(served).rstrip(".")}
    if served in ("", "0.0.0.0", "::"):
        for name in (socket.gethostname(), socket.getfqdn()):
            if name:
                names.add(name.lower().rstrip("."))
    return frozenset(n for n in names if n)


def host_allowed(host: str | None, served: str) -> bool:
    """Whether a request's ``Host`` names this server as a browser may reach it without
    a DNS rebinding: an address (``127.0.0.1``, ``[::1]``, the machine's IP: no name
    another site's DNS can point here), ``localhost`` (``*.localhost``), the ``--host``
    name the user chose to serve on, or this machine's name when serving on all
    addresses (:func:`served_names`).  A name such as ``evil.example`` rebound to
    127.0.0.1 is refused (as Jupyter does)."""
    if not host:
        return False
    name = host_name(host)
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        return True
    except ValueError:
        pass
    return name == "localhost" or name.endswith(".localhost") or \
        name.rstrip(".") in served_names(served)


def same_origin(origin: str | None, request: web.Request, served: str = "") -> bool:
    """Whether a websocket's ``Origin`` is the page's own address, itself an allowed
    host (:func:`host_allowed`); no ``Origin``: not a browser page (the token decides)."""
    if origin is None:
        return True
    origin = origin.rstrip("/")
    if origin not in (f"http://{request.host}", f"https://{request.host}"):
        return False
    return host_allowed(origin.split("://", 1)[1], served)


class GuardedServer(Server):
    """textual-serve's server with a token, an Origin check and caps (module docstring)."""

    def __init__(self, command: str, *, host: str, port: int, title: str,
                 token: str | None = None, max_clients: int = MAX_CLIENTS) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = token or secrets.token_urlsafe(24)
        self.max_clients = max_clients
        self.clients = 0

    def _token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def _make_app(self) -> web.Application:
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.guarded_index, name="index"),
            web.get("/ws/{token}", self.guarded_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        app.on_startup.append(self.on_startup)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """(textual-serve prints a logo and its own address here; memtui printed its.)"""

    def serve(self, debug: bool = False) -> None:
        """Serve until Ctrl+C (SIGINT) or SIGTERM, then stop quietly: the tabs' app
        processes are stopped while the event loop still runs (no "Event loop is closed"
        from their transports afterwards), and no access log (each line would carry the
        run's token)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self.request_exit)
        try:
            web.run_app(self._make_app(), host=self.host, port=self.port,
                        handle_signals=False, loop=loop, print=lambda *args: None,
                        access_log=None, shutdown_timeout=2)
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            if not loop.is_closed():
                loop.close()

    def _foreign_host(self, request: web.Request) -> web.Response | None:
        """The 403 for a request whose ``Host`` is not this server's (a DNS rebinding)."""
        if host_allowed(request.headers.get("Host"), self.host):
            return None
        return web.Response(status=403, text="memtui serve: open it by its address "
                                             "(127.0.0.1, localhost or the --host given)\n")

    async def guarded_index(self, request: web.Request) -> web.Response:
        foreign = self._foreign_host(request)
        if foreign is not None:
            return foreign
        if not self._token_ok(request.query.get("token")):
            return web.Response(status=403, text="memtui serve: open the address memtui "
                                                 "printed: it carries this run's token\n")
        scheme = "wss" if request.secure else "ws"
        context = {
            "font_size": clamp_size(request.query.get("fontsize", 16), 24)[0],
            "app_websocket_url": f"{scheme}://{request.host}/ws/{self.token}",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        page = aiohttp_jinja2.render_string("app_index.html", request, context)
        page = _FONT_NAME.sub("", _FONT_LINK.sub("", page))
        return web.Response(text=page, content_type="text/html",
                            headers={"Referrer-Policy": "no-referrer"})

    async def guarded_websocket(self, request: web.Request) -> web.StreamResponse:
        foreign = self._foreign_host(request)
        if foreign is not None:
            return foreign
        if not self._token_ok(request.match_info.get("token")):
            return web.Response(status=403, text="wrong token\n")
        if not same_origin(request.headers.get("Origin"), request, self.host):
            return web.Response(status=403, text="another site's page may not connect\n")
        if not web.WebSocketResponse().can_prepare(request).ok:
            return web.Response(status=426, headers={"Upgrade": "websocket"},
                                text="memtui serve: this address is the page's websocket; "
                                     "open the page instead\n")
        if self.clients >= self.max_clients:
            return web.Response(status=503, text=f"at most {self.max_clients} connections "
                                                 "at once\n")
        self.clients += 1
        try:
            return await self._relay(request)
        finally:
            self.clients -= 1

    async def _relay(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's relay between the browser and the app, sizes kept in bounds."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width, height = clamp_size(request.query.get("width"), request.query.get("height"))
        service: AppService | None = None
        try:
            await websocket.prepare(request)
            service = AppService(self.command, write_bytes=websocket.send_bytes,
                                 write_str=websocket.send_str,
                                 close=websocket.close,  # type: ignore[arg-type]
                                 download_manager=self.download_manager, debug=False)
            service._build_environment = _served_environment(  # type: ignore[method-assign]
                service._build_environment)
            await service.start(width, height)
            await self._messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # noqa: BLE001 - one tab's trouble never stops the server
            log.warning("connection ended: %s", error)
        finally:
            if service is not None:
                await service.stop()
        return websocket

    async def _messages(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                kind, data = message.json()
            except (ValueError, TypeError):
                continue
            if kind == "stdin" and isinstance(data, str):
                await service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await service.set_terminal_size(*clamp_size(data.get("width"),
                                                            data.get("height")))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()


def _served_environment(build):
    """textual-serve's environment for the app, plus :data:`SERVED_ENV`."""
    def environment(width: int = 80, height: int = 24) -> dict[str, str]:
        env = build(width=width, height=height)
        env[SERVED_ENV] = "1"
        return env

    return environment
