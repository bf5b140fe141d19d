"""Codex, Gemini CLI and Aider capture, end to end: the real `git obversa agent-hook` /
`record ingest` commands on session files shaped like the agents' own (fixtures/agents,
from the record types in openai/codex, google-gemini/gemini-cli and Aider-AI/aider), and
a real `git commit` through the installed hooks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gitutil import git, obversa

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
CODEX_LINES = (FIXTURES / "codex-rollout.jsonl").read_text().splitlines(keepends=True)
GEMINI_LINES = (FIXTURES / "gemini-session.jsonl").read_text().splitlines(keepends=True)
CODEX_COMMIT_CALL = 16  # the rollout holds this many lines when the commit's PreToolUse fires
GEMINI_COMMIT_CALL = 8  # the recording holds this many when run_shell_command's BeforeTool fires


def payload_texts(lines: list[str], kind: str) -> list[str]:
    """The texts the fixture lines hold of KIND, read straight from the JSON."""
    texts = []
    for line in lines:
        value = json.loads(line)
        payload = value.get("payload", {})
        if kind == "reasoning" and payload.get("type") == "reasoning":
            texts += [part["text"] for part in payload["summary"]]
        if kind == "message" and payload.get("role") == "assistant":
            texts += [part["text"] for part in payload["content"]]
    return texts


def pending(repo) -> list[tuple[str, str]]:
    done = obversa("record", "show", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return [(turn["kind"], turn["text"]) for turn in json.loads(done.stdout)]


def hook(agent: str, repo, event: dict):
    done = obversa("agent-hook", agent, cwd=repo, input=json.dumps(event))
    assert done.returncode == 0 and done.stdout == "", (done.stdout, done.stderr)
    return done


@pytest.fixture
def project(repo):
    assert obversa("install", cwd=repo).returncode == 0
    # Codex's reasoning summaries and Gemini's thoughts are captured as thinking, which the
    # built-in composer leaves out by default; these tests follow them into the commit.
    git(repo, "config", "obversa.thinking", "include")
    (repo / "client.py").write_text("RETRIES = 0\n")
    git(repo, "add", "client.py")
    git(repo, "commit", "-q", "-m", "Add the client")
    (repo / "client.py").write_text("RETRIES = 2\n")
    return repo


def codex_event(repo, rollout, name: str, **fields) -> dict:
    event = {
        "session_id": "0199a1b2-7c3d-7e21-9f00-4b5c6d7e8f90",
        "transcript_path": str(rollout),
        "cwd": str(repo),
        "hook_event_name": name,
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "turn_id": "0199a1b2-8000-7000-8000-000000000001",
    }
    return {**event, **fields}


def test_codex_turn_with_a_commit_inside_it(project, tmp_path):
    rollout = tmp_path / "sessions" / "2026" / "03" / "02" / "rollout-2026-03-02T10-14-03.jsonl"
    rollout.parent.mkdir(parents=True)
    reasons = payload_texts(CODEX_LINES, "reasoning")
    (final,) = payload_texts(CODEX_LINES, "message")

    # Mid-turn: Codex is about to run `git commit`; the rollout has the turn so far.
    rollout.write_text("".join(CODEX_LINES[:CODEX_COMMIT_CALL]))
    command = {"command": "git commit -am 'Retry API calls'"}
    hook(
        "codex",
        project,
        codex_event(
            project,
            rollout,
            "PreToolUse",
            tool_name="Bash",
            tool_use_id="call_Q3",
            tool_input=command,
        ),
    )
    assert pending(project) == [("engine:thinking", text) for text in reasons]
    git(project, "commit", "-q", "-am", "Retry API calls")
    message = git(project, "log", "-1", "--format=%B")
    assert "The upstream API fails in bursts of two" in message
    assert pending(project) == []

    # The turn ends: the rest of the rollout, and Stop with the final message (which the
    # rollout also holds, as a response item and as an event): taken once.
    rollout.write_text("".join(CODEX_LINES))
    stop = codex_event(
        project, rollout, "Stop", stop_hook_active=False, last_assistant_message=final
    )
    hook("codex", project, stop)
    assert pending(project) == [("engine:text", final)]
    hook("codex", project, stop)  # Stop again (a retry, a second hook): nothing new
    assert pending(project) == [("engine:text", final)]

    # A forked session copies the history into a new rollout with new timestamps.
    fork = rollout.with_name("rollout-2026-03-02T11-00-00.jsonl")
    copied = [json.loads(line) for line in CODEX_LINES]
    for number, value in enumerate(copied):
        value["timestamp"] = f"2026-03-02T11:00:{number:02d}.000Z"
    fork.write_text("".join(json.dumps(value) + "\n" for value in copied))
    hook("codex", project, codex_event(project, fork, "Stop", last_assistant_message=final))
    assert pending(project) == [("engine:text", final)]


def test_codex_hook_reads_only_the_tail_and_waits_for_a_half_written_line(project, tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    reasons = payload_texts(CODEX_LINES, "reasoning")
    cut = CODEX_LINES[8]  # the first reasoning item
    rollout.write_text("".join(CODEX_LINES[:8]) + cut[: len(cut) // 2])
    stop = codex_event(project, rollout, "Stop", last_assistant_message=None)
    hook("codex", project, stop)
    assert pending(project) == []
    rollout.write_text("".join(CODEX_LINES[:9]))
    hook("codex", project, stop)
    assert pending(project) == [("engine:thinking", reasons[0])]
    # A commit-free shell command: the hook returns before it reads anything.
    rollout.write_text("".join(CODEX_LINES))
    ls = codex_event(project, rollout, "PreToolUse", tool_input={"command": "ls -la"})
    hook("codex", project, ls)
    assert pending(project) == [("engine:thinking", reasons[0])]


def test_the_hooks_fail_open(project, tmp_path):
    for agent in ("codex", "gemini"):
        missing = {
            "transcript_path": str(tmp_path / "gone.jsonl"),
            "cwd": str(project),
            "hook_event_name": "Stop",
        }
        done = hook(agent, project, missing)
        assert done.stderr.startswith("git obversa agent-hook: warning: reasoning not captured:")
        assert done.stderr.count("\n") == 1
        broken = obversa("agent-hook", agent, cwd=project, input="{not json")
        assert broken.returncode == 0 and broken.stdout == ""
        assert "is not JSON" in broken.stderr
        outside = {"transcript_path": str(tmp_path / "gone.jsonl"), "cwd": str(tmp_path)}
        assert hook(agent, project, outside).stderr == ""  # not a worktree: nothing to do
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text(CODEX_LINES[8] + "{half a record\n" + CODEX_LINES[14])
    done = hook("codex", project, codex_event(project, rollout, "Stop"))
    warning = f"git obversa agent-hook: warning: {rollout}: line 2 is not JSON; skipped\n"
    assert done.stderr == warning
    assert len(pending(project)) == 2
    again = hook("codex", project, codex_event(project, rollout, "Stop"))
    assert again.stderr == ""  # reported once


def gemini_event(repo, recording, name: str, **fields) -> dict:
    event = {
        "session_id": "5d1c7a90-3b2e-4f6a-9c8d-1e2f3a4b5c6d",
        "transcript_path": str(recording),
        "cwd": str(repo),
        "hook_event_name": name,
        "timestamp": "2026-03-02T11:02:20.600Z",
    }
    return {**event, **fields}


def test_gemini_turn_with_a_commit_inside_it(project, tmp_path):
    recording = tmp_path / "tmp" / "app" / "chats" / "session-2026-03-02T11-02-5d1c7a90.jsonl"
    recording.parent.mkdir(parents=True)
    records = [json.loads(line) for line in GEMINI_LINES]
    first_text = records[3]["content"]
    first_thought = records[3]["thoughts"][0]

    recording.write_text("".join(GEMINI_LINES[:GEMINI_COMMIT_CALL]))
    shell = {"command": "git commit -am 'Retry API calls'", "description": "Commit the change"}
    hook(
        "gemini",
        project,
        gemini_event(
            project, recording, "BeforeTool", tool_name="run_shell_command", tool_input=shell
        ),
    )
    thought = f"{first_thought['subject']}\n{first_thought['description']}"
    # The message re-appended with its tokens and tool calls (same id) is taken once.
    assert pending(project) == [("engine:thinking", thought), ("engine:text", first_text)]
    git(project, "commit", "-q", "-am", "Retry API calls")
    assert "bursts of two" in git(project, "log", "-1", "--format=%B").lower()

    recording.write_text("".join(GEMINI_LINES))
    final = records[9]["content"]
    after = gemini_event(
        project,
        recording,
        "AfterAgent",
        prompt="Make the API client retry",
        prompt_response=final,
        stop_hook_active=False,
    )
    hook("gemini", project, after)
    last_thought = records[9]["thoughts"][0]
    assert pending(project) == [
        ("engine:thinking", f"{last_thought['subject']}\n{last_thought['description']}"),
        ("engine:text", final),
    ]
    # A rewind and a resumed session re-append records: nothing is taken twice.
    with recording.open("a") as handle:
        handle.write(json.dumps({"$rewindTo": records[9]["id"]}) + "\n")
        handle.write(GEMINI_LINES[9])
    hook("gemini", project, after)
    assert len(pending(project)) == 2


def test_gemini_takes_the_final_response_when_the_recording_lacks_it(project, tmp_path):
    recording = tmp_path / "session.jsonl"
    recording.write_text("".join(GEMINI_LINES[:2]))
    said = "Two retries: bursts of two."
    hook("gemini", project, gemini_event(project, recording, "AfterAgent", prompt_response=said))
    assert pending(project) == [("engine:text", said)]


def test_aider_chat_history_ingest(project):
    history = project / ".aider.chat.history.md"
    history.write_text((FIXTURES / "aider.chat.history.md").read_text())
    done = obversa("record", "ingest", "--aider", str(history), "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    texts = [turn["text"] for turn in json.loads(done.stdout)]
    assert texts == [
        "The upstream fails in bursts of two, so two retries recover a burst; more attempts "
        "would only delay real errors.",
        "The bursts last under a second, so a fixed short pause is enough; backoff would add "
        "latency without recovering more calls.",
        "You're welcome.",
    ]
    again = obversa("record", "ingest", "--aider", str(history), cwd=project)
    assert again.stdout == "Captured 0 new turns for stage commit.\n"
    with history.open("a") as handle:
        handle.write("#### And the timeout?  \n\n")
        handle.write("Ten seconds: the slowest healthy call takes four.\n")
    more = obversa("record", "ingest", "--aider", str(history), "--json", cwd=project)
    assert [t["text"] for t in json.loads(more.stdout)] == [
        "Ten seconds: the slowest healthy call takes four."
    ]
    missing = obversa("record", "ingest", "--aider", str(project / "nope.md"), cwd=project)
    assert missing.returncode == 1 and "cannot read the transcript" in missing.stderr


def test_the_hook_path_imports_neither_anthropic_nor_mcp(project, tmp_path):
    import subprocess
    import sys

    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("".join(CODEX_LINES))
    event = json.dumps(codex_event(project, rollout, "Stop"))
    code = (
        "import sys\n"
        "from git_obversa.cli import main\n"
        "for argv in (['agent-hook', 'codex'], ['agent-hook', 'gemini'], ['why', 'client.py'],"
        " ['hook', 'prepare-commit-msg', sys.argv[1]]):\n"
        "    main(argv)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'mcp'))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    message = tmp_path / "MSG"
    message.write_text("Subject\n")
    done = subprocess.run(
        [sys.executable, "-c", code, str(message)],
        cwd=project,
        input=event,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr
