"""`git obversa mcp` driven by the `mcp` package's own stdio client: the real command in a
subprocess, a real repository, JSON-RPC over its stdin and stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.gitutil import git, obversa

TOOLS = {"memory", "corpus_search", "corpus_view", "why", "record_note", "reasons", "ground"}


def server(repo, *args: str) -> Client:
    parameters = StdioServerParameters(
        command="git", args=["obversa", "mcp", *args], cwd=str(repo), env=dict(os.environ)
    )
    return Client(parameters, read_timeout_seconds=60)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def test_every_tool_over_stdio_and_the_note_lands_in_the_commit(repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "retry.md").write_text(
        "# Retries\n\nThe client retries twice because the upstream fails in bursts of two.\n"
    )
    (repo / "client.py").write_text("RETRIES = 2\n")
    assert obversa("install", cwd=repo).returncode == 0

    async def session() -> dict:
        seen: dict = {}
        async with server(repo, "--scope", "agent", "--corpus-dir", "docs") as client:
            listed = await client.list_tools()
            seen["tools"] = {tool.name for tool in listed.tools}
            seen["memory_schema"] = next(t for t in listed.tools if t.name == "memory").input_schema
            created = await client.call_tool(
                "memory",
                {"command": "create", "path": "/memories/plan.md", "file_text": "retry\n"},
            )
            seen["create"] = (created.is_error, text(created))
            viewed = await client.call_tool(
                "memory", {"command": "view", "path": "/memories/plan.md"}
            )
            seen["view"] = text(viewed)
            found = await client.call_tool("corpus_search", {"query": "bursts of two"})
            seen["search"] = text(found)
            shown = await client.call_tool(
                "corpus_view", {"path": "retry.md", "view_range": [3, 3]}
            )
            seen["corpus_view"] = text(shown)
            listing = await client.call_tool("corpus_view", {})
            seen["corpus_list"] = text(listing)
            noted = await client.call_tool(
                "record_note", {"text": "Two retries: the upstream fails in bursts of two."}
            )
            seen["note"] = (noted.is_error, text(noted))
            resources = await client.list_resources()
            seen["resources"] = [str(r.uri) for r in resources.resources]
            read = await client.read_resource("memory://memories/plan.md")
            seen["resource_text"] = read.contents[0].text
        return seen

    seen = anyio.run(session)
    assert seen["tools"] == TOOLS
    assert set(seen["memory_schema"]["properties"]["command"]["enum"]) == {
        "view", "create", "str_replace", "insert", "delete", "rename",
    }  # fmt: skip
    assert seen["create"] == (False, "File created successfully at: /memories/plan.md")
    assert seen["view"] == (
        "Here's the content of /memories/plan.md with line numbers:\n     1\tretry\n     2\t"
    )
    assert seen["search"].startswith("/memories/retry.md:3-3\nThe client retries twice")
    assert seen["corpus_view"] == (
        "Here's the content of /memories/retry.md with line numbers:\n"
        "     3\tThe client retries twice because the upstream fails in bursts of two."
    )
    assert seen["corpus_list"].endswith("\n/memories\n/memories/retry.md")
    assert seen["note"][0] is False and "the next commit in this worktree" in seen["note"][1]
    assert seen["resources"] == ["memory://memories/plan.md"]
    assert seen["resource_text"] == "retry\n"

    raw = json.loads(obversa("record", "show", "--raw", "--json", cwd=repo).stdout)
    assert [(turn["kind"], turn["text"]) for turn in raw] == [
        ("note", "Two retries: the upstream fails in bursts of two.")
    ]
    # The note the agent recorded is in the next commit, and `why` finds it there.
    git(repo, "add", "client.py")
    git(repo, "commit", "-q", "-m", "Retry API calls")
    assert "Two retries: the upstream fails in bursts of two." in git(repo, "log", "-1")

    async def ask_why() -> tuple[str, str, bool]:
        async with server(repo, "--read-only") as client:
            answer = await client.call_tool("why", {"target": "client.py:1"})
            refused = await client.call_tool(
                "memory", {"command": "delete", "path": "/memories/plan.md"}
            )
            return text(answer), text(refused), refused.is_error

    answer, refused, is_error = anyio.run(ask_why)
    assert answer.startswith("commit ") and "(lines 1 of client.py)" in answer
    assert "Why:\nTwo retries: the upstream fails in bursts of two." in answer
    assert is_error and refused == (
        "Memory command 'delete' refused: this server was started with --read-only."
    )


def test_bad_calls_are_error_results_and_200_calls_share_one_session(repo):
    async def session() -> dict:
        seen: dict = {}
        async with server(repo, "--scope", "load") as client:
            malformed = await client.call_tool("memory", {"command": "shred", "path": 3})
            seen["malformed"] = (malformed.is_error, text(malformed))
            unknown = await client.call_tool("no_such_tool", {})
            seen["unknown"] = (unknown.is_error, text(unknown))
            failing = await client.call_tool("why", {"target": "missing.py:3"})
            seen["failing"] = (failing.is_error, text(failing))
            missing = await client.call_tool(
                "memory", {"command": "view", "path": "/memories/x.md"}
            )
            seen["missing"] = (missing.is_error, text(missing))
            escaping = await client.call_tool(
                "memory", {"command": "view", "path": "/memories/../../etc/passwd"}
            )
            seen["escaping"] = (escaping.is_error, text(escaping))
            bad_range = await client.call_tool("why", {"target": "README.md:5-2"})
            seen["bad_range"] = (bad_range.is_error, text(bad_range))
            started = time.monotonic()
            errors = 0
            for number in range(100):
                path = f"/memories/n{number % 10}.md"
                wrote = await client.call_tool(
                    "memory", {"command": "create", "path": path, "file_text": f"{number}\n"}
                )
                read = await client.call_tool("memory", {"command": "view", "path": path})
                errors += wrote.is_error + read.is_error
                assert text(read).endswith(f"     1\t{number}\n     2\t")
            seen["seconds"] = time.monotonic() - started
            seen["errors"] = errors
            final = await client.call_tool("memory", {"command": "view", "path": "/memories"})
            seen["final"] = text(final)
        return seen

    seen = anyio.run(session)
    assert seen["malformed"][0] and "memory" in seen["malformed"][1]
    assert seen["unknown"][0] and "no_such_tool" in seen["unknown"][1]
    assert seen["failing"][0] and "missing.py" in seen["failing"][1]
    assert seen["missing"] == (
        True,
        "The path /memories/x.md does not exist. Please provide a valid path.",
    )
    assert seen["escaping"] == (
        True,
        "Path /memories/../../etc/passwd would escape /memories directory",
    )
    assert seen["bad_range"] == (
        True,
        "Bad line range in 'README.md:5-2': lines count from 1 and M >= N.",
    )
    assert seen["errors"] == 0
    assert seen["final"].count("\t/memories/n") == 10
    print(f"200 calls in one session: {seen['seconds']:.2f} s")


def test_without_the_mcp_package_it_says_how_to_install_it(repo):
    code = (
        "import sys; sys.modules['mcp'] = None; "
        "from git_obversa.cli import main; sys.exit(main(['mcp']))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr == (
        "git obversa mcp: the MCP server needs the mcp package; install it: "
        "pip install 'git-obversa[mcp]'\n"
    )
    assert done.stdout == ""


def test_outside_a_repository_it_fails_in_one_line(tmp_path):
    done = obversa("mcp", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("git obversa mcp: not a git repository: ")
    assert done.stderr.count("\n") == 1


def test_the_corpus_of_a_commit_and_the_memory_limits(repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.md").write_text("# Guide\n\nRelease on Tuesdays.\n")
    git(repo, "add", "docs")
    git(repo, "commit", "-q", "-m", "Add the guide")
    (repo / "docs" / "guide.md").write_text("# Guide\n\nRelease on Fridays.\n")  # not committed
    limits = '{"max_file_bytes": 10}'

    async def session() -> tuple[str, str, str]:
        args = ("--corpus-dir", "docs", "--rev", "HEAD", "--limits", limits)
        async with server(repo, *args) as client:
            committed = await client.call_tool("corpus_search", {"query": "release"})
            worktree = await client.call_tool("corpus_search", {"query": "fridays"})
            big = await client.call_tool(
                "memory", {"command": "create", "path": "/memories/a.md", "file_text": "x" * 11}
            )
            return text(committed), text(worktree), text(big)

    committed, worktree, big = anyio.run(session)
    assert committed == "/memories/guide.md:3-3\nRelease on Tuesdays."
    assert worktree == "No passage matches 'fridays'."
    assert big.startswith("The file /memories/a.md would be 11 bytes, over the memory limits")


def test_scope_takes_a_digest_prefix_as_every_scope_option_does(repo):
    from git_obversa.memory.git_memory import scope_digest

    assert obversa("memory", "create", "--scope", "team", "/memories/a.md", "-",
                   cwd=repo, input="agreed\n").returncode == 0  # fmt: skip

    async def session() -> str:
        async with server(repo, "--scope", scope_digest("team")[:8]) as client:
            viewed = await client.call_tool("memory", {"command": "view", "path": "/memories/a.md"})
            return text(viewed)

    assert "1\tagreed" in anyio.run(session)
