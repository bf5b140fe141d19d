"""What the agent adapters add to a memory command. The same `memory` commands three
ways, side by side in one run: on the port in-process (`open_git_memory(...).execute`),
through `GitMemoryTool.call` (the SDK tool's text, in-process), and through
`git obversa mcp` over stdio with the `mcp` package's own client. Median per call.

    python bench/agent_memory.py [--calls 200] [--before REV]

Each run alternates `create` (overwrite one of ten files) and `view` of that file on a
fresh repository. Needs the `[anthropic]` and `[mcp]` extras (`pip install -e '.[test]'`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import before  # noqa: E402  (bench/before.py, beside this script)

sys.path.insert(0, str(before.tree()))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from git_obversa import GitMemoryTool, open_git_memory  # noqa: E402


def commands(calls: int) -> list[dict]:
    script = []
    for number in range(calls // 2):
        path = f"/memories/note-{number % 10}.md"
        script.append({"command": "create", "path": path, "file_text": f"{number}\n"})
        script.append({"command": "view", "path": path})
    return script


def timed(run, script: list[dict]) -> list[float]:
    times = []
    for command in script:
        start = time.perf_counter()
        run(command)
        times.append(time.perf_counter() - start)
    return times


async def over_mcp(repository: str, script: list[dict]) -> list[float]:
    parameters = StdioServerParameters(
        command="git", args=["obversa", "mcp", "--scope", "mcp"], cwd=repository,
        env=dict(os.environ),
    )  # fmt: skip
    times = []
    async with Client(parameters) as client:
        for command in script:
            start = time.perf_counter()
            result = await client.call_tool("memory", command)
            times.append(time.perf_counter() - start)
            assert not result.is_error, result
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    before.add_arguments(parser)
    args = parser.parse_args()
    if before.side_by_side(args):
        return
    script = commands(args.calls)
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run(["git", "init", "-q", directory], check=True)
        port = open_git_memory(directory, "port")
        tool = GitMemoryTool(directory, scope="tool")
        rows = [
            ("port", timed(port.execute, script)),
            ("GitMemoryTool", timed(tool.call, script)),
            ("mcp stdio", anyio.run(over_mcp, directory, script)),
        ]
    print(f"{len(script)} memory calls, median ms per call (x: over the port in-process):")
    for verb in ("create", "view"):
        picked = [n for n, command in enumerate(script) if command["command"] == verb]
        base = statistics.median(rows[0][1][n] for n in picked)
        cells = []
        for name, times in rows:
            median = statistics.median(times[n] for n in picked)
            cells.append(f"{name} {median * 1000:.2f} ({median / base:.1f}x)")
            before.figure(f"{verb}, {name}", median * 1000)
        print(f"  {verb:6}  " + " | ".join(cells))


if __name__ == "__main__":
    main()
