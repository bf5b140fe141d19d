"""The web view's file page against the CLI's `why`, on the 2,000-commit bench file.

Builds the history of bench/why.py (notes.md, 2,000 commits), starts `git obversa web`
on it, and times, interleaved in one run:

  `git obversa why --rev HEAD notes.md`   the CLI, a fresh process per call
  GET /api/blame?path=notes.md            what the file page fetches (the server is warm)
  GET / + app.js + style.css + the blame  everything the browser asks for to show the page

The target (issue 15): the page costs at most 2x the CLI's `why`.

Usage: python bench/web.py [--commits 2000] [--repeat 7] [--before REV]
"""

from __future__ import annotations

import argparse
import http.client
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import before  # noqa: E402
from why import build, cached_bytecode_environment, command, race  # noqa: E402

FILE = "notes.md"


def fetch(port: int, *paths: str):
    def run() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for path in paths:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            assert response.status == 200, (path, response.status)
        connection.close()

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=2000, help="commits touching notes.md")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement")
    before.add_arguments(parser)
    options = parser.parse_args()
    if before.side_by_side(options):
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        repo = Path(workdir) / "repo"
        build(repo, options.commits)
        env = cached_bytecode_environment(Path(workdir))
        server = subprocess.Popen(
            [sys.executable, "-m", "git_obversa", "web"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            port = int(server.stdout.readline().strip().rsplit(":", 1)[1].rstrip("/"))
            cli = command(repo, sys.executable, "-m", "git_obversa", "why", "--rev", "HEAD", FILE)
            cli()  # fills the bytecode cache, untimed
            api = fetch(port, f"/api/blame?path={FILE}")
            assets = ("/", "/static/app.js", "/static/style.css")
            page = fetch(port, *assets, f"/api/blame?path={FILE}")
            results = race({"cli why": cli, "api blame": api, "whole page": page}, options.repeat)
        finally:
            server.terminate()
            server.wait()
    base = results["cli why"][0]
    print(f"{options.commits} commits, median of {options.repeat} (wall time)")
    for name, (wall, _) in results.items():  # race gives (wall, CPU) seconds
        print(f"  {name:<11} {wall * 1000:8.1f} ms   {wall / base:5.2f}x the CLI's why")
        before.figure(name, wall * 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
