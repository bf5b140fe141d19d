"""`git obversa mcp` driven by the `mcp` package's own stdio client: the real command in a
subprocess, a real repository, JSON-RPC over its stdin and stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import anyio
import jsonschema
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest

from tests.gitutil import git, obversa, rename_and_grow

READ_TOOLS = {"memory_view", "corpus_search", "corpus_view", "why", "ground"}
WRITE_TOOLS = {"memory_create", "memory_str_replace", "memory_insert", "memory_delete",
               "memory_rename", "record_note"}  # fmt: skip
HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")


def server(repo, *args: str) -> Client:
    parameters = StdioServerParameters(
        command="git", args=["obversa", "mcp", *args], cwd=str(repo), env=dict(os.environ)
    )
    return Client(parameters, read_timeout_seconds=60)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


def test_every_tool_declares_itself_and_its_structured_answer_validates(repo):
    """Titles, a description for every field, all four hints, and an output schema the
    structured content of a real call of each tool fits (checked by jsonschema, and by the
    SDK client, which validates structured content against the schema it listed)."""
    (repo / "docs").mkdir()
    (repo / "docs" / "retry.md").write_text(
        "# Retries\n\nThe client retries twice because the upstream fails in bursts of two.\n"
    )
    (repo / "client.py").write_text("RETRIES = 2\n")
    git(repo, "add", "client.py")
    git(repo, "commit", "-q", "-m", "Retry twice", "-m", "Why:\nBursts of two.")
    calls = [
        ("memory_create", {"path": "/memories/plan.md", "file_text": "retry\nback off\n"}),
        ("memory_view", {"path": "/memories/plan.md", "line": 2}),
        ("memory_view", {"path": "/memories"}),
        (
            "memory_str_replace",
            {"path": "/memories/plan.md", "old_str": "retry", "new_str": "wait"},
        ),
        ("memory_insert", {"path": "/memories/plan.md", "insert_line": 0, "insert_text": "# Plan"}),
        ("memory_rename", {"old_path": "/memories/plan.md", "new_path": "/memories/p.md"}),
        ("memory_delete", {"path": "/memories/p.md"}),
        ("corpus_search", {"query": "bursts of two"}),
        ("corpus_view", {"path": "/corpus/retry.md", "range": [3, -1]}),
        ("corpus_view", {}),
        ("why", {"path": "client.py", "line": 1}),
        ("record_note", {"text": "Two retries: the upstream fails in bursts of two."}),
        ("ground", {}),
    ]

    async def session() -> tuple[list, list]:
        async with server(repo, "--scope", "agent", "--corpus-dir", "docs") as client:
            listed = (await client.list_tools()).tools
            return listed, [(name, await client.call_tool(name, args)) for name, args in calls]

    listed, answers = anyio.run(session)
    assert {tool.name for tool in listed} == READ_TOOLS | WRITE_TOOLS
    schemas = {}
    for tool in listed:
        assert tool.title and tool.description, tool.name
        properties = tool.input_schema["properties"]
        assert all(field.get("description") for field in properties.values()), tool.name
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        hints = [getattr(tool.annotations, hint) for hint in HINTS]
        assert all(isinstance(hint, bool) for hint in hints), tool.name
        assert tool.annotations.read_only_hint == (tool.name in READ_TOOLS)
        schemas[tool.name] = tool.output_schema
    view = next(tool for tool in listed if tool.name == "memory_view")
    assert view.input_schema["required"] == ["path"]
    assert set(view.input_schema["properties"]) == {"path", "line", "range"}
    assert "Markdown" in next(t for t in listed if t.name == "corpus_search").description
    for name, result in answers:
        assert not result.is_error, (name, text(result))
        jsonschema.validate(result.structured_content, schemas[name])
    by_call = [result for _, result in answers]
    assert text(by_call[0]) == "File created successfully at: /memories/plan.md"
    assert text(by_call[1]) == (
        "Here's the content of /memories/plan.md with line numbers:\n     2\tback off"
    )
    assert by_call[1].structured_content["text"] == "back off"
    assert by_call[7].structured_content["hits"][0]["path"] == "/corpus/retry.md"
    assert text(by_call[7]).startswith("/corpus/retry.md:3-3\nThe client retries twice")
    assert text(by_call[8]).startswith("Here's the content of /corpus/retry.md with line")
    assert text(by_call[9]).endswith("\n/corpus\n/corpus/retry.md")
    why = by_call[10].structured_content["commits"][0]
    assert (why["subject"], why["reasoning"], why["ranges"]) == (
        "Retry twice",
        "Bursts of two.",
        [[1, 1]],
    )
    assert by_call[11].structured_content["pending"] == 1
    assert by_call[12].structured_content == {"sources": [], "prompt": ""}
    assert "git config obversa.ground" in text(by_call[12])

    raw = json.loads(obversa("record", "show", "--raw", "--json", cwd=repo).stdout)
    assert [(turn["kind"], turn["text"]) for turn in raw] == [
        ("note", "Two retries: the upstream fails in bursts of two.")
    ]


# (arguments, the field the error must name); each is a mistake a model makes.
MALFORMED = [
    ("why", {}, "path"),
    ("why", {"target": "client.py:1"}, "target"),
    ("why", {"path": "client.py", "line": "1"}, "line"),
    ("why", {"path": "client.py", "line": 0}, "line"),
    ("why", {"path": "client.py", "range": "1-3"}, "range"),
    ("why", {"path": "client.py", "range": [1]}, "range"),
    ("why", {"path": "client.py", "range": [5, 2]}, "range"),
    ("why", {"path": "client.py", "line": 1, "range": [1, 2]}, "range"),
    ("why", {"path": 7}, "path"),
    ("why", {"path": "client.py", "rev": ""}, "rev"),
    ("memory_view", {"path": "/memories", "view_range": [1, 2]}, "view_range"),
    ("memory_view", {"path": "/memories/a.md", "range": ["1", "2"]}, "range"),
    ("memory_create", {"path": "/memories/a.md"}, "file_text"),
    ("memory_create", {"path": "/memories/a.md", "file_text": 5}, "file_text"),
    ("memory_str_replace", {"path": "/memories/a.md", "old_str": "", "new_str": "x"}, "old_str"),
    (
        "memory_insert",
        {"path": "/memories/a.md", "insert_line": -1, "insert_text": "x"},
        "insert_line",
    ),
    ("memory_rename", {"old_path": "/memories/a.md"}, "new_path"),
    ("memory_delete", {"command": "delete", "path": "/memories/a.md"}, "command"),
    ("corpus_search", {"query": "x", "limit": 1000}, "limit"),
    ("corpus_view", {"path": ["docs"]}, "path"),
    ("record_note", {"text": "why", "thinking": "yes"}, "thinking"),
    ("ground", {"path": "/memories/project.md"}, "path"),
]


def test_malformed_calls_get_one_line_naming_the_field(repo):
    async def session() -> list:
        async with server(repo) as client:
            return [await client.call_tool(name, args) for name, args, _ in MALFORMED]

    results = anyio.run(session)
    assert len(results) >= 20
    for (name, args, field), result in zip(MALFORMED, results, strict=True):
        said = text(result)
        assert result.is_error, (name, args)
        assert "\n" not in said and "http" not in said, said
        assert said.startswith(f"{name}: ") and field in said, (args, said)
    assert text(results[1]) == (
        "why: unknown field 'target' (the file is `path`, its lines `line` or `range`); "
        "its fields are path, line, range, rev."
    )
    assert text(results[2]) == 'why: line must be a line number of at least 1; got "1".'
    assert text(results[-1]) == "ground: unknown field 'path'; it takes no fields."


def test_invalid_json_rpc_requests_with_an_id_get_their_error(repo):
    """Sent through the SDK's own stdio client transport (the SDK's request type, built
    without its validation: a conforming client never sends these). Each carries an id,
    so the client waits for an answer: each gets the JSON-RPC error with that id, and
    the session goes on."""
    bad = [
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "1.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": 5},
        {"jsonrpc": "2.0", "id": 4, "method": None},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": [1]},
    ]
    hello = JSONRPCRequest(
        jsonrpc="2.0", id=0, method="initialize",
        params={"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}},
    )  # fmt: skip
    parameters = StdioServerParameters(
        command="git", args=["obversa", "mcp"], cwd=str(repo), env=dict(os.environ)
    )

    async def session() -> list:
        replies = []
        async with stdio_client(parameters) as (read, write):
            await write.send(SessionMessage(hello))
            await read.receive()
            await write.send(SessionMessage(JSONRPCNotification(
                jsonrpc="2.0", method="notifications/initialized")))  # fmt: skip
            with warnings.catch_warnings():  # pydantic warns of the wrong types it writes
                warnings.simplefilter("ignore")
                for request in bad:
                    await write.send(SessionMessage(JSONRPCRequest.model_construct(**request)))
                    with anyio.fail_after(60):
                        replies.append((await read.receive()).message)
            await write.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=6, method="ping")))
            with anyio.fail_after(60):
                replies.append((await read.receive()).message)
        return replies

    replies = anyio.run(session)
    errors = [reply for reply in replies if isinstance(reply, JSONRPCError)]
    assert [(error.id, error.error.code) for error in errors] == [(n, -32600) for n in range(1, 6)]
    assert errors[0].error.message == "Invalid request: method must be a string."
    assert errors[1].error.message == 'Invalid request: jsonrpc must be "2.0".'
    assert errors[2].error.message == "Invalid request: params must be an object."
    assert replies[-1].id == 6 and not isinstance(replies[-1], JSONRPCError)


def test_a_line_that_is_not_json_gets_a_parse_error(repo):
    process = subprocess.run(
        ["git", "obversa", "mcp"], cwd=repo, input="{not json\n[1, 2]\n", text=True,
        capture_output=True, timeout=60,
    )  # fmt: skip
    replies = [json.loads(line) for line in process.stdout.splitlines()]
    assert [(reply["id"], reply["error"]["code"]) for reply in replies] == [
        (None, -32700), (None, -32600),
    ]  # fmt: skip
    assert "Traceback" not in process.stderr


def test_read_only_lists_only_what_it_allows_and_refuses_the_rest(repo):
    async def session() -> tuple[set, str, bool]:
        async with server(repo, "--read-only") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            refused = await client.call_tool("memory_delete", {"path": "/memories/plan.md"})
            return names, text(refused), refused.is_error

    names, refused, is_error = anyio.run(session)
    assert names == READ_TOOLS
    assert is_error and refused == (
        "memory_delete is not available: this server was started with --read-only."
    )


def test_resources_of_every_scope_with_one_mime_type(repo):
    for scope, path in (("team", "/memories/a.md"), ("agent", "/memories/b.json")):
        done = obversa("memory", "create", "--scope", scope, path, "-", cwd=repo, input="{}\n")
        assert done.returncode == 0, done.stderr

    async def session() -> tuple[list, list]:
        async with server(repo, "--scope", "agent") as client:
            listed = (await client.list_resources()).resources
            read = [(await client.read_resource(r.uri)).contents[0] for r in listed]
            return listed, read

    listed, read = anyio.run(session)
    assert sorted(str(r.uri) for r in listed) == [
        "memory://agent/memories/b.json", "memory://team/memories/a.md",
    ]  # fmt: skip
    for resource, content in zip(listed, read, strict=True):
        assert resource.mime_type == content.mime_type
        assert content.text == "{}\n"


def test_bad_calls_are_error_results_and_200_calls_share_one_session(repo):
    async def session() -> dict:
        seen: dict = {}
        async with server(repo, "--scope", "load") as client:
            unknown = await client.call_tool("no_such_tool", {})
            seen["unknown"] = (unknown.is_error, text(unknown))
            failing = await client.call_tool("why", {"path": "missing.py", "line": 3})
            seen["failing"] = (failing.is_error, text(failing))
            missing = await client.call_tool("memory_view", {"path": "/memories/x.md"})
            seen["missing"] = (missing.is_error, text(missing))
            escaping = await client.call_tool("memory_view", {"path": "/memories/../../etc/passwd"})
            seen["escaping"] = (escaping.is_error, text(escaping))
            started = time.monotonic()
            errors = 0
            for number in range(100):
                path = f"/memories/n{number % 10}.md"
                wrote = await client.call_tool(
                    "memory_create", {"path": path, "file_text": f"{number}\n"}
                )
                read = await client.call_tool("memory_view", {"path": path})
                errors += wrote.is_error + read.is_error
                assert text(read).endswith(f"     1\t{number}\n     2\t")
            seen["seconds"] = time.monotonic() - started
            seen["errors"] = errors
            final = await client.call_tool("memory_view", {"path": "/memories"})
            seen["final"] = text(final)
        return seen

    seen = anyio.run(session)
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
                "memory_create", {"path": "/memories/a.md", "file_text": "x" * 11}
            )
            return text(committed), text(worktree), text(big)

    committed, worktree, big = anyio.run(session)
    assert committed == "/corpus/guide.md:3-3\nRelease on Tuesdays."
    assert worktree == "No passage of the Markdown corpus matches 'fridays'."
    assert big.startswith("The file /memories/a.md would be 11 bytes, over the memory limits")


def test_scope_names_a_scope_and_scope_digest_takes_a_digest_prefix(repo):
    from git_obversa.memory.git_memory import scope_digest

    assert obversa("memory", "create", "--scope", "team", "/memories/a.md", "-",
                   cwd=repo, input="agreed\n").returncode == 0  # fmt: skip

    async def session(*scope: str) -> str:
        async with server(repo, *scope) as client:
            viewed = await client.call_tool("memory_view", {"path": "/memories/a.md"})
            return text(viewed)

    # Issue 27: --scope is always a name, here as in the CLI and the API.
    assert "does not exist" in anyio.run(session, "--scope", scope_digest("team")[:8])
    assert "1\tagreed" in anyio.run(session, "--scope-digest", scope_digest("team")[:8])


def test_why_across_a_rename_gives_the_lines_as_numbered_in_that_commit(repo):
    rename_and_grow(repo)

    async def session():
        async with server(repo) as client:
            schema = next(t for t in (await client.list_tools()).tools if t.name == "why")
            return schema.output_schema, await client.call_tool("why", {"path": "b.py", "line": 5})

    schema, answer = anyio.run(session)
    jsonschema.validate(answer.structured_content, schema)
    [commit] = answer.structured_content["commits"]
    assert (commit["ranges"], commit["paths"], commit["ranges_in_commit"]) == (
        [[5, 5]], ["a.py"], [[2, 2]],
    )  # fmt: skip
    assert "(lines 5 of b.py; lines 2 of a.py there)" in text(answer)
