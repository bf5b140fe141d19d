"""The MCP server's `reasons` and `ground` tools: what the context hooks hand an agent,
in one call for any other client."""

from __future__ import annotations

import anyio

from git_obversa.memory.mechanics import MEMORY_WARNING
from tests.gitutil import git, obversa
from tests.test_mcp_server import server, text

WHY = "Retries stop after 3 attempts because the gateway fails in bursts of two."


def test_reasons_for_a_range_and_the_configured_ground(repo):
    (repo / "retry.py").write_text("RETRIES = 3\nNAME = 'x'\n")
    git(repo, "add", "retry.py")
    git(repo, "commit", "-qm", "Add a retry budget", "-m", f"Why:\n{WHY}")
    assert obversa("memory", "create", "/memories/project.md", "Fridays.", cwd=repo).returncode == 0

    async def ask() -> list[str]:
        async with server(repo) as client:
            answers = [
                await client.call_tool("reasons", {"path": "retry.py", "first": 1, "last": 1}),
                await client.call_tool("ground", {}),
            ]
            git(repo, "config", "obversa.ground", "/memories/project.md")
            answers.append(await client.call_tool("ground", {}))
            return [text(answer) for answer in answers]

    reasons, unconfigured, grounded = anyio.run(ask)
    assert reasons.startswith(MEMORY_WARNING) and WHY in reasons
    assert "`git obversa why retry.py:1-1`" in reasons
    assert unconfigured == "Nothing configured to ground."
    assert grounded.startswith(MEMORY_WARNING) and "Fridays." in grounded
