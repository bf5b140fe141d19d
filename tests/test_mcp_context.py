"""What the context hooks hand an agent, in one call for any other MCP client: `why` for
the reasons behind a range (path with line or range, as every tool names a file) and
`ground` for the memory a session starts with."""

from __future__ import annotations

import anyio

from git_obversa.memory.mechanics import MEMORY_WARNING
from tests.gitutil import git, obversa
from tests.test_mcp_server import server, text

WHY = "Retries stop after 3 attempts because the gateway fails in bursts of two."


def test_the_reasons_behind_a_range_and_the_configured_ground(repo):
    (repo / "retry.py").write_text("RETRIES = 3\nNAME = 'x'\n")
    git(repo, "add", "retry.py")
    git(repo, "commit", "-qm", "Add a retry budget", "-m", f"Why:\n{WHY}")
    assert obversa("memory", "create", "/memories/project.md", "Fridays.", cwd=repo).returncode == 0

    async def ask() -> list:
        async with server(repo, "--read-only") as client:
            answers = [
                await client.call_tool("why", {"path": "retry.py", "range": [1, 1]}),
                await client.call_tool("ground", {}),
            ]
            git(repo, "config", "obversa.ground", "/memories/project.md /memories/later.md")
            answers.append(await client.call_tool("ground", {}))
            git(repo, "config", "obversa.ground", "/memories/later.md")
            answers.append(await client.call_tool("ground", {}))
            return answers

    why, unconfigured, grounded, not_yet = anyio.run(ask)
    assert why.structured_content["commits"][0]["reasoning"] == WHY
    assert f"Why:\n{WHY}" in text(why)
    assert unconfigured.structured_content == {"sources": [], "prompt": ""}
    assert text(unconfigured).startswith("Nothing is configured to ground a session")
    prompt = grounded.structured_content["prompt"]
    assert prompt.startswith(MEMORY_WARNING) and "Fridays." in prompt
    assert text(grounded) == prompt
    assert text(not_yet) == "None of /memories/later.md has anything in memory yet."
    assert not_yet.structured_content["prompt"] == ""
