"""Regenerate the screenshots of docs/web.md: `python docs/web/shoot.py [DIR]`.

Builds a small repository in a temporary directory (commits with and without recorded
reasoning, a renamed file, a memory scope with a history, Markdown docs), serves it with
`git obversa web` and photographs each view in headless Chromium through Playwright
(`apt-get install chromium`; Playwright drives that browser). DIR defaults to this
script's directory. Nothing here reaches the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

WHY_RETRY = """\
Timeouts are transient: the upstream drops a connection under load and answers
the next try. Every other error is real (a 4xx is our bug, a 5xx theirs) and
must surface at once, not after three slow attempts that hide it from the
caller and from the logs.

- three attempts: the incident log shows no success after the third
- no backoff yet: the upstream recovers within the request timeout"""


def git(repo: Path, *args: str, input: str | None = None) -> str:
    environment = {**os.environ, "GIT_AUTHOR_DATE": "2026-03-02T10:00:00Z",
                   "GIT_COMMITTER_DATE": "2026-03-02T10:00:00Z"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=repo, input=input, text=True,
                          capture_output=True, check=True, env=environment)  # fmt: skip
    return done.stdout


def obversa(repo: Path, *args: str, input: str | None = None) -> None:
    subprocess.run([sys.executable, "-m", "git_obversa", *args], cwd=repo, input=input,
                   text=True, capture_output=True, check=True)  # fmt: skip


def build(repo: Path) -> None:
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Ada Lovelace")
    git(repo, "config", "user.email", "ada@example.com")
    (repo / "src").mkdir()
    (repo / "docs").mkdir()
    header = (
        '"""Fetch pages from the upstream service."""\n\n'
        "import logging\n\nfrom upstream import Timeout, get\n\n"
    )
    footer = (
        '\n\ndef headers(token):\n    """The headers of every request."""\n'
        "    return {\n        'Authorization': f'Bearer {token}',\n"
        "        'User-Agent': 'shop-client/1.0',\n        'Accept': 'application/json',\n    }\n"
    )
    (repo / "src" / "fetch.py").write_text(
        header + "\ndef fetch(url):\n    return get(url)\n" + footer
    )
    (repo / "src" / "config.py").write_text("TIMEOUT = 10\n")
    (repo / "docs" / "guide.md").write_text(
        "# Guide\n\nInstall the client, then call `fetch`.\n\n## Errors\n\n"
        "The client retries only timeouts; every other error surfaces at once.\n"
        "Set `TIMEOUT` in `config.py` to change how long one try waits.\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Add the client")
    git(repo, "mv", "src/fetch.py", "src/client.py")
    retry = (
        "\ndef fetch(url, attempts=3):\n    for attempt in range(attempts):\n        try:\n"
        "            return get(url)\n        except Timeout:\n"
        "            logging.info('retry %d', attempt)\n    raise Timeout(url)\n"
    )
    (repo / "src" / "client.py").write_text(header + retry + footer)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-F", "-", input=(
        "Retry fetches that time out\n\nThe client gave up on the first timeout.\n\n"
        f"Why:\n{WHY_RETRY}\n"))  # fmt: skip
    (repo / "src" / "config.py").write_text("TIMEOUT = 10\nATTEMPTS = 3\n")
    (repo / "src" / "client.py").write_text(
        header
        + retry.replace("    raise", "    logging.warning('gave up on %s', url)\n    raise")
        + footer
    )
    git(repo, "commit", "-q", "-am", "Log the final failure")
    for text in ("Ship the retry.\n", "Ship the retry.\nThen add a backoff.\n"):
        obversa(repo, "memory", "create", "--scope", "agent-notes", "/memories/plan.md", "-",
                input=text)  # fmt: skip
    obversa(repo, "memory", "create", "--scope", "agent-notes", "/memories/upstream.md", "-",
            input="The upstream recovers within 2 s.\n")  # fmt: skip


def shoot(url: str, folder: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium,
                                             args=["--no-sandbox", "--disable-gpu"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 720})

        def open_route(route: str, name: str, before=None) -> None:
            page.mouse.move(0, 0)
            page.goto(url + "#/" + route)
            page.wait_for_selector(f"body[data-ready='{route}']", state="attached")
            if before:
                before()
            page.screenshot(path=str(folder / f"{name}.png"))

        def hover_line() -> None:
            page.locator("table.blame tr[data-line='11']").hover()
            page.locator("#why-popup").wait_for(state="visible")

        def marked() -> None:
            page.wait_for_selector("tr.reasoned")

        open_route("tree?path=src", "files", marked)
        open_route("file?path=src/client.py", "blame-hover", hover_line)
        open_route("file?path=src/client.py&line=10", "line")
        sha = page.locator("#why-panel a.sha").first.get_attribute("title").split()[-1]
        open_route(f"commit?rev={sha}", "commit")
        open_route("log", "log")
        page.goto(url + "#/memory")
        page.wait_for_selector("body[data-ready='memory']", state="attached")
        page.locator("#view table a").first.click()
        page.get_by_text("/memories/plan.md").click()
        page.wait_for_selector("table.history")
        page.screenshot(path=str(folder / "memory.png"))
        open_route("search?q=timeouts+retries", "search")
        page.emulate_media(color_scheme="dark")
        open_route("file?path=src/client.py&line=10", "dark")
        page.set_viewport_size({"width": 420, "height": 720})
        open_route("file?path=src/client.py", "narrow")
        browser.close()


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "shop"
        build(repo)
        server = subprocess.Popen([sys.executable, "-m", "git_obversa", "web"], cwd=repo,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)  # fmt: skip
        try:
            shoot(server.stdout.readline().strip(), folder)
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
