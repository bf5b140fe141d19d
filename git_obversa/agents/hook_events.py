"""What an agent's hook event means for capture: which turns are taken, when, and which
commit they go to. `git obversa agent-hook AGENT` hands each event here.

Every agent with hooks is handled the same way, by the moment the event marks:

- before a shell call that runs git (Claude Code and Codex `PreToolUse`, Gemini
  `BeforeTool`): the transcript up to that call becomes pending turns, so a commit the
  call makes carries the reasoning before it; and HEAD is remembered for the call.
  Claude Code and Copilot CLI write their transcripts in batches (Copilot creates a new
  session's file only with its first batch), Qwen Code by a queue beside the agent: the
  hook first waits (at most `FLUSH_WAIT` seconds) until the call is in it.
- after that call (`PostToolUse`, `AfterTool`): when the call made a commit, the commit
  gets the pending reasoning if git's hooks did not run for it (`agents.attach`), and
  what the agent says next, until it works on, is its report on that commit: the end of
  the response drops it instead of letting it reach a later commit. A sub-agent's commit
  counts for its parent's response.
- the end of a response (`Stop`, `AfterAgent`): the rest of the response is taken, with
  the event's final message when the transcript does not hold it yet.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

FLUSH_WAIT = 1.0  # seconds a hook waits for its tool call to reach the transcript
FLUSH_POLL = 0.02
FLUSH_LOOKBACK = 1 << 16  # bytes before the cursor searched for the call

PRE = {"PreToolUse", "BeforeTool"}
POST = {"PostToolUse", "AfterTool"}
STOP = {"Stop", "AfterAgent"}


class Event:
    """One hook event: the agent that sent it, its payload's fields, the directory it
    concerns."""

    __slots__ = ("agent", "fields", "cwd")

    def __init__(self, agent: str, fields: dict, cwd: str) -> None:
        self.agent, self.fields, self.cwd = agent, fields, cwd

    @property
    def name(self) -> str:
        name = self.fields.get("hook_event_name")
        return name if isinstance(name, str) else ""

    @property
    def session(self) -> str:
        session = self.fields.get("session_id")
        return session if isinstance(session, str) else ""

    @property
    def transcript(self) -> str:
        path = self.fields.get("transcript_path")
        return os.path.expanduser(path) if isinstance(path, str) else ""

    @property
    def call_key(self) -> str:
        """What names one tool call across its before and after events."""
        ident = self.fields.get("tool_use_id")
        if isinstance(ident, str) and ident:
            return f"{self.agent}:{ident}"
        return f"{self.agent}:{self.session}:{self.fields.get('agent_id', '')}:shell"


def parse_event(agent: str, text: str, name: str | None = None) -> Event:
    """The hook event on stdin; ValueError when it is not one. NAME: the event's name,
    for a client that does not put it in the payload (Copilot CLI)."""
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the hook event on stdin is not JSON ({error.msg})") from error
    if not isinstance(fields, dict):
        raise ValueError("the hook event on stdin is not a JSON object")
    if agent == "copilot":
        from git_obversa.agents.copilot import event_fields

        fields = event_fields(fields, name or "")
    if "transcript_path" not in fields:  # null or "": a session without one
        raise ValueError("the hook event on stdin has no transcript_path")
    # Older Claude Code versions send Stop events without cwd; hooks run in the project.
    cwd = fields.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    return Event(agent, fields, str(cwd))


def runs_git(event: Event) -> bool:
    """Whether the tool call of a before/after-tool event runs git."""
    tool_input = event.fields.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if isinstance(command, list):  # a shell tool that takes argv
        command = " ".join(part for part in command if isinstance(part, str))
    return isinstance(command, str) and "git" in command


class Outcome:
    """What one hook run did: the ingests (turns taken, malformed lines met), the worktree
    and its store, and lines to tell the user."""

    def __init__(self, cwd: str = "", store: object = None) -> None:
        self.cwd, self.store = cwd, store
        self.results: list = []
        self.lines: list[str] = []


def handle(
    agent: str, text: str, stage_of: Callable[[str], str], name: str | None = None
) -> Outcome:
    """Act on one hook event of AGENT (named NAME when the payload does not say);
    STAGE_OF(cwd) names the stage turns go to."""
    from git_obversa.record.turns import TurnStore
    from git_obversa.repo import git

    event = parse_event(agent, text, name)
    if event.name in PRE | POST and not runs_git(event):
        return Outcome()  # only a command that may commit needs anything of us
    if not event.transcript:
        return Outcome()  # a session without a transcript file: nothing to read
    try:
        store = TurnStore.for_worktree(event.cwd)
    except git.GitError:
        return Outcome()  # not a Git worktree (or no such directory): nothing to capture for
    capture = Capture(event, store, stage_of(event.cwd))
    if event.name in PRE:
        capture.before_call()
    elif event.name in POST:
        capture.after_call()
    else:
        capture.read(final=event.name in STOP)
    return capture.outcome


def awaited(event: Event) -> tuple[Callable[[bytes], bool], int] | None:
    """What a hook run of EVENT waits to see in its transcript: a test of the bytes after
    the cursor, and how far before the cursor to start; None when it waits for nothing.
    Claude Code: the call's tool_use_id (a run for another call of the same message may
    have read past it: look back a little). Copilot CLI: the record of this hook run's
    start, which it writes before running the hook (`copilot.own_hook_start`). Qwen Code:
    the call, or at Stop the last message (`qwen.written_mark`)."""
    if event.agent == "qwen":
        from git_obversa.agents.qwen import written_mark

        mark = written_mark(event.fields)
        return None if mark is None else (lambda data: mark in data, FLUSH_LOOKBACK)
    if event.agent == "copilot":
        from git_obversa.agents.copilot import own_hook_start

        found = own_hook_start(event.fields)
        return (found, 0) if found else None  # an earlier run read up to its own start
    ident = event.fields.get("tool_use_id")
    if event.agent != "claude-code" or not isinstance(ident, str) or not ident:
        return None
    needle = json.dumps(ident).encode("utf-8")

    def holds_call(data: bytes) -> bool:
        return needle in data

    return holds_call, FLUSH_LOOKBACK


class Capture:
    """One hook run: the event, the worktree's turn store, and what was taken."""

    def __init__(self, event: Event, store, stage: str) -> None:
        self.event, self.store, self.stage = event, store, stage
        self.directory = store.directory / "agents" / event.agent
        self.outcome = Outcome(event.cwd, store)
        self.results = self.outcome.results

    # -- the three moments ----------------------------------------------------------

    def before_call(self) -> None:
        from git_obversa.agents.attach import remember_head

        self._wait_for_call()
        self._ingest(final=False, after_commit=False)
        self._session_state(committed=False)
        remember_head(self.directory, self.event.call_key, self.event.cwd)

    def after_call(self) -> None:
        from git_obversa.agents.attach import attach, made_by_call

        made = made_by_call(self.directory, self.event.call_key, self.event.cwd)
        if made is None:
            return
        self._ingest(final=False, after_commit=False)
        rewritten = attach(made, self.event.cwd)
        if rewritten:
            self.outcome.lines.append(
                f"the why went onto commit {rewritten[:12]} (git's hooks did not run for it)"
            )
        self._session_state(committed=True)
        if self.event.agent == "claude-code":
            self._ingest(final=False, after_commit=True)  # marks the response as committed

    def read(self, final: bool) -> None:
        if final:
            self._wait_for_call()
        # Claude Code's transcript state follows its commits itself (`claude_code`).
        committed = final and self.event.agent != "claude-code" and self._session_state()
        self._ingest(final=final, after_commit=committed)
        if final:
            self._session_state(committed=False)

    # -- reading --------------------------------------------------------------------

    def _ingest(self, final: bool, after_commit: bool) -> None:
        event, fields = self.event, self.event.fields
        if event.agent == "claude-code":
            from git_obversa.agents.claude_code import ingest_claude_code, subagent_transcript

            # Only Stop's message is the session's own; SubagentStop's is the sub-agent's.
            said = fields.get("last_assistant_message") if event.name == "Stop" else None
            self.results.append(
                ingest_claude_code(
                    event.transcript,
                    self.store,
                    self.stage,
                    last_assistant_message=said,
                    committed=after_commit,
                )
            )
            agent_id = fields.get("agent_id")
            if isinstance(agent_id, str) and event.name in PRE | POST and event.session:
                own = subagent_transcript(event.transcript, event.session, agent_id)
                if own.is_file():
                    self.results.append(
                        ingest_claude_code(own, self.store, self.stage, sidechain=True)
                    )
            return
        if event.agent == "codex":
            from git_obversa.agents.codex import ingest_codex as ingest

            final_text = "last_assistant_message"
        elif event.agent == "gemini":
            from git_obversa.agents.gemini import ingest_gemini as ingest

            final_text = "prompt_response"
        elif event.agent == "qwen":
            self._ingest_qwen(final, after_commit)
            return
        elif event.agent == "copilot":
            from git_obversa.agents.copilot import ingest_copilot

            self.results.append(
                ingest_copilot(
                    event.transcript,
                    self.store,
                    self.stage,
                    session=event.session,
                    after_commit=after_commit,
                )
            )
            return
        else:
            raise ValueError(f"unknown agent {event.agent!r}")
        said = fields.get(final_text) if final else None
        self.results.append(
            ingest(
                event.transcript,
                self.store,
                self.stage,
                **{final_text: said, "session": event.session, "after_commit": after_commit},
            )
        )

    def _ingest_qwen(self, final: bool, after_commit: bool) -> None:
        """Qwen Code: the session's recording, and inside a sub-agent its own recording,
        whose reasoning counts for the response that started it."""
        from git_obversa.agents.qwen import ingest_qwen, subagent_transcript

        event, fields = self.event, self.event.fields
        said = fields.get("last_assistant_message") if final else None
        self.results.append(
            ingest_qwen(
                event.transcript,
                self.store,
                self.stage,
                last_assistant_message=said if isinstance(said, str) else None,
                session=event.session,
                after_commit=after_commit,
            )
        )
        agent_id = fields.get("agent_id")
        if isinstance(agent_id, str) and agent_id and event.name in PRE | POST:
            own = subagent_transcript(event.transcript, event.session, agent_id)
            if own.is_file():
                self.results.append(ingest_qwen(own, self.store, self.stage, session=event.session))

    def _wait_for_call(self) -> None:
        """Wait (bounded) until the transcript holds what this event follows: Claude Code
        and Copilot CLI write theirs in batches, Qwen Code by a queue beside the agent, and
        what comes before must be read (`awaited`)."""
        from git_obversa.agents import claude_code, qwen
        from git_obversa.agents.transcript import read_offset

        target = awaited(self.event)
        if target is None:
            return
        found, lookback = target
        path = Path(self.event.transcript)
        agent_id = self.event.fields.get("agent_id")
        if isinstance(agent_id, str) and agent_id and self.event.session:
            module = qwen if self.event.agent == "qwen" else claude_code
            path = module.subagent_transcript(str(path), self.event.session, agent_id)
        start = max(0, read_offset(self.directory, path) - lookback)
        deadline = time.monotonic() + FLUSH_WAIT
        while True:
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    if found(handle.read()):
                        return
            except FileNotFoundError:
                pass  # a new session's first batch is not written yet: wait for it too
            except OSError:
                return  # unreadable: waiting will not help
            if time.monotonic() >= deadline:
                return
            time.sleep(FLUSH_POLL)

    # -- the response's state -------------------------------------------------------

    def _session_state(self, committed: bool | None = None) -> bool:
        """Whether the session's response made a commit since it last worked on; with
        COMMITTED, set it."""
        session = self.event.session or "-"
        digest = hashlib.sha256(session.encode("utf-8")).hexdigest()[:24]
        path = self.directory / "sessions" / f"{digest}.committed"
        if committed is None:
            return path.exists()
        if committed:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.unlink(missing_ok=True)
        return committed
