"""`GitMemoryTool` driven through the Anthropic SDK's own tool runner, against the SDK's
reference filesystem memory tool.

No network: the SDK's client talks to a local transport that plays the model. Each of
its replies is one `tool_use` block of a scripted command; the runner executes it with
the tool under test and sends the `tool_result` block back in its next request, where
the transport records it. The same script runs once with `GitMemoryTool` on a real
repository and once with `BetaLocalFilesystemMemoryTool` on a temporary directory; the
results must be equal byte for byte, except for the documented differences
(docs/memory.md, "Agents": directory sizes).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import httpx2
import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.tools import BetaLocalFilesystemMemoryTool

from git_obversa import AsyncGitMemoryTool, GitMemoryTool, open_git_memory

SCRIPT = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\ngamma\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again\n"},
    {"command": "create", "path": "/memories/projects/api/retry.md", "file_text": "aaa\nb\naa\n"},
    {"command": "create", "path": "/memories/projects/api/deep/x.txt", "file_text": "x"},
    {"command": "create", "path": "/memories/crlf.txt", "file_text": "one\r\ntwo\r\n"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/"},
    {"command": "view", "path": "/memories/projects"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/crlf.txt"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [7, 9]},
    {"command": "view", "path": "/memories/projects/../notes.md"},
    {"command": "view", "path": "/memories/missing.md"},
    {"command": "view", "path": "notes.md"},
    {"command": "view", "path": "/memories/../etc/passwd"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "B"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "delta", "new_str": "D"},
    {
        "command": "str_replace",
        "path": "/memories/projects/api/retry.md",
        "old_str": "aa",
        "new_str": "c",
    },  # noqa: E501
    {"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "b"},
    {"command": "str_replace", "path": "/memories/projects", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "top\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 4, "insert_text": "end"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": ""},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x\n"},
    {"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "x\n"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/kept.md"},
    {"command": "rename", "old_path": "/memories/kept.md", "new_path": "/memories/crlf.txt"},
    {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/new.md"},
    {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/kept.md"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive/p"},
    {"command": "view", "path": "/memories"},
    {"command": "delete", "path": "/memories/kept.md"},
    {"command": "delete", "path": "/memories/kept.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "delete", "path": "/memories/archive"},
    {"command": "view", "path": "/memories"},
]


def _reply(number: int, content: list[dict], stop: str) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": f"msg_{number:03d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    )


class ScriptedModel:
    """A transport that plays the model: one scripted memory tool call per reply, then
    "done"; it records the tool_result blocks the runner sends back."""

    def __init__(self, script: list[dict]) -> None:
        self.script = script
        self.results: list[dict] = []
        self.requests = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if self.requests == 0:  # the tool definition the SDK sends for the model to see
            assert {"type": "memory_20250818", "name": "memory"} in body["tools"]
        last = body["messages"][-1]
        if isinstance(last["content"], list):
            self.results += [b for b in last["content"] if b.get("type") == "tool_result"]
        number = self.requests
        self.requests += 1
        if number < len(self.script):
            call = {"type": "tool_use", "id": f"toolu_{number:03d}", "name": "memory"}
            return _reply(number, [{**call, "input": self.script[number]}], "tool_use")
        return _reply(number, [{"type": "text", "text": "done"}], "end_turn")


def run_script(tool, script: list[dict]) -> list[dict]:
    model = ScriptedModel(script)
    http = httpx2.Client(transport=httpx2.MockTransport(model))
    client = Anthropic(api_key="sk-test", http_client=http)
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=256,
        messages=[{"role": "user", "content": "Remember this."}],
        tools=[tool],
    )
    final = runner.until_done()
    assert final.content[0].text == "done"
    assert [r["tool_use_id"] for r in model.results] == [
        f"toolu_{n:03d}" for n in range(len(script))
    ]
    return model.results


DIRECTORY_LINE = re.compile(r"^\S+\t\S+/$")


def without_directory_sizes(result: dict) -> dict:
    """RESULT with the size of each directory line of a listing blanked: the documented
    difference (the filesystem shows an inode size, Git memory the bytes below)."""
    text = result["content"]
    if not text.startswith("Here're the files"):
        return result
    lines = text.split("\n")
    lines[1:] = [  # the first line after the header is the viewed directory itself
        "<dir>\t" + line.split("\t", 1)[1] if n == 0 or DIRECTORY_LINE.match(line) else line
        for n, line in enumerate(lines[1:])
    ]
    return {**result, "content": "\n".join(lines)}


def test_replay_matches_the_sdk_filesystem_tool_byte_for_byte(repo, tmp_path):
    ours = run_script(GitMemoryTool(str(repo), scope="replay", overwrite=False), SCRIPT)
    reference = run_script(BetaLocalFilesystemMemoryTool(str(tmp_path / "fs")), SCRIPT)
    assert len(SCRIPT) >= 20
    for command, mine, theirs in zip(SCRIPT, ours, reference, strict=True):
        assert without_directory_sizes(mine) == without_directory_sizes(theirs), command
    # Errors are error results, successes are not, exactly as the SDK's tool decides.
    assert sum(bool(r.get("is_error")) for r in ours) == 17
    # The memory is in the repository's private ref, and nowhere in the worktree.
    memory = open_git_memory(str(repo), "replay")
    listing = memory.execute({"command": "view", "path": "/memories"})["value"]["entries"]
    assert [entry["name"] for entry in listing] == ["crlf.txt"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    assert status.stdout == b""


def test_directory_sizes_are_the_bytes_of_the_files_below(repo):
    tool = GitMemoryTool(str(repo), scope="sizes")
    script = [
        {"command": "create", "path": "/memories/a/b/c/d.md", "file_text": "x" * 1536},
        {"command": "create", "path": "/memories/a/e.md", "file_text": "12345"},
        {"command": "view", "path": "/memories"},
    ]
    listing = run_script(tool, script)[-1]["content"]
    assert listing.split("\n")[1:] == [
        "1.5K\t/memories",  # 1536 + 5 bytes
        "1.5K\t/memories/a/",
        "1.5K\t/memories/a/b/",  # its file is three levels down: counted, not listed
        "5B\t/memories/a/e.md",
    ]


def test_create_overwrites_by_default_and_refuses_when_asked(repo):
    script = [
        {"command": "create", "path": "/memories/a.md", "file_text": "first\n"},
        {"command": "create", "path": "/memories/a.md", "file_text": "second\n"},
        {"command": "view", "path": "/memories/a.md"},
    ]
    replaced = run_script(GitMemoryTool(str(repo), scope="default"), script)
    assert replaced[1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_001",
        "content": "File created successfully at: /memories/a.md",
    }
    assert replaced[2]["content"].endswith("     1\tsecond\n     2\t")
    kept = run_script(GitMemoryTool(str(repo), scope="strict", overwrite=False), script)
    assert kept[1]["is_error"] and kept[1]["content"] == "File /memories/a.md already exists"
    assert kept[2]["content"].endswith("     1\tfirst\n     2\t")


def test_git_memory_refusals_are_clear_error_results(repo):
    tool = GitMemoryTool(str(repo), scope="limits", limits={"max_file_bytes": 10, "max_files": 2})
    script = [
        {"command": "create", "path": "/memories/notes.xml", "file_text": "<a/>"},
        {"command": "create", "path": "/memories/big.md", "file_text": "x" * 11},
        {"command": "create", "path": "/memories/bad name.md", "file_text": "x"},
        {"command": "create", "path": "/memories/1.md", "file_text": "1"},
        {"command": "create", "path": "/memories/2.md", "file_text": "2"},
        {"command": "create", "path": "/memories/3.md", "file_text": "3"},
        {"command": "create", "path": "/memories/4.md"},
        {"command": "bogus", "path": "/memories/4.md"},
    ]
    results = run_script(tool, script)
    texts = [(bool(r.get("is_error")), r["content"]) for r in results]
    assert texts[:6] == [
        (
            True,
            "The path /memories/notes.xml has an extension memory files cannot have; "
            "use one of .txt, .md, .json, .py, .yaml, .yml.",
        ),
        (
            True,
            "The file /memories/big.md would be 11 bytes, over the memory limits "
            "(10 bytes per file, 1048576 in all); write less.",
        ),
        (True, "The memory path contains an invalid segment: /memories/bad name.md"),
        (False, "File created successfully at: /memories/1.md"),
        (False, "File created successfully at: /memories/2.md"),
        (
            False,
            "File created successfully at: /memories/3.md\nTo stay within the memory limits, "
            "the least recently written files were removed: /memories/1.md",
        ),
    ]
    assert texts[6] == (True, "The `file_text` field must be a string.")
    # An unknown command is the SDK's own affair: its dispatcher raises, the runner
    # turns that into an error result and the conversation goes on.
    assert texts[7][0] and "Unknown command: bogus" in texts[7][1]


def test_async_tool_through_the_async_runner(repo):
    async def main() -> list[dict]:
        model = ScriptedModel(SCRIPT[:12])

        async def handler(request: httpx2.Request) -> httpx2.Response:
            return model(request)

        transport = httpx2.MockTransport(handler)
        http = httpx2.AsyncClient(transport=transport)
        client = AsyncAnthropic(api_key="sk-test", http_client=http)
        runner = client.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=256,
            messages=[{"role": "user", "content": "Remember this."}],
            tools=[AsyncGitMemoryTool(str(repo), scope="async", overwrite=False)],
        )
        await runner.until_done()
        return model.results

    results = asyncio.run(main())
    sync = run_script(GitMemoryTool(str(repo), scope="sync", overwrite=False), SCRIPT[:12])
    assert [r["content"] for r in results] == [r["content"] for r in sync]
    tool = GitMemoryTool(str(repo), scope="async")
    assert tool.clear_all_memory() == "All memory cleared"
    assert tool.memory.execute({"command": "view", "path": "/memories"})["value"]["entries"] == []


def test_plain_import_does_not_load_the_sdk():
    code = (
        "import sys, git_obversa; assert 'GitMemoryTool' in dir(git_obversa); "
        "print('anthropic' in sys.modules, 'mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("scope", ["", "\x00"])
def test_a_bad_scope_fails_when_the_tool_is_made(repo, scope):
    with pytest.raises(TypeError):
        GitMemoryTool(str(repo), scope=scope)
