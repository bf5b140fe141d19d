"""Who wrote *this* line (issue 28, "Read"): `why`, `blame`, the MCP `why` and the web
view name, for each line asked, the agent whose claim in the notes of the commit that owns
it covers the line as numbered in that commit — our own notes, a Git AI note or an Agent
Trace record another tool wrote — and no agent for a line no claim covers."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from git_obversa.lookup.why import annotate
from git_obversa.web import views
from tests.gitutil import git, obversa
from tests.test_attribution import FIXTURES, SESSION
from tests.test_attribution_rewrite import agent_commit, attributed, person_commit, rebase_i
from tests.test_mcp_server import server, text

__all__ = ["attributed"]  # the fixture, taken from the rewrite tests

CLAUDE = f"claude-code (claude-sonnet-4-5), session {SESSION}"
CURSOR = "cursor (claude-sonnet-4-5-20250514), session s_c9883b05a2487d"


def agents_said(repo: Path, target: str) -> list[str]:
    """The `Agent:` lines `why TARGET` prints."""
    shown = obversa("why", target, cwd=repo)
    assert shown.returncode == 0, shown.stderr
    return [line[8:] for line in shown.stdout.splitlines() if line.startswith("Agent:  ")]


def json_commits(repo: Path, command: str, target: str) -> list[dict]:
    shown = obversa(command, target, "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["commits"]


def numbered_file(repo: Path, path: str, count: int, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text("".join(f"line {n}\n" for n in range(1, count + 1)))
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_person_s_fixup_line_names_no_agent(attributed, tmp_path):
    repo = attributed
    base = git(repo, "rev-parse", "HEAD").strip()
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    person_commit(repo, "retry.py", "LIMIT = 10\n", "fixup! Retry three times")
    rebase_i(repo, base, "2s/^pick/fixup/")
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") == "1\n"

    assert agents_said(repo, "retry.py:1") == [CLAUDE]
    assert agents_said(repo, "retry.py:3") == ["not attributed"]
    assert agents_said(repo, "retry.py:1-3") == [f"lines 1-2: {CLAUDE}", "line 3: not attributed"]
    blamed = obversa("blame", "retry.py", cwd=repo).stdout.splitlines()
    assert [line.split(") ")[0].split()[-2] for line in blamed] == ["claude-code"] * 2 + ["-"]
    for command in ("why", "blame"):
        [found] = json_commits(repo, command, "retry.py:2-3")
        assert [agent["lines"] for agent in found["agents"]] == [[[2, 2]]], command
        assert found["unattributed"] == [[3, 3]], command

    # A person's lines put above later: the agent's lines are found where they were.
    text = (repo / "retry.py").read_text()
    (repo / "retry.py").write_text("# Retries\n\n" + text)
    git(repo, "commit", "-q", "-am", "Say what the file is")
    assert agents_said(repo, "retry.py:3-5") == [f"lines 3-4: {CLAUDE}", "line 5: not attributed"]
    assert agents_said(repo, "retry.py:5") == ["not attributed"]
    assert agents_said(repo, "retry.py:1") == []  # a commit without notes says nothing
    with open(repo / "retry.py", "a") as handle:
        handle.write("UNSAVED = 1\n")  # a line not committed yet: no notes to read
    assert agents_said(repo, "retry.py") == [f"lines 3-4: {CLAUDE}", "line 5: not attributed"]


def test_a_git_ai_note_in_the_standard_s_shape_covers_only_its_lines(repo):
    """The standard's example: src/main.rs is attested 1-10,15-20 and 25,30-35 for one
    cursor session and 42-50 for a person; lines between are nobody's."""
    sha = numbered_file(repo, "src/main.rs", 50, "Written with an agent elsewhere")
    example = FIXTURES / "git-ai-example-sessions.note"
    git(repo, "notes", "--ref", "ai", "add", "-F", str(example), "HEAD")

    assert agents_said(repo, "src/main.rs:10") == [CURSOR]
    assert agents_said(repo, "src/main.rs:12") == ["not attributed"]
    assert agents_said(repo, "src/main.rs:45") == ["not attributed"]  # the person's
    assert agents_said(repo, "src/main.rs:9-16") == [
        f"lines 9-10, 15-16: {CURSOR}",
        "lines 11-14: not attributed",
    ]
    # The whole file, as the cache answers it after the first time: the same lines.
    for _ in range(2):
        [found] = json_commits(repo, "why", "src/main.rs")
        assert [agent["lines"] for agent in found["agents"]] == [
            [[1, 10], [15, 20], [25, 25], [30, 35]]
        ]
        assert found["unattributed"] == [[11, 14], [21, 24], [26, 29], [36, 50]]
    owner = annotate(repo, "src/main.rs", 9, 12).commits[sha]  # the Python API
    assert ([a["lines"] for a in owner.agents], owner.unattributed) == ([[[9, 10]]], ((11, 12),))


def test_an_agent_trace_record_s_ranges_name_its_agents(repo):
    """The specification's example record, as Cursor writes it (no session of ours: the
    tool that wrote it names the agent), with one more conversation, `mixed`."""
    sha = numbered_file(repo, "src/utils/parser.ts", 70, "Parse dates")
    record = json.loads((FIXTURES / "agent-trace-readme-example.json").read_text())
    record["vcs"]["revision"] = sha
    [parser] = [file for file in record["files"] if file["path"] == "src/utils/parser.ts"]
    mixed = {"contributor": {"type": "mixed", "model_id": "openai/gpt-4o"}}
    parser["conversations"].append({**mixed, "ranges": [{"start_line": 60, "end_line": 70}]})
    git(repo, "notes", "--ref", "agent-trace", "add", "-m", json.dumps(record), "HEAD")

    opus = "cursor (anthropic/claude-opus-4-5-20251101)"
    gpt = "cursor (openai/gpt-4o) (mixed: a person may have written some of these lines)"
    assert agents_said(repo, "src/utils/parser.ts:50") == [opus]
    assert agents_said(repo, "src/utils/parser.ts:40-43") == [
        f"lines 42-43: {opus}",
        "lines 40-41: not attributed",
    ]
    assert agents_said(repo, "src/utils/parser.ts:66-69") == [
        f"lines 66-67: {opus}",
        f"lines 66-69: {gpt}",
    ]


def test_the_mcp_why_and_the_web_view_say_the_same(attributed):
    repo = attributed
    base = git(repo, "rev-parse", "HEAD").strip()
    agent_commit(repo, "retry.py", "ATTEMPTS = 3\nDELAY = 0.1\n", "Retry three times")
    person_commit(repo, "retry.py", "LIMIT = 10\n", "fixup! Retry three times")
    rebase_i(repo, base, "2s/^pick/fixup/")

    async def session():
        async with server(repo) as client:
            return await client.call_tool("why", {"path": "retry.py", "range": [1, 3]})

    answer = anyio.run(session)
    assert f"Agent: lines 1-2: {CLAUDE}\nAgent: line 3: not attributed\n" in text(answer)
    [found] = answer.structured_content["commits"]
    assert (found["agents"][0]["lines"], found["unattributed"]) == ([[1, 2]], [[3, 3]])

    page = views.file_blame(str(repo), "HEAD", "retry.py")
    [found] = [c for c in page["commits"].values() if c["agents"]]
    assert [(a["text"], a["lines"]) for a in found["agents"]] == [(CLAUDE, [[1, 2]])]
    assert found["unattributed"] == [[3, 3]]
