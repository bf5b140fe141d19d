"""`git obversa web`: a local, read-only page over one repository.

A standard-library HTTP server on 127.0.0.1 serves the page (`static/`, shipped in the
wheel, no build step and nothing from another host) and a small JSON API the page calls.
Only GET and HEAD are answered, and nothing handled here writes to the repository.

The server is reachable from this machine only, but any page open in the user's browser
could still ask it for data: a request whose `Host` is not this server's own address
(DNS rebinding) or whose `Origin` is another site's is refused with 403, and every
response forbids framing and cross-origin embedding.
"""

from __future__ import annotations

import json
import mimetypes
import sys
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from git_obversa.web import views

STATIC = Path(__file__).parent / "static"
LOOPBACK = "127.0.0.1"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _api(repository: str, default_rev: str) -> dict[str, Callable[[dict[str, str]], Any]]:
    """Each API path and what answers it, given the query parameters."""
    return {
        "/api/info": lambda q: {"repository": Path(repository).name, "rev": default_rev},
        "/api/tree": lambda q: views.tree(repository, q.get("rev", default_rev), q.get("path", "")),
        "/api/blame": lambda q: views.file_blame(
            repository, q.get("rev", default_rev), q.get("path", "")
        ),
        "/api/log": lambda q: views.log(repository, q.get("rev", default_rev), q.get("path", "")),
        "/api/commit": lambda q: views.commit(repository, q.get("rev", default_rev)),
        "/api/reasoned": lambda q: views.reasoned_files(
            repository, q.get("rev", default_rev), q.get("path", "")
        ),
        "/api/scopes": lambda q: views.scopes(repository),
        "/api/scope": lambda q: views.scope(repository, q.get("digest", "")),
        "/api/scope-file": lambda q: views.scope_file(
            repository, q.get("digest", ""), q.get("path", "")
        ),
        "/api/search": lambda q: views.search(
            repository, q.get("rev", default_rev), q.get("q", ""), q.get("dir", "")
        ),
    }


class WebServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser or client that hangs up mid-answer is no error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def __init__(self, repository: str, port: int = 0, rev: str = "HEAD") -> None:
        self.repository = repository
        self.api = _api(repository, rev)
        super().__init__((LOOPBACK, port), Handler)
        port = self.server_address[1]
        self.url = f"http://{LOOPBACK}:{port}/"
        self.allowed_hosts = {f"{LOOPBACK}:{port}", f"localhost:{port}"}
        self.allowed_origins = {f"http://{host}" for host in self.allowed_hosts}


class Handler(BaseHTTPRequestHandler):
    server: WebServer
    server_version = "git-obversa-web"

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def _refuse_writes(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, _error("this page is read-only"), True)

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse_writes  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the URL, not a line per request."""

    def _answer(self, body: bool) -> None:
        hosts = self.headers.get_all("Host") or [""]
        origins = self.headers.get_all("Origin") or []
        origin = origins[0] if origins else None
        if len(hosts) != 1 or len(origins) > 1:
            # Proxies and servers disagree on which of two Host headers counts.
            self._send(HTTPStatus.FORBIDDEN, _error("one Host and at most one Origin"), body)
            return
        host = hosts[0]
        if host not in self.server.allowed_hosts:
            self._send(HTTPStatus.FORBIDDEN, _error(f"host {host!r} is not this server"), body)
            return
        if origin is not None and origin not in self.server.allowed_origins:
            self._send(HTTPStatus.FORBIDDEN, _error(f"origin {origin!r} is not allowed"), body)
            return
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._static("index.html", body)
        elif url.path.startswith("/static/"):
            self._static(url.path[len("/static/") :], body)
        elif url.path in self.server.api:
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            try:
                data = self.server.api[url.path](query)
            except views.ViewError as error:
                self._send(error.status, _error(str(error)), body)
                return
            self._send(HTTPStatus.OK, _json(data), body)
        else:
            self._send(HTTPStatus.NOT_FOUND, _error(f"no page at {url.path}"), body)

    def _static(self, name: str, body: bool) -> None:
        # Only files shipped in static/ by name: no path from the request reaches the disk.
        shipped = {path.name: path for path in STATIC.iterdir() if path.is_file()}
        if name not in shipped:
            self._send(HTTPStatus.NOT_FOUND, _error(f"no asset {name}"), body)
            return
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind == "application/javascript":
            kind += "; charset=utf-8"
        self._send(HTTPStatus.OK, (kind, shipped[name].read_bytes()), body)

    def _send(self, status: int, content: tuple[str, bytes], body: bool) -> None:
        kind, data = content
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)


def _json(data: Any) -> tuple[str, bytes]:
    return "application/json; charset=utf-8", json.dumps(data, ensure_ascii=False).encode()


def _error(message: str) -> tuple[str, bytes]:
    return _json({"error": message})
