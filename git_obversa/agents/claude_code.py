"""Claude Code: its session transcripts, its hook events, its settings.

A transcript is JSON lines (Claude Code 2.1): `{"type", "uuid", "parentUuid", "sessionId",
"timestamp", "isSidechain", "message": {"id", "model", "content"}, ...}`. The CLI writes one
line per content block, so one API message spans several lines sharing `message.id`. The
assistant's `text` and non-empty `thinking` blocks become turns, one turn per block (a block
is a unit: the composer joins blocks as separate sentences, never glues them).

Left out: tool calls and results, user entries, side chains (a sub-agent's own work, unless
the sub-agent's own transcript is read for its commit), meta entries (`isMeta`), agent-team
protocol (`teamName`), API errors and synthetic messages (model `<synthetic>`, such as
"No response requested."), and compaction summaries.

Reading once (`git_obversa.agents.transcript`): each run reads only the lines written since
the last; every block taken is remembered by its message id and a digest of its text (or
its entry's uuid when there is no message id), so a resumed or compacted session that writes
old entries again adds nothing.

An agent usually commits inside its response: the `PreToolUse` hook on its Bash call takes
the transcript up to that call, so the commit carries the reasoning before it. What the
agent says after a successful commit, with no tool call after it, reports on that commit;
it is held, and goes to the next commit only if the agent goes on working (another tool
call) — when the response ends there, it is dropped rather than carried into an unrelated
commit.

`Stop` can fire before Claude Code has written the response's last message to the
transcript. The event carries that message (`last_assistant_message`): when the transcript
does not have it yet, it is captured from the event, and when the transcript later writes
it, those blocks are recognised (same text, whitespace aside) and not taken again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from git_obversa.agents.transcript import UnreadableTranscript, transcript_tail
from git_obversa.record.turns import TurnStore

__all__ = ["UnreadableTranscript", "Ingested", "ingest_claude_code", "subagent_transcript"]

SOURCE = "claude-code"
BLOCK_KINDS = {"text": "engine:text", "thinking": "engine:thinking"}
SYNTHETIC_MODEL = "<synthetic>"


class Ingested:
    """What one run took: the turns appended (with their seq) and the numbers of
    malformed lines met for the first time (to be reported once)."""

    def __init__(
        self, transcript: Path, turns: list[dict] | None = None, malformed: list[int] | None = None
    ) -> None:
        self.transcript = transcript
        self.turns = [] if turns is None else turns
        self.malformed = [] if malformed is None else malformed


def _compact(text: str) -> str:
    """TEXT without whitespace: how the event's message and the transcript's blocks are
    compared (the two may break lines and join blocks differently)."""
    return "".join(text.split())


def _after_compact_prefix(text: str, length: int) -> str:
    """TEXT after its first LENGTH non-whitespace characters."""
    seen = 0
    for index, char in enumerate(text):
        if seen == length:
            return text[index:]
        if not char.isspace():
            seen += 1
    return ""


def _is_noise(entry: dict) -> bool:
    return bool(
        entry.get("isMeta")
        or entry.get("teamName")
        or entry.get("isApiErrorMessage")
        or entry.get("isCompactSummary")
    )


def is_prompt(entry: dict) -> bool:
    """Whether ENTRY is a person's prompt (a new response starts), not a tool result."""
    if entry.get("type") != "user" or _is_noise(entry) or entry.get("toolUseResult"):
        return False
    content = _content(entry)
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        block.get("type") == "tool_result" for block in content
    )


def _content(entry: dict) -> str | list[dict] | None:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return content if isinstance(content, str) else None


def is_commit_command(command: object) -> bool:
    """Whether a Bash COMMAND runs `git commit` (git's own options may come between,
    and it may be one of several commands: `git add -A && git -C app commit -m …`)."""
    return isinstance(command, str) and bool(_GIT_COMMIT.search(command))


# At a command's start (after `;`, `&&`, `|`, `(` or a new line, and any `NAME=value`):
# `git`, git's own options (`-C dir`, `-c key=value`, `--no-pager`, `--git-dir=…`), `commit`.
_GIT_COMMIT = re.compile(
    r"(?:^|[;&|(\n])\s*(?:[A-Za-z_]\w*=\S*\s+)*"
    r"git(?:\s+(?:-[Cc]\s+\S+|--?[\w-]+(?:=\S+)?))*\s+commit\b"
)


def _block_key(kind: str, text: str, message_id: object, uuid: object, index: int) -> str | None:
    if isinstance(message_id, str) and message_id:
        digest = hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:24]
        return " ".join(f"message:{message_id}:{digest}".split())
    if isinstance(uuid, str) and uuid:
        return " ".join(f"entry:{uuid}:{index}".split())
    return None  # nothing to recognise it by: taken once, by the cursor alone


