"""`git obversa web`: the real server, driven over HTTP and in headless Chromium."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from git_obversa import open_git_memory
from tests.gitutil import git

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Where CI runs, a missing browser is a broken set-up, not a reason to skip.
NEED_BROWSER = os.environ.get("CI") == "true"
WHY_TEXT = "Timeouts are transient; other errors are real and must surface."
# Who wrote the retry's lines: a Git AI note as another tool writes it (docs/attribution.md).
AGENT_TEXT = "claude-code (claude-sonnet-4-5), session s_38180d94d9f765"
AGENT_NOTE = """src/client.py
  s_38180d94d9f765::t_0123456789abcd 1-2
---
{"schema_version": "authorship/3.0.0", "base_commit_sha": "", "prompts": {},
 "sessions": {"s_38180d94d9f765": {"agent_id":
   {"tool": "claude-code", "id": "6ef2299e", "model": "claude-sonnet-4-5"}}}}
"""


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("web") / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.com")
    (repo / "src").mkdir()
    (repo / "docs").mkdir()
    (repo / "src" / "client.py").write_text("def fetch(url):\n    return get(url)\n")
    (repo / "docs" / "guide.md").write_text("# Guide\n\nThe client retries only timeouts.\n")
    _commit(repo, "Add the client")
    (repo / "src" / "client.py").write_text(
        "def fetch(url, attempts=3):\n    for _ in range(attempts):\n        return get(url)\n"
    )
    _commit(repo, f"Retry fetches\n\nWhy:\n{WHY_TEXT}\n")
    git(repo, "notes", "--ref", "ai", "add", "-m", AGENT_NOTE, "HEAD")
    memory = open_git_memory(str(repo), "agent-notes")
    result = memory.execute(
        {"command": "create", "path": "/memories/plan.md", "file_text": "Ship the retry.\n"}
    )
    assert result["ok"], result
    return repo


def _state(repo: Path) -> tuple[str, str, str]:
    """What a read-only server must leave alone: refs, index and worktree status."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    status = git(repo, "status", "--porcelain", "--ignored")
    index = (repo / ".git" / "index").read_bytes().hex()
    return refs, status, index


SERVED: dict[str, Path] = {}


def page_repo(url: str) -> Path:
    return SERVED[url]


