"""Capture from the command line and from agents: `git obversa record …` and
`git obversa agent-hook claude-code`, driven as a user would, in real repositories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from git_obversa import open_reasoning_record
from tests.gitutil import git, obversa

TRANSCRIPT = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-code-session.jsonl"
)
FIXTURE_TURNS = [
    ("engine:thinking", "The gateway fails in bursts"),
    ("engine:text", "I'll look at how the payments client retries today"),
    ("engine:thinking", "It loops on 503 with a fixed 100 ms sleep"),
    ("engine:text", "Retries now stop after 3 attempts"),
]


def pending(cwd) -> list[dict]:
    completed = obversa("record", "show", "--raw", "--json", cwd=cwd)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def assistant_entry(uuid: str, parent: str, text: str, stamp: str, kind: str = "text") -> str:
    block = {"type": kind, kind: text}
    if kind == "thinking":
        block["signature"] = "c2lnbmF0dXJl"
    entry = {
        "parentUuid": parent,
        "isSidechain": False,
        "type": "assistant",
        "sessionId": "s",
        "cwd": "/src",
        "message": {"role": "assistant", "content": [block]},
        "uuid": uuid,
        "timestamp": stamp,
    }
    return json.dumps(entry) + "\n"


@pytest.fixture
def transcript(tmp_path) -> Path:
    path = tmp_path / "session.jsonl"
    shutil.copy(TRANSCRIPT, path)
    return path


# --- record note / show / clear --------------------------------------------------------------


def test_note_show_clear_round_trip(repo):
    assert (
        obversa("record", "note", "Chose", "retries", "because", "bursts.", cwd=repo).returncode
        == 0
    )
    thought = obversa(
        "record", "note", "--thinking", "-", cwd=repo, input="a queue would hide it\n"
    )
    assert thought.returncode == 0, thought.stderr
    assert [(t["stage"], t["node"], t["kind"], t["text"]) for t in pending(repo)] == [
        ("commit", "commit", "note", "Chose retries because bursts."),
        ("commit", "commit", "engine:thinking", "a queue would hide it"),
    ]
    shown = obversa("record", "show", cwd=repo)
    assert "Chose retries because bursts." in shown.stdout
    assert "(thinking)" in shown.stdout and "2 pending turns." in shown.stdout
    cleared = obversa("record", "clear", cwd=repo)
    assert cleared.stdout.strip() == "Dropped 2 pending turns."
    assert pending(repo) == []
    assert "No pending turns" in obversa("record", "show", cwd=repo).stdout


def test_note_stage_from_option_then_config_then_default(repo):
    obversa("record", "note", "default", cwd=repo)
    git(repo, "config", "obversa.stage", "implement")
    obversa("record", "note", "configured", cwd=repo)
    obversa("record", "note", "--stage", "review", "explicit", cwd=repo)
    assert [(t["stage"], t["text"]) for t in pending(repo)] == [
        ("commit", "default"),
        ("implement", "configured"),
        ("review", "explicit"),
    ]
    obversa("record", "clear", "--stage", "implement", cwd=repo)
    assert [t["text"] for t in pending(repo)] == ["default", "explicit"]


def test_note_from_a_subdirectory_lands_in_the_worktree(repo):
    (repo / "src").mkdir()
    obversa("record", "note", "from below", cwd=repo / "src")
    assert [t["text"] for t in pending(repo)] == ["from below"]


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(["   "], None), (["-"], "\n\n"), (["-"], "")],
    ids=["blank", "stdin", "none"],
)
def test_empty_note_is_an_error(repo, args, stdin):
    completed = obversa("record", "note", *args, cwd=repo, input=stdin)
    assert completed.returncode == 1
    assert completed.stderr.strip() == "git obversa record: the text is empty; nothing to record"
    assert pending(repo) == []


def test_record_outside_a_repository_is_one_clear_line(tmp_path):
    completed = obversa("record", "note", "x", cwd=tmp_path)
    assert completed.returncode == 1
    assert len(completed.stderr.strip().splitlines()) == 1
    assert completed.stderr.startswith("git obversa record: not a git repository: ")


def test_damaged_store_is_reported_and_clear_recovers(repo):
    obversa("record", "note", "fine", cwd=repo)
    turns = Path(git(repo, "rev-parse", "--git-path", "obversa/record/turns.jsonl").strip())
    turns = turns if turns.is_absolute() else repo / turns
    turns.write_text("not json\n")
    shown = obversa("record", "show", cwd=repo)
    assert shown.returncode == 1
    assert "is not JSON" in shown.stderr and "record clear" in shown.stderr
    assert obversa("record", "clear", cwd=repo).returncode == 0
    assert pending(repo) == []


def test_damaged_claimed_turns_are_reported_and_clear_recovers(repo):
    obversa("record", "note", "fine", cwd=repo)
    store = Path(
        git(repo, "rev-parse", "--path-format=absolute", "--git-path", "obversa/record").strip()
    )
    (store / "claimed.jsonl").write_text("not json\n")  # left by an aborted commit
    shown = obversa("record", "show", cwd=repo)
    assert shown.returncode == 1 and "claimed.jsonl:1 is not JSON" in shown.stderr
    cleared = obversa("record", "clear", cwd=repo)
    assert cleared.returncode == 0 and cleared.stdout.startswith("Dropped the damaged turns")
    assert pending(repo) == []


@pytest.mark.parametrize("verb", [["note", "x"], ["show"], ["clear"]])
def test_a_store_that_cannot_be_used_is_one_clear_line(repo, verb):
    store = Path(
        git(repo, "rev-parse", "--path-format=absolute", "--git-path", "obversa/record").strip()
    )
    store.parent.mkdir(parents=True)
    store.write_text("a file where the store's directory should be\n")
    completed = obversa("record", *verb, cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.startswith("git obversa record: cannot use the captured turns: ")
    assert len(completed.stderr.strip().splitlines()) == 1


def test_record_help_teaches_with_examples(repo):
    helped = obversa("record", "--help", cwd=repo)
    assert helped.returncode == 0
    assert "examples:" in helped.stdout and "record note" in helped.stdout
    assert obversa("record", cwd=repo).returncode == 2


# --- record ingest --claude-code ----------------------------------------------------------------


def test_ingest_takes_text_and_thinking_only(repo, transcript):
    completed = obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Captured 4 new turns for stage commit."
    turns = pending(repo)
    assert len(turns) == len(FIXTURE_TURNS)
    for turn, (kind, start) in zip(turns, FIXTURE_TURNS, strict=True):
        assert (turn["kind"], turn["text"][: len(start)]) == (kind, start)
    texts = " ".join(t["text"] for t in turns)
    assert "Searching the tests directory" not in texts  # a side chain
    assert "file_path" not in texts and "has been updated" not in texts  # tool use / result


def test_ingest_again_takes_nothing_then_only_new_entries(repo, transcript):
    obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    again = obversa("record", "ingest", "--claude-code", str(transcript), "--json", cwd=repo)
    assert json.loads(again.stdout) == []
    with open(transcript, "a") as handle:
        handle.write(
            assistant_entry("u-new-1", "x", "Next turn: also cap the pool.", "2025-09-02T15:00:00Z")
        )
    newer = obversa("record", "ingest", "--claude-code", str(transcript), "--stage", "s2", cwd=repo)
    assert newer.stdout.strip() == "Captured 1 new turn for stage s2."
    assert [t["text"] for t in pending(repo)][4:] == ["Next turn: also cap the pool."]


def test_ingest_half_written_line_waits_for_its_end(repo, transcript):
    line = assistant_entry("u-half", "x", "Written in two pieces.", "2025-09-02T15:00:00Z")
    with open(transcript, "a") as handle:
        handle.write(line[:40])
    obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert len(pending(repo)) == 4
    with open(transcript, "a") as handle:
        handle.write(line[40:])
    obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert [t["text"] for t in pending(repo)][4:] == ["Written in two pieces."]


def test_ingest_survives_a_rewritten_transcript(repo, transcript):
    obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    lines = transcript.read_text().splitlines(keepends=True)
    # Compaction-like rewrite: the first half is gone, the rest kept, a new turn follows.
    transcript.write_text(
        "".join(lines[6:])
        + assistant_entry("u-after", "x", "After the rewrite.", "2025-09-02T16:00:00Z")
    )
    completed = obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert [t["text"] for t in pending(repo)][4:] == ["After the rewrite."]
    # Rewritten beyond recognition: what was taken stays taken, anything unknown is new
    # (whatever its timestamp), and the malformed line is reported once.
    transcript.write_text(
        "garbage that is not json\n"
        + lines[1]
        + assistant_entry("u-old", "x", "Unknown, stamped early.", "2025-09-02T10:00:00Z")
        + assistant_entry("u-fresh", "x", "Fresh.", "2025-09-02T17:00:00Z", kind="thinking")
    )
    completed = obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert completed.returncode == 0, completed.stderr
    assert f"{transcript}: line 1 is not JSON; skipped" in completed.stderr
    assert [(t["kind"], t["text"]) for t in pending(repo)][5:] == [
        ("engine:text", "Unknown, stamped early."),
        ("engine:thinking", "Fresh."),
    ]
    with open(transcript, "a") as handle:
        handle.write(assistant_entry("u-last", "x", "Last.", "2025-09-02T18:00:00Z"))
    completed = obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    assert "not JSON" not in completed.stderr
    assert [t["text"] for t in pending(repo)][7:] == ["Last."]
    transcript.write_text("")  # truncated to nothing
    assert obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo).returncode == 0
    assert len(pending(repo)) == 8


def test_ingest_missing_transcript_is_one_clear_line(repo, tmp_path):
    missing = tmp_path / "nope.jsonl"
    completed = obversa("record", "ingest", "--claude-code", str(missing), cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.strip() == (
        f"git obversa record: cannot read the transcript {missing}: No such file or directory"
    )


def test_ingest_of_a_directory_is_one_clear_line(repo, tmp_path):
    completed = obversa("record", "ingest", "--claude-code", str(tmp_path), cwd=repo)
    assert completed.returncode == 1
    assert completed.stderr.strip() == (
        f"git obversa record: cannot read the transcript {tmp_path}: Is a directory"
    )


def test_ingested_reasoning_reaches_the_record_scrubbed(repo, transcript):
    obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    seen = []

    def compose(request):
        seen.append(request["captured"])
        return {
            "subject": "fix(payments): retry budget",
            "body": " ".join(t["text"] for t in request["captured"]),
        }

    record = open_reasoning_record("commit", compose=compose, repository=repo)
    message = record.message({"status": "pass"})
    # Scrubbed when captured (issue 24): the stored turn the composer reads has no key.
    assert "sk_live_" not in seen[0][-1]["text"] and "[redacted]" in seen[0][-1]["text"]
    assert "sk_live_" not in message["body"] and "[redacted]" in message["body"]
    assert "token bucket" in message["body"]


# --- agent-hook claude-code ---------------------------------------------------------------


def hook_event(transcript: Path, cwd: Path, **extra) -> str:
    event = {
        "session_id": "6513270e-269e-4d37-b2a7-4de452e6b438",
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    return json.dumps({**event, **extra})


def test_agent_hook_ingests_into_the_sessions_worktree(repo, transcript, tmp_path):
    assert obversa("install", cwd=repo).returncode == 0
    other = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "agent", str(other))
    completed = obversa(
        "agent-hook", "claude-code", cwd=tmp_path, input=hook_event(transcript, other)
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "", "")
    assert len(pending(other)) == 4
    assert pending(repo) == []  # the main worktree saw nothing
    again = obversa("agent-hook", "claude-code", cwd=tmp_path, input=hook_event(transcript, other))
    assert again.returncode == 0 and len(pending(other)) == 4


def test_agent_hook_uses_the_configured_stage(repo, transcript):
    git(repo, "config", "obversa.stage", "implement")
    obversa("agent-hook", "claude-code", cwd=repo, input=hook_event(transcript, repo))
    assert {t["stage"] for t in pending(repo)} == {"implement"}


@pytest.mark.parametrize(
    ("event", "warning"),
    [
        ("this is not json", "the hook event on stdin is not JSON"),
        ('{"session_id": "x"}', "the hook event on stdin has no transcript_path"),
        (None, "No such file or directory"),
    ],
    ids=["junk", "no-transcript", "missing-transcript"],
)
def test_agent_hook_never_fails_the_agent(repo, tmp_path, event, warning):
    if event is None:
        event = hook_event(tmp_path / "gone.jsonl", repo)
    completed = obversa("agent-hook", "claude-code", cwd=repo, input=event)
    assert completed.returncode == 0
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("git obversa agent-hook: warning:")
    assert warning in lines[0]
    assert pending(repo) == []


def test_agent_hook_outside_a_repository_does_nothing(tmp_path, transcript):
    outside = tmp_path / "plain"
    outside.mkdir()
    completed = obversa(
        "agent-hook", "claude-code", cwd=outside, input=hook_event(transcript, outside)
    )
    assert (completed.returncode, completed.stderr) == (0, "")


def test_agent_hook_without_cwd_uses_the_hooks_directory(repo, transcript):
    event = json.loads(hook_event(transcript, repo))
    del event["cwd"]  # older Claude Code Stop events
    completed = obversa("agent-hook", "claude-code", cwd=repo, input=json.dumps(event))
    assert completed.returncode == 0 and len(pending(repo)) == 4


def test_concurrent_agent_hooks_never_duplicate(repo, transcript):
    assert obversa("install", cwd=repo).returncode == 0
    processes = [
        subprocess.Popen(
            ["git", "obversa", "agent-hook", "claude-code"],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for process in processes:
        process.stdin.write(hook_event(transcript, repo))
        process.stdin.close()
    for process in processes:
        assert process.wait(timeout=60) == 0
        assert process.stderr.read() == ""
    turns = pending(repo)
    assert len(turns) == 4
    assert len({t["seq"] for t in turns}) == 4


def test_agent_hook_help_shows_the_settings_line(repo):
    helped = obversa("agent-hook", "--help", cwd=repo)
    assert helped.returncode == 0
    assert '"command": "git obversa agent-hook claude-code"' in helped.stdout


def test_agent_hook_stays_light(repo, transcript):
    # It runs after every agent turn: no memory engine, no dulwich.
    script = (
        "import io, sys\n"
        "sys.stdin = io.StringIO(sys.argv[1])\n"
        "from git_obversa.cli import main\n"
        "assert main(['agent-hook', 'claude-code']) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('dulwich') or m in "
        "('git_obversa.memory.engine', 'git_obversa.memory.gitstore')))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, hook_event(transcript, repo)],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"
    assert len(pending(repo)) == 4


# --- Claude Code 2.1 events -----------------------------------------------------------------


def message_line(uuid: str, message_id: str, block: dict, stamp: str, **extra) -> str:
    entry = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "assistant",
        "sessionId": "s",
        "message": {"id": message_id, "model": "claude-opus-4-5", "content": [block]},
        "uuid": uuid,
        "timestamp": stamp,
        **extra,
    }
    return json.dumps(entry) + "\n"


def prompt_line(uuid: str, text: str, stamp: str) -> str:
    entry = {"type": "user", "message": {"role": "user", "content": text}}
    return json.dumps({**entry, "uuid": uuid, "timestamp": stamp}) + "\n"


def stop(transcript: Path, cwd: Path, said: str) -> subprocess.CompletedProcess:
    event = hook_event(transcript, cwd, last_assistant_message=said)
    return obversa("agent-hook", "claude-code", cwd=cwd, input=event)


def test_stop_takes_the_last_message_the_transcript_lacks_once(repo, tmp_path):
    obversa("install", cwd=repo)
    transcript = tmp_path / "s.jsonl"
    said = "Kept the cache: invalidation is\nper key, so stale reads cannot happen."
    transcript.write_text(
        prompt_line("p1", "Why keep the cache?", "2026-11-30T10:00:00Z")
        + message_line("a1", "msg_1", {"type": "text", "text": "Checking."}, "2026-11-30T10:00:01Z")
    )
    completed = stop(transcript, repo, said)
    assert (completed.returncode, completed.stderr) == (0, "")
    assert [t["text"] for t in pending(repo)] == ["Checking.", said]
    stop(transcript, repo, said)  # Stop again (a Stop hook made the agent go on)
    with open(transcript, "a") as handle:  # Claude Code writes the message, in two blocks
        handle.write(
            message_line(
                "a2", "msg_2", {"type": "text", "text": "Kept the cache: invalidation is"}, "T2"
            )
            + message_line(
                "a3",
                "msg_2",
                {"type": "text", "text": "per key, so stale reads cannot happen."},
                "T3",
            )
            + prompt_line("p2", "Thanks", "2026-11-30T10:01:00Z")
            + message_line("a4", "msg_3", {"type": "text", "text": "Welcome."}, "T4")
        )
    obversa("agent-hook", "claude-code", cwd=repo, input=hook_event(transcript, repo))
    assert [t["text"] for t in pending(repo)] == ["Checking.", said, "Welcome."]
    stop(transcript, repo, "Welcome.")  # already in the transcript
    assert len(pending(repo)) == 3


def test_stop_takes_only_the_unwritten_rest_of_a_message(repo, tmp_path):
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(
        message_line("a1", "msg_1", {"type": "text", "text": "First part."}, "T1")
    )
    stop(transcript, repo, "First part.\n\nSecond part.")
    assert [t["text"] for t in pending(repo)] == ["First part.", "Second part."]


def test_an_empty_transcript_path_is_a_quiet_no_op(repo, tmp_path):
    event = hook_event(tmp_path / "x.jsonl", repo, transcript_path="")
    completed = obversa("agent-hook", "claude-code", cwd=repo, input=event)
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "", "")
    assert pending(repo) == []


def test_capture_says_once_when_no_commit_would_carry_it(repo, transcript):
    line = "this repository's commit hooks are not installed"
    noted = obversa("record", "note", "Chose retries.", cwd=repo)
    ingested = obversa("record", "ingest", "--claude-code", str(transcript), cwd=repo)
    (transcript.parent / "t2.jsonl").write_text(
        message_line("b1", "msg_b", {"type": "text", "text": "More."}, "T9")
    )
    hooked = obversa(
        "agent-hook",
        "claude-code",
        cwd=repo,
        input=hook_event(transcript.parent / "t2.jsonl", repo),
    )
    for completed in (noted, ingested, hooked):
        assert completed.returncode == 0
        assert [text for text in completed.stderr.splitlines() if line in text] != []
        assert len(completed.stderr.splitlines()) == 1
        assert "git obversa install" in completed.stderr
    obversa("install", cwd=repo)
    assert obversa("record", "note", "Again.", cwd=repo).stderr == ""


def test_a_sub_agents_commit_carries_the_sub_agents_reasoning(repo, tmp_path):
    obversa("install", cwd=repo)
    transcript = tmp_path / "session-1.jsonl"
    transcript.write_text(
        message_line("a1", "msg_1", {"type": "text", "text": "Delegating the fix."}, "T1")
    )
    own = tmp_path / "session-1" / "subagents" / "agent-a7.jsonl"
    own.parent.mkdir(parents=True)
    own.write_text(
        message_line(
            "s1",
            "msg_s",
            {"type": "text", "text": "The sub-agent keeps the parser: a rewrite risks the API."},
            "T2",
            isSidechain=True,
            agentId="a7",
        )
    )
    event = hook_event(
        transcript,
        repo,
        session_id="session-1",
        agent_id="a7",
        agent_type="general-purpose",
        hook_event_name="PreToolUse",
        tool_name="Bash",
        tool_input={"command": "git commit -am 'Keep the parser'"},
        tool_use_id="toolu_1",
    )
    completed = obversa("agent-hook", "claude-code", cwd=repo, input=event)
    assert (completed.returncode, completed.stderr) == (0, "")
    assert [t["text"] for t in pending(repo)] == [
        "Delegating the fix.",
        "The sub-agent keeps the parser: a rewrite risks the API.",
    ]
    # SubagentStop's message is the sub-agent's: the session's own capture ignores it.
    event = hook_event(
        transcript, repo, hook_event_name="SubagentStop", last_assistant_message="Sub done."
    )
    assert obversa("agent-hook", "claude-code", cwd=repo, input=event).stderr == ""
    assert len(pending(repo)) == 2


def test_streamed_deltas_are_one_turn_and_blocks_stay_apart(repo):
    assert obversa("install", cwd=repo).returncode == 0
    record = open_reasoning_record("commit", repository=repo)
    for delta in ("Retr", "ies stop after three", " attempts"):
        record.observe({"kind": "engine:text", "path": ["commit"], "delta": delta})
    record.observe({"kind": "engine:tool", "path": ["commit"], "delta": "ls"})
    record.observe({"kind": "engine:text", "path": ["commit"], "delta": "It is only used here"})
    assert [t["text"] for t in pending(repo)] == [
        "Retries stop after three attempts",
        "It is only used here",
    ]


def test_separate_blocks_are_never_glued_in_the_commit(repo):
    assert obversa("install", cwd=repo).returncode == 0
    record = open_reasoning_record("commit", repository=repo)
    record.observe({"kind": "engine:text", "path": ["commit"], "delta": "Retries stop after"})
    record.observe({"kind": "engine:text", "path": ["commit"], "delta": " three attempts"})
    record.observe({"kind": "engine:tool", "path": ["commit"], "delta": "ls"})
    record.observe({"kind": "engine:text", "path": ["commit"], "delta": "It is only used here"})
    (repo / "x.txt").write_text("x\n")
    git(repo, "add", "x.txt")
    git(repo, "commit", "-q", "-m", "Bound retries")
    body = " ".join(git(repo, "log", "-1", "--format=%b").split())
    assert "Retries stop after three attempts" in body
    assert "attemptsIt" not in body
    assert pending(repo) == []


def test_show_prints_what_a_commit_would_carry_and_raw_on_request(repo):
    key = "sk-ant-api03-" + "Q7x2Lm9Pz4Kd8Rt1Vb6Nw3Hy5Jc0Fg" * 3 + "AA"
    obversa("record", "note", f"Rotated {key} after the leak.", cwd=repo)
    long = "Why the cache stays. " + "filler words here " * 20_000 + "The end of it."
    obversa("record", "note", "-", cwd=repo, input=long)
    shown = obversa("record", "show", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert key not in shown.stdout and "Rotated [redacted] after the leak." in shown.stdout
    assert "Why the cache stays." in shown.stdout and "The end of it." in shown.stdout
    assert "characters left out" in shown.stdout and len(shown.stdout) < 20_000
    as_json = json.loads(obversa("record", "show", "--json", cwd=repo).stdout)
    assert key not in json.dumps(as_json) and len(as_json[1]["text"]) < 20_000
    raw = json.loads(obversa("record", "show", "--raw", "--json", cwd=repo).stdout)
    # Raw is uncut, but scrubbed: a secret is never stored (issue 24).
    assert [turn["text"] for turn in raw] == ["Rotated [redacted] after the leak.", long]
    assert key not in obversa("record", "show", "--raw", cwd=repo).stdout