class _Response:
    """Where the session is, kept in the cursor's state between runs.

    - `last`: the message the response is at, `{"id", "text"}` (its text so far, compacted),
      to tell whether a Stop event's message is in the transcript yet.
    - `pending`: the compacted text of a message taken from a Stop event and not yet
      written to the transcript; when it is written, its blocks are not taken again.
    - `commits`: ids of this response's `git commit` tool calls whose result is not seen.
    - `committed`: a commit of this response succeeded and no tool call came after it, so
      what the agent says now reports on that commit (`held`): it goes to the next commit
      only if the agent goes on working (another tool call); the response's end drops it.
    """

    def __init__(self, state: dict) -> None:
        self.last = state.get("last") if isinstance(state.get("last"), dict) else None
        self.pending = state.get("pending") if isinstance(state.get("pending"), str) else None
        self.commits = [item for item in state.get("commits", []) if isinstance(item, str)]
        self.committed = state.get("committed") is True
        held = state.get("held") if isinstance(state.get("held"), list) else []
        self.held = [turn for turn in held if _is_taken(turn)]
        self.taken: list[dict] = []

    def save(self, state: dict) -> None:
        state.clear()
        for name in ("last", "pending", "commits", "committed", "held"):
            value = getattr(self, name)
            if value:
                state[name] = value

    def prompt(self) -> None:
        self.last, self.pending, self.commits, self.committed, self.held = None, None, [], False, []

    def text(self, kind: str, text: str, message_id: object) -> None:
        if kind == "engine:text":
            so_far = self.last["text"] if self.last and self.last.get("id") == message_id else ""
            self.last = {"id": message_id, "text": so_far + _compact(text)}
            if self.pending is not None:
                if self.pending.startswith(self.last["text"]):
                    if self.pending == self.last["text"]:
                        self.pending = None
                    return  # written late; already taken from the Stop event
                self.pending = None
        (self.held if self.committed else self.taken).append({"kind": kind, "text": text})

    def tool_use(self, block: dict) -> None:
        if self.committed:  # the agent works on: what it said goes to the next commit
            self.taken.extend(self.held)
            self.committed, self.held = False, []
        tool_input = block.get("input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if block.get("name") == "Bash" and is_commit_command(command):
            self.commits.append(str(block.get("id")))

    def tool_result(self, block: dict) -> None:
        tool_use_id = str(block.get("tool_use_id"))
        if tool_use_id in self.commits:
            self.commits.remove(tool_use_id)
            if not block.get("is_error"):
                self.committed = True

    def stop(self, message: str) -> None:
        """The response ended; MESSAGE is its last message, per the Stop event."""
        if self.committed:
            self.held = []  # the report on the commit this response made
            return
        said = _compact(message)
        have = self.last["text"] if self.last else ""
        if not said or said == self.pending or (have and have.endswith(said)):
            return  # the transcript holds it, or an earlier event of this response did
        text = message
        if have and said.startswith(have):  # partly written: take the rest
            text = _after_compact_prefix(text, len(have))
        if text.strip():
            self.taken.append({"kind": "engine:text", "text": text.strip("\n")})
        self.pending = said


def _is_taken(turn: object) -> bool:
    return (
        isinstance(turn, dict)
        and turn.get("kind") in BLOCK_KINDS.values()
        and isinstance(turn.get("text"), str)
    )


def _is_tool_result(raw: bytes) -> bool:
    """Whether a line's bytes are a whole tool-result entry, told without parsing it (a
    line cut short does not end in `}` and is parsed, so it is reported)."""
    return b'"toolUseResult"' in raw and raw.rstrip().endswith(b"}")


def _follow(response: _Response, entry: dict, sidechain: bool, seen) -> None:
    """Move RESPONSE along one transcript ENTRY; entries taken before are passed over."""
    kind = entry.get("type")
    if kind not in ("user", "assistant"):
        return
    if _is_noise(entry) or bool(entry.get("isSidechain")) != sidechain:
        return
    prompt = kind == "user" and is_prompt(entry)
    if kind == "user" and not prompt and not response.commits:
        return  # a tool result, and no commit of this response is waiting for its result
    stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
    uuid = entry.get("uuid")
    if kind == "user":
        key = " ".join(f"user:{uuid}".split()) if isinstance(uuid, str) else None
        if key is not None:
            if seen.has(key, stamp):
                return
            seen.add(key, stamp)
        if prompt:
            if not sidechain:
                response.prompt()
            return
        for block in _content(entry) or []:
            if block.get("type") == "tool_result":
                response.tool_result(block)
        return
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("model") == SYNTHETIC_MODEL:
        return
    content = _content(entry)
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    message_id = message.get("id")
    for index, block in enumerate(content or []):
        block_type = block.get("type")
        if block_type == "tool_use":
            key = _block_key("tool", str(block.get("id")), message_id, uuid, index)
        elif block_type in BLOCK_KINDS:
            # {"type": "text", "text": ...} / {"type": "thinking", "thinking": ...}
            text = block.get(block_type)
            if not isinstance(text, str) or not text.strip():
                continue  # thinking is mostly empty (signature only) since 2.1.69
            key = _block_key(BLOCK_KINDS[block_type], text, message_id, uuid, index)
        else:
            continue
        if key is not None:
            if seen.has(key, stamp):
                continue
            seen.add(key, stamp)
        if block_type == "tool_use":
            response.tool_use(block)
        else:
            response.text(BLOCK_KINDS[block_type], text, message_id)


def ingest_claude_code(
    transcript: str | os.PathLike[str],
    store: TurnStore,
    stage: str,
    last_assistant_message: str | None = None,
    sidechain: bool = False,
    committed: bool = False,
) -> Ingested:
    """Append the transcript's new assistant text/thinking turns to STORE under STAGE.

    LAST_ASSISTANT_MESSAGE (from a `Stop` event: the response ended) is captured too when
    the transcript does not hold it yet. SIDECHAIN reads a sub-agent's own transcript.
    COMMITTED: a commit was just made for this response (a sub-agent's, or one made by a
    tool call whose result is not written yet): what follows reports on it.
    Raises UnreadableTranscript when the transcript cannot be read, CorruptTurns when the
    store is damaged, OSError when the store cannot be written.
    """
    directory = store.directory / "agents" / SOURCE
    with transcript_tail(directory, transcript) as tail:
        if tail.lines and tail.lines[0].number == 1 and not any(map(_is_entry, tail.lines)):
            raise UnreadableTranscript(
                f"{transcript} is not a Claude Code transcript (no line of it is an entry)"
            )  # read from its first line, and nothing is one: some other file
        response = _Response(tail.state)
        who: dict = {}
        for line in tail.lines:
            if not response.commits and _is_tool_result(line.raw):
                continue  # most of a transcript's bytes; only a commit's result matters
            if isinstance(line.value, dict):
                _follow(response, line.value, sidechain, tail.seen)
                who = _who(line.value) or who
        if committed:
            response.committed, response.held = True, []
        if isinstance(last_assistant_message, str):
            response.stop(last_assistant_message)
        response.save(tail.state)
        # The transcript's own session id and model when its entries name them.
        about = {"agent": SOURCE, "session": Path(transcript).stem, **who}
        turns = store.append(
            {"stage": stage, "node": stage, **about, **turn} for turn in response.taken
        )
        return Ingested(tail.transcript, turns, tail.malformed)


def _who(entry: dict) -> dict:
    """The agent, session and model an assistant ENTRY names (the turn store keeps them
    for `git_obversa.attribution`); {} for any other entry."""
    message = entry.get("message")
    session = entry.get("sessionId")
    if entry.get("type") != "assistant" or not isinstance(message, dict):
        return {}
    if not isinstance(session, str) or message.get("model") == SYNTHETIC_MODEL:
        return {}
    model = message.get("model")
    return {"agent": SOURCE, "session": session, "model": model if isinstance(model, str) else ""}


def _is_entry(line: object) -> bool:
    """A transcript entry: a JSON object with a "type" (user, assistant, summary, ...)."""
    value = line.value  # type: ignore[attr-defined]
    return isinstance(value, dict) and isinstance(value.get("type"), str)


HOOK_COMMAND = "git obversa agent-hook claude-code"
# What `git obversa install --claude-code` merges into `.claude/settings.json`: before a
# git command runs (an agent about to commit: the transcript up to the call is taken),
# after it (a commit it made gets the why if git's hooks did not run), and when a
# response, a sub-agent or the session ends. `if` keeps Claude Code (2.1.85+) from
# starting the hook for other commands; older versions ignore it and run it on every Bash
# call, which costs a few milliseconds.
_HANDLER = {"type": "command", "command": HOOK_COMMAND, "timeout": 30}
HOOK_GROUPS = {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{**_HANDLER, "if": "Bash(git *)"}]}],
    "PostToolUse": [{"matcher": "Bash", "hooks": [{**_HANDLER, "if": "Bash(git *)"}]}],
    "Stop": [{"hooks": [dict(_HANDLER)]}],
    "SubagentStop": [{"hooks": [dict(_HANDLER)]}],
    "SessionEnd": [{"hooks": [dict(_HANDLER)]}],
}


def subagent_transcript(transcript: str, session_id: str, agent_id: str) -> Path:
    """Where Claude Code keeps a sub-agent's own transcript, next to the session's."""
    return Path(transcript).parent / session_id / "subagents" / f"agent-{agent_id}.jsonl"


def hook_event(text: str) -> dict:
    """The hook event Claude Code sent on stdin; ValueError when it is not one."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the hook event on stdin is not JSON ({error.msg})") from error
    if not isinstance(event, dict) or not isinstance(event.get("transcript_path"), str):
        raise ValueError("the hook event on stdin has no transcript_path")
    return event