@pytest.fixture(scope="module")
def server(repo):
    before = _state(repo)
    process = subprocess.Popen(
        [sys.executable, "-m", "git_obversa", "web"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()  # the first line, flushed at once
        assert url.startswith("http://127.0.0.1:"), (url, process.stderr.read())
        SERVED[url] = repo
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert _state(repo) == before, "the web view changed the repository"


def _request(url: str, path: str, method: str = "GET", headers: dict | None = None):
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request(method, path, headers=headers or {})
    response = connection.getresponse()
    return response.status, response.read().decode()


def test_the_api_answers_from_the_repository(server):
    status, body = _request(server, "/api/blame?path=src/client.py")
    assert status == 200
    assert WHY_TEXT in body and "for _ in range(attempts):" in body
    commits = json.loads(body)["commits"].values()
    assert [[a["text"] for a in c["agents"]] for c in commits if c["reasoning"]] == [[AGENT_TEXT]]


def test_a_foreign_host_is_refused(server):
    status, body = _request(server, "/api/blame?path=src/client.py", headers={"Host": "evil.test"})
    assert status == 403 and "evil.test" in body and WHY_TEXT not in body


def test_two_host_headers_are_refused_even_when_the_first_is_ours(server):
    port = urlsplit(server).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(
            f"GET /api/scopes HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.test\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 403") and b"one Host" in answer


def test_a_client_hanging_up_before_its_403_prints_no_traceback(repo):
    process = subprocess.Popen(
        [sys.executable, "-m", "git_obversa", "web"], cwd=repo, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        port = urlsplit(process.stdout.readline().strip()).port
        for _ in range(30):
            connection = socket.create_connection(("127.0.0.1", port), timeout=10)
            connection.sendall(b"GET /api/log HTTP/1.1\r\nHost: evil.test\r\n\r\n")
            # Reset, not a polite close: the server's answer then meets a dead socket.
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()
        status, _ = _request(f"http://127.0.0.1:{port}/", "/api/info")
        assert status == 200  # still serving
    finally:
        process.terminate()
        process.wait(timeout=10)
    errors = process.stderr.read()
    assert "Traceback" not in errors and "Error" not in errors, errors


def test_a_commit_s_files_parents_and_why(server):
    status, body = _request(server, "/api/commit?rev=main")
    data = json.loads(body)
    assert status == 200 and data["subject"] == "Retry fetches" and data["reasoning"] == WHY_TEXT
    assert data["files"] == [{"path": "src/client.py", "old_path": None, "status": "modified"}]
    assert len(data["parents"]) == 1
    assert [agent["text"] for agent in data["agents"]] == [AGENT_TEXT]
    status, body = _request(server, "/api/reasoned?path=src")
    assert json.loads(body)["files"] == ["src/client.py"]
    status, body = _request(server, "/api/reasoned?path=docs")
    assert json.loads(body)["files"] == []


def test_a_foreign_origin_is_refused(server):
    port = urlsplit(server).port
    status, body = _request(
        server, "/api/scopes", headers={"Origin": "http://evil.test", "Host": f"127.0.0.1:{port}"}
    )
    assert status == 403 and "evil.test" in body


def test_the_page_is_read_only(server):
    for method in ("POST", "PUT", "DELETE"):
        status, _ = _request(server, "/api/scopes", method=method)
        assert status == 405


def test_revisions_and_paths_never_become_options_or_escape(server):
    status, body = _request(server, "/api/tree?rev=--output=/tmp/x")
    assert status == 404 and "not a commit" in body
    status, body = _request(server, "/api/blame?path=../../etc/passwd")
    assert status == 400 and "not a path inside the repository" in body
    status, _ = _request(server, "/static/..%2f__init__.py")
    assert status == 404


def test_outside_a_repository_it_says_so(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "git_obversa", "web"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)},
    )
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert "not a git repository" in completed.stderr


# ---- In a real browser -------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(server):
    if CHROMIUM is None and not NEED_BROWSER:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 760})
        yield page
        browser.close()


def _ready(page, route: str) -> None:
    # A selector, not a script: the page's Content-Security-Policy forbids eval, which
    # the browser enforces on the test's own scripts too (and so proves it is sent).
    page.wait_for_selector(f"body[data-ready='{route}']", state="attached", timeout=15000)


def test_browse_to_a_file_and_read_a_line_s_why_on_hover(server, page):
    page.goto(server)
    _ready(page, "")
    page.click("text=src")
    page.wait_for_selector("text=client.py")
    page.click("text=client.py")
    page.wait_for_selector("table.blame tr[data-line='2']")
    line = page.locator("table.blame tr[data-line='2']")
    assert "for _ in range(attempts):" in line.inner_text()
    line.hover()
    popup = page.locator("#why-popup")
    popup.wait_for(state="visible")
    assert WHY_TEXT in popup.inner_text()
    assert "Retry fetches" in popup.inner_text()
    assert f"Agent:\n{AGENT_TEXT}" in popup.inner_text()  # who wrote it, beside the why
    line.click()
    panel = page.locator("#why-panel")
    panel.wait_for(state="visible")
    assert WHY_TEXT in panel.inner_text()


def test_the_log_shows_why_blocks(server, page):
    page.goto(server + "#/log")
    _ready(page, "log")
    text = page.locator("#view").inner_text()
    assert "Retry fetches" in text and WHY_TEXT in text
    assert "Add the client" not in text  # it records no reasoning


def test_memory_scopes_and_their_files(server, page):
    page.goto(server + "#/memory")
    _ready(page, "memory")
    page.locator("#view table a").first.click()
    page.get_by_text("/memories/plan.md").wait_for()
    page.get_by_text("/memories/plan.md").click()
    page.wait_for_selector(".memory-text")
    assert page.locator(".memory-text").inner_text() == "Ship the retry.\n"


