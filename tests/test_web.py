"""`git obversa web`: the real server, driven over HTTP and in headless Chromium."""

from __future__ import annotations

import http.client
import os
import shutil
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


def test_a_foreign_host_is_refused(server):
    status, body = _request(server, "/api/blame?path=src/client.py", headers={"Host": "evil.test"})
    assert status == 403 and "evil.test" in body and WHY_TEXT not in body


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


def _screenshot(page, name: str) -> None:
    """With OBVERSA_SCREENSHOTS=DIR, keep a picture of the view (docs/web.md shows them)."""
    folder = os.environ.get("OBVERSA_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def _ready(page, route: str) -> None:
    # A selector, not a script: the page's Content-Security-Policy forbids eval, which
    # the browser enforces on the test's own scripts too (and so proves it is sent).
    page.wait_for_selector(f"body[data-ready='{route}']", state="attached", timeout=15000)


def test_browse_to_a_file_and_read_a_line_s_why_on_hover(server, page):
    page.goto(server)
    _ready(page, "")
    page.click("text=src")
    page.wait_for_selector("text=client.py")
    _screenshot(page, "files")
    page.click("text=client.py")
    page.wait_for_selector("table.blame tr[data-line='2']")
    line = page.locator("table.blame tr[data-line='2']")
    assert "for _ in range(attempts):" in line.inner_text()
    line.hover()
    popup = page.locator("#why-popup")
    popup.wait_for(state="visible")
    assert WHY_TEXT in popup.inner_text()
    assert "Retry fetches" in popup.inner_text()
    _screenshot(page, "blame-hover")
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
    _screenshot(page, "log")


def test_memory_scopes_and_their_files(server, page):
    page.goto(server + "#/memory")
    _ready(page, "memory")
    page.locator("#view table a").first.click()
    page.get_by_text("/memories/plan.md").wait_for()
    page.get_by_text("/memories/plan.md").click()
    page.wait_for_selector(".memory-text")
    assert page.locator(".memory-text").inner_text() == "Ship the retry.\n"
    _screenshot(page, "memory")


def test_search_the_corpus(server, page):
    page.goto(server + "#/search")
    _ready(page, "search")
    page.fill("#search-input", "retries timeouts")
    page.press("#search-input", "Enter")
    page.wait_for_selector(".hits article")
    hit = page.locator(".hits article").first.inner_text()
    assert "docs/guide.md" in hit and "The client retries only timeouts." in hit
    _screenshot(page, "search")
