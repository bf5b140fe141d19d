"""Replaying what the real clients wrote (fixtures/realclients): the hook events and
transcripts of one response that explains, edits, commits and reports, fed to `git
obversa agent-hook` in the order the client sent them, the transcript growing as it did.

The real clients themselves run in tests/realclients (a separate CI step); these keep the
same behaviour in the fast suite.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.gitutil import git, obversa

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "realclients"
REASON = "Retries stop after 3 attempts: the gateway fails in bursts."
REPORT = "Done: committed the retry budget."


def events(agent: str, home: Path, repo: Path) -> list[dict]:
    lines = (FIXTURES / agent / "hook-events.jsonl").read_text().splitlines()
    return [
        json.loads(line.replace("/home/user/src/app", str(repo)).replace("/home/user", str(home)))
        for line in lines
    ]


def hook(agent: str, repo: Path, event: dict) -> str:
    done = obversa("agent-hook", agent, cwd=repo, input=json.dumps(event))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    return done.stderr


def pending(repo: Path) -> list[str]:
    shown = obversa("record", "show", "--json", cwd=repo)
    return [turn["text"] for turn in json.loads(shown.stdout)]


def test_gemini_commit_without_git_hooks_gets_its_why_and_not_the_report(repo, tmp_path):
    """Gemini CLI commits with git hooks off; its AfterAgent joins every text of the turn."""
    home = tmp_path / "home"
    assert obversa("install", "--gemini", cwd=repo).returncode == 0
    (source,) = [
        path
        for path in (FIXTURES / "gemini").rglob("session-*.jsonl")
        if json.loads(path.read_text().splitlines()[0])["sessionId"].startswith("13fba4fe")
    ]
    recording = home / source.relative_to(FIXTURES / "gemini")
    recording.parent.mkdir(parents=True)
    lines = source.read_text().splitlines(keepends=True)

    def written(until: str) -> None:  # the recording as far as the client had written it
        end = max(i for i, line in enumerate(lines) if until in line)
        recording.write_text("".join(lines[: end + 1]))

    before_tool, after_tool, after_agent = [
        event
        for event in events("gemini", home, repo)
        if event["hook_event_name"] in ("BeforeTool", "AfterTool", "AfterAgent")
    ]
    written('"run_shell_command"')
    hook("gemini", repo, before_tool)
    (repo / "retry.py").write_text("RETRIES = 3\n")
    git(repo, "add", "retry.py")
    git(repo, "-c", "core.hooksPath=", "commit", "-q", "-m", "Add retry budget")
    made = git(repo, "rev-parse", "HEAD").strip()
    written('"functionResponse"')
    said = hook("gemini", repo, after_tool)
    assert "the why went onto commit" in said

    message = git(repo, "log", "-1", "--format=%B")
    assert message.count(REASON) == 1 and REPORT not in message
    assert git(repo, "rev-parse", "HEAD").strip() != made
    assert git(repo, "rev-parse", "HEAD^{tree}") == git(repo, "rev-parse", f"{made}^{{tree}}")
    assert "obversa: why attached" in git(repo, "reflog", "-1")

    recording.write_text("".join(lines))
    assert REPORT in after_agent["prompt_response"] and REASON in after_agent["prompt_response"]
    hook("gemini", repo, after_agent)
    assert pending(repo) == []  # the report is dropped, the reason not taken twice


def test_a_commit_already_on_a_remote_is_never_rewritten(repo, tmp_path):
    home = tmp_path / "home"
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    assert obversa("install", "--gemini", cwd=repo).returncode == 0
    source = next((FIXTURES / "gemini").rglob("session-*-13fba4fe.jsonl"))
    recording = home / "chats" / source.name
    recording.parent.mkdir(parents=True)
    shutil.copy(source, recording)
    before_tool, after_tool = [
        {**event, "transcript_path": str(recording)}
        for event in events("gemini", home, repo)
        if event["hook_event_name"] in ("BeforeTool", "AfterTool")
    ]
    hook("gemini", repo, before_tool)
    git(repo, "-c", "core.hooksPath=", "commit", "-q", "--allow-empty", "-m", "Pushed at once")
    git(repo, "push", "-q", "origin", "HEAD:main")
    made = git(repo, "rev-parse", "HEAD").strip()
    hook("gemini", repo, after_tool)
    assert git(repo, "rev-parse", "HEAD").strip() == made
    assert "Why:" not in git(repo, "log", "-1", "--format=%B")


def test_claude_code_hook_waits_for_its_call_to_reach_the_transcript(repo, tmp_path):
    """Claude Code writes its transcript in batches: the PreToolUse hook can start before
    the response's text and its tool call are written. It waits (at most a second)."""
    import subprocess
    import sys
    import time

    home = tmp_path / "home"
    source = next((FIXTURES / "claude-code").rglob("fb651d66-*.jsonl"))
    transcript = home / "projects" / source.name
    transcript.parent.mkdir(parents=True)
    lines = source.read_text().splitlines(keepends=True)
    (pre,) = [
        event
        for event in events("claude-code", home, repo)
        if event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "Agent"
    ]
    pre = {**pre, "transcript_path": str(transcript), "tool_input": {"command": "git commit"}}
    call = next(i for i, line in enumerate(lines) if pre["tool_use_id"] in line)
    text_line = next(i for i in range(call, -1, -1) if '"type":"text"' in lines[i])
    transcript.write_text("".join(lines[:text_line]))  # the batch with the text is late
    hook_process = subprocess.Popen(
        [sys.executable, "-m", "git_obversa", "agent-hook", "claude-code"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hook_process.stdin.write(json.dumps(pre))
    hook_process.stdin.close()
    time.sleep(0.7)  # the hook has started by now, within its second of waiting
    with open(transcript, "a") as handle:
        handle.write("".join(lines[text_line : call + 1]))
    assert hook_process.wait(timeout=30) == 0, hook_process.stderr.read()
    assert pending(repo) == ["A sub-agent adds the constants."]


def test_copilot_hook_waits_for_a_new_sessions_first_batch(repo, tmp_path):
    """Copilot CLI creates a new session's events.jsonl only with its first batch, which
    can come after the hook before the session's first commit has started. The hook waits
    for the file as for a late batch, and the commit's reasoning is pending in time."""
    import subprocess
    import sys
    import time

    home = tmp_path / "home"
    source = next((FIXTURES / "copilot").rglob("events.jsonl"))
    recording = home / source.relative_to(FIXTURES / "copilot")
    lines = source.read_text().splitlines(keepends=True)
    pre = next(
        event
        for event in events("copilot", home, repo)
        if "git commit" in str(event.get("toolArgs")) and "toolResult" not in event
    )
    started = next(
        i
        for i, line in enumerate(lines)
        if '"hookType":"preToolUse"' in line and "git commit" in line
    )
    assert not recording.parent.exists()  # the session's directory is not there yet
    hook_process = subprocess.Popen(
        [sys.executable, "-m", "git_obversa", "agent-hook", "copilot", "preToolUse"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COPILOT_HOME": str(home / ".copilot")},
    )
    hook_process.stdin.write(json.dumps(pre))
    hook_process.stdin.close()
    time.sleep(0.5)  # the hook has started by now, within its second of waiting
    recording.parent.mkdir(parents=True)
    recording.write_text("".join(lines[: started + 1]))
    assert hook_process.wait(timeout=30) == 0, hook_process.stderr.read()
    assert pending(repo) == [REASON]


def test_copilot_hook_waits_for_its_own_start_not_one_like_it():
    """A Copilot hook waits for the record of its own run's start. Records of the same
    hook type came before it in the real session: the file edit's `preToolUse` (whose hook
    reads nothing) and every hook's `hook.end`. Taking one of those for its own made the
    hook read before its batch was written, and a response's why landed on a later
    commit (the real-client session case, issue 23)."""
    from git_obversa.agents.copilot import event_fields, own_hook_start

    source = next((FIXTURES / "copilot").rglob("events.jsonl"))
    lines = source.read_bytes().splitlines(keepends=True)
    payloads = [json.loads(line) for line in (FIXTURES / "copilot" / "hook-events.jsonl").open()]
    commit = next(p for p in payloads if "git commit" in str(p.get("toolArgs")))
    stop = next(p for p in payloads if "stopReason" in p)

    def start_of(kind: str, text: str) -> int:
        return next(
            i
            for i, line in enumerate(lines)
            if b'"hook.start"' in line and f'"hookType":"{kind}"'.encode() in line
            if text.encode() in line
        )

    own = start_of("preToolUse", "git commit")
    edit = start_of("preToolUse", '"create"')
    assert edit < own
    found = own_hook_start(event_fields(commit, "preToolUse"))
    assert not found(b"".join(lines[:own]))  # the edit's start and end are not its own
    assert found(b"".join(lines[: own + 1]))
    assert not found(b"".join(lines[: own + 1])[:-40])  # half written: not yet

    own_stop = start_of("agentStop", "")
    found = own_hook_start(event_fields(stop, "agentStop"))
    assert found(lines[own_stop])
    assert not found(lines[own_stop + 1])  # its end, as the next response's hook sees it
    earlier = event_fields({**stop, "timestamp": stop["timestamp"] + 60_000}, "agentStop")
    assert not own_hook_start(earlier)(lines[own_stop])  # the next response's hook


def test_what_a_hook_waits_for_is_its_own_call(repo, tmp_path):
    """Claude Code's before-call hook waits for its tool_use_id in the transcript the
    real client wrote, and stops waiting once it is there; a call id it never wrote keeps
    it waiting (to the bound)."""
    from git_obversa.agents.hook_events import awaited, parse_event

    home = tmp_path / "home"
    pre = next(
        event
        for event in events("claude-code", home, repo)
        if event.get("hook_event_name") == "PreToolUse" and "git commit" in str(event)
    )
    transcripts = (FIXTURES / "claude-code").rglob("*.jsonl")
    written = b"".join(path.read_bytes() for path in transcripts)
    found, _ = awaited(parse_event("claude-code", json.dumps(pre)))
    assert found(written)
    assert not found(written.replace(pre["tool_use_id"].encode(), b"toolu_elsewhere"))
    gemini = next(e for e in events("gemini", home, repo) if "BeforeTool" in str(e))
    assert awaited(parse_event("gemini", json.dumps(gemini))) is None  # writes at once


QWEN_SESSION = "82719f5e-3f37-4c46-810e-8e6d758fb5bb"


def qwen_recordings(home: Path) -> tuple[list[str], Path, list[str], Path]:
    """The lines of Qwen Code's session recording and of its sub-agent's, and where they
    go under HOME (empty files until a test writes them)."""
    project = FIXTURES / "qwen" / ".qwen" / "projects" / "-home-user-src-app"
    main = project / "chats" / f"{QWEN_SESSION}.jsonl"
    (sub,) = (project / "subagents" / QWEN_SESSION).glob("agent-*.jsonl")
    targets = [home / path.relative_to(FIXTURES / "qwen") for path in (main, sub)]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    return (
        main.read_text().splitlines(keepends=True),
        targets[0],
        sub.read_text().splitlines(keepends=True),
        targets[1],
    )


def test_qwen_hook_waits_for_its_call_to_reach_the_recording(repo, tmp_path):
    """Qwen Code writes its recording from a queue beside the agent: PreToolUse can start
    before the call (and the text before it) is written. The hook waits for the model's
    id of the call, at most a second."""
    import subprocess
    import sys
    import time

    home = tmp_path / "home"
    lines, recording, _, _ = qwen_recordings(home)
    pre = next(
        event
        for event in events("qwen", home, repo)
        if event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "run_shell_command"
    )
    call = next(i for i, line in enumerate(lines) if f'"id":"{pre["tool_call_id"]}"' in line)
    recording.write_text(lines[0])  # only the prompt is written yet
    hook_process = subprocess.Popen(
        [sys.executable, "-m", "git_obversa", "agent-hook", "qwen"],
        cwd=repo,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    hook_process.stdin.write(json.dumps(pre))
    hook_process.stdin.close()
    time.sleep(0.5)  # the hook has started by now, within its second of waiting
    with open(recording, "a") as handle:
        handle.write("".join(lines[1 : call + 1]))
    assert hook_process.wait(timeout=30) == 0, hook_process.stderr.read()
    assert pending(repo) == [REASON]


def test_qwen_sub_agent_commit_carries_its_parents_why_and_not_the_reports(repo, tmp_path):
    """Both responses of the real session replayed event by event, each recording as far
    as the client had written it: the first commit gets the first response's why, the
    sub-agent's commit (made with git's hooks off) its parent's and its own; no report
    reaches anything."""
    home = tmp_path / "home"
    assert obversa("install", "--qwen", cwd=repo).returncode == 0
    lines, recording, sub_lines, sub_recording = qwen_recordings(home)

    def written(target: Path, source: list[str], marker: str) -> None:
        end = max(i for i, line in enumerate(source) if marker in line)
        target.write_text("".join(source[: end + 1]))

    commits = iter(["Add a retry budget", "Add constants"])
    for event in events("qwen", home, repo):
        name, call = event["hook_event_name"], event.get("tool_call_id")
        if name == "Stop":
            written(recording, lines, event["last_assistant_message"])
        elif event.get("agent_id") and call:
            written(sub_recording, sub_lines, f'"id":"{call}"')
        elif call:
            written(recording, lines, f'"id":"{call}"')
        if name not in ("PreToolUse", "PostToolUse", "Stop"):
            continue
        hook("qwen", repo, event)
        if name == "PreToolUse" and event["tool_name"] == "run_shell_command":
            subject = next(commits)
            # The sub-agent's commit skips git's hooks: its PostToolUse attaches the why.
            hooks_path = "/dev/null" if event.get("agent_id") else str(repo / ".git" / "hooks")
            git(
                repo,
                "-c",
                f"core.hooksPath={hooks_path}",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                subject,
            )
    log = git(repo, "log", "-2", "--format=%s%x00%B%x1e").split("\x1e")
    why = {
        entry.strip().split("\x00")[0]: entry.split("\x00")[1] for entry in log if "\x00" in entry
    }
    assert REASON in why["Add a retry budget"]
    assert "A sub-agent adds the constants." in why["Add constants"]
    assert "Constants live apart so that tests can patch them." in why["Add constants"]
    for reported in (REPORT, "Sub-agent done.", "The sub-agent added constants.py"):
        assert all(reported not in message for message in why.values())
    assert REASON not in why["Add constants"]
    assert pending(repo) == []