def test_search_the_corpus(server, page):
    page.goto(server + "#/search")
    _ready(page, "search")
    page.fill("#search-input", "retries timeouts")
    page.press("#search-input", "Enter")
    page.wait_for_selector(".hits article")
    hit = page.locator(".hits article").first.inner_text()
    assert "docs/guide.md" in hit and "The client retries only timeouts." in hit


def test_from_the_root_a_file_links_its_reasoned_lines_to_their_commit(server, page):
    """From /: the tree marks the file, the file page lists the reasoned commit and links
    its id to the commit page, which shows the why and the files it changed."""
    page.goto(server)
    _ready(page, "")
    page.click("text=src")
    page.wait_for_selector("tr.reasoned[data-path='src/client.py']")
    page.click("text=client.py")
    page.wait_for_selector("details.reasons")
    summary = page.locator("details.reasons").inner_text()
    assert "Retry fetches" in summary and "lines 1–3" in summary
    sha = git(page_repo(server), "rev-parse", "main").strip()
    page.locator(f"table.blame tr[data-line='1'] a[title='commit {sha}']").click()
    _ready(page, f"commit?rev={sha}")
    text = page.locator("#view").inner_text()
    assert "Retry fetches" in text and WHY_TEXT in text
    assert "1 file changed" in text and "src/client.py" in text
    assert "1 parent: " in text
    page.click("text=src/client.py")
    page.wait_for_selector("table.blame tr[data-line='1']")


def test_a_line_permalink_pins_its_why_and_n_moves_to_the_next(server, page):
    page.goto(server + "#/file?path=src/client.py&line=2")
    _ready(page, "file?path=src/client.py&line=2")
    assert page.locator("tr.current").get_attribute("data-line") == "2"
    assert WHY_TEXT in page.locator("#why-panel").inner_text()
    page.goto(server + "#/file?path=docs/guide.md")
    _ready(page, "file?path=docs/guide.md")
    assert page.locator("#next-why").is_disabled()  # no line of it records a why
    page.goto(server + "#/file?path=src/client.py")
    _ready(page, "file?path=src/client.py")
    page.keyboard.press("n")
    page.wait_for_selector("tr.current[data-line='1']")
    assert "line=1" in page.url
    page.keyboard.press("j")
    page.wait_for_selector("tr.current[data-line='2']")


def test_the_log_shows_no_null_and_links_each_commit(server, page):
    page.goto(server + "#/log")
    _ready(page, "log")
    text = page.locator("#view").inner_text()
    assert "null" not in text
    assert page.locator(".commits a.sha").count() == 1


def test_memory_breadcrumbs_name_the_scope_and_the_file_has_its_history(server, page):
    page.goto(server + "#/memory")
    _ready(page, "memory")
    assert "1 file, 16 B" in page.locator("#view").inner_text()
    page.locator("#view table a").first.click()
    page.get_by_text("/memories/plan.md").click()
    page.wait_for_selector(".memory-text")
    assert (
        page.locator(".crumbs").inner_text().startswith("scopes / agent-notes / /memories/plan.md")
    )
    history = page.locator("table.history").inner_text()
    assert "create /memories/plan.md" in history
    assert "git obversa memory restore --scope agent-notes " in history


def test_search_marks_the_terms_and_cuts_the_passage_to_them(server, page):
    page.goto(server + "#/search?q=timeouts")
    _ready(page, "search?q=timeouts")
    assert page.locator(".hits mark").first.inner_text().lower() == "timeouts"
    assert "# Guide" not in page.locator(".hit-text").first.inner_text()


def test_dark_mode_and_a_narrow_window(server, page):
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 420, "height": 760})
    try:
        page.goto(server + "#/file?path=src/client.py")
        _ready(page, "file?path=src/client.py")
        background = page.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
        assert background == "rgb(13, 17, 23)"
        gutter = page.locator("table.blame td.gutter").first.bounding_box()
        assert gutter["width"] < 0.3 * 420
        subject = page.locator(".gutter-text").first
        assert subject.evaluate("e => getComputedStyle(e).textOverflow") == "ellipsis"
        assert subject.get_attribute("title") == "Retry fetches"  # whole on hover
    finally:
        page.emulate_media(color_scheme="light")
        page.set_viewport_size({"width": 1280, "height": 760})
