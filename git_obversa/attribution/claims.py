"""Who wrote each line a commit added, as the notes say it, and the notes that say it.

A commit's added lines each carry a claim: the agent sessions that wrote it and how surely
(`ai`: one session alone; `mixed`: a person or another session may have had a hand), or
none (nobody known wrote it). `notes_for` writes both formats from those claims; a
rewritten or picked commit takes, for each line it adds, the claim of the same line in
the commits it was made from (`inherit`), so its notes stay true to its own lines.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from git_obversa.attribution import agent_trace, git_ai
from git_obversa.attribution.lines import to_ranges


@dataclass(frozen=True)
class Session:
    agent: str
    conversation: str
    model: str

    @property
    def key(self) -> str:
        return git_ai.session_id(self.agent, self.conversation)


@dataclass(frozen=True)
class Claim:
    session: Session
    contributor: str  # an Agent Trace contributor type: "ai", "mixed", "unknown", ...


# {path: {line number: the claims on that line}}; an empty tuple: nobody known wrote it.
Lines = dict[str, dict[int, tuple[Claim, ...]]]
# {path: [(line number, text), ...]}, as `lines.added_text` gives a commit's.
Added = dict[str, list[tuple[int, str]]]


def sessions_of(turns: list[dict]) -> tuple[list[Session], bool]:
    """The agent sessions TURNS came from (first seen first), and whether any turn came
    from no known agent (a person may have written those lines)."""
    found: dict[tuple[str, str], Session] = {}
    unknown = False
    for turn in turns:
        agent = turn.get("agent")
        if not agent:
            unknown = True
            continue
        key = (agent, turn.get("session") or "")
        model = turn.get("model") or (found[key].model if key in found else "")
        found[key] = Session(agent, key[1], model)
    return list(found.values()), unknown


def said_by(sessions: list[Session], unknown: bool) -> tuple[Claim, ...]:
    """The claim on a line that turns of SESSIONS (and UNKNOWN: of nobody known) wrote:
    `ai` only when one session said everything."""
    contributor = "ai" if len(sessions) == 1 and not unknown else "mixed"
    return tuple(Claim(session, contributor) for session in sessions)


def notes_for(commit: str, lines: Lines, human: str) -> dict[str, str]:
    """{notes ref: note text} of COMMIT, whose added LINES carry those claims; HUMAN is
    who made the commit (its author's email)."""
    sessions = sessions_in(lines)
    trace = git_ai.trace_id()  # one checkpoint: this commit
    attested: dict[str, list[tuple[str, list[tuple[int, int]]]]] = {}
    conversations: dict[str, list[agent_trace.Conversation]] = {}
    for path, numbers in lines.items():
        groups: dict[tuple[Claim, ...], list[int]] = {}
        for number in sorted(numbers):
            groups.setdefault(numbers[number], []).append(number)
        for claims, group in groups.items():
            runs = tuple(to_ranges(group))
            if len(claims) == 1 and claims[0].contributor == "ai":
                key = f"{claims[0].session.key}::{trace}"
                attested.setdefault(path, []).append((key, list(runs)))
            conversations.setdefault(path, []).extend(
                agent_trace.Conversation(
                    claim.contributor,
                    claim.session.model,
                    claim.session.agent,
                    claim.session.conversation,
                    runs,
                )
                for claim in claims
            )
            if not claims:
                conversations[path].append(agent_trace.Conversation("unknown", "", "", "", runs))
    log = git_ai.AuthorshipLog(
        files=attested,
        metadata={
            "schema_version": git_ai.SCHEMA_VERSION,
            "base_commit_sha": commit,
            "prompts": {},
            "sessions": {
                session.key: {
                    "agent_id": {
                        "tool": session.agent,
                        "id": session.conversation,
                        "model": session.model,
                    },
                    **({"human_author": human} if human else {}),
                }
                for session in sessions
            },
        },
    )
    from git_obversa import __version__

    record = agent_trace.build(commit, conversations, __version__)
    return {git_ai.NOTES_REF: git_ai.render(log), agent_trace.NOTES_REF: agent_trace.render(record)}


def claims_in(log_text: str | None, trace_text: str | None) -> Lines | None:
    """The claims the notes of one commit make on its lines: the Agent Trace record's
    where it is readable (it says `mixed` too), else the Git AI log's attestations (lines
    it leaves untracked: nobody known). None when neither note is readable."""
    if trace_text is not None:
        try:
            files = agent_trace.parse(trace_text)
        except agent_trace.RecordError:
            files = None
        if files is not None:
            lines: Lines = {}
            for path, items in files.items():
                for item in items:
                    if item.contributor == "human" or not (item.tool or item.model):
                        continue  # not an agent's: the line is nobody known's
                    claim = Claim(Session(item.tool, item.session, item.model), item.contributor)
                    for start, end in item.ranges:
                        for number in range(start, end + 1):
                            numbers = lines.setdefault(path, {})
                            numbers[number] = (*numbers.get(number, ()), claim)
            return lines
    if log_text is None:
        return None
    try:
        log = git_ai.parse(log_text)
    except git_ai.NoteError:
        return None
    lines = {}
    for path, entries in log.files.items():
        for key, ranges in entries:
            author = log.author(key)
            if author is None or author.kind != "ai":
                continue
            claim = Claim(Session(author.tool, author.id, author.model), "ai")
            for start, end in ranges:
                for number in range(start, end + 1):
                    lines.setdefault(path, {})[number] = (claim,)
    return lines


def written_for(commit: str, log_text: str | None, trace_text: str | None) -> bool:
    """Whether the notes name COMMIT itself (else git copied them from another)."""
    import json

    try:
        if (
            log_text is not None
            and git_ai.parse(log_text).metadata.get("base_commit_sha") == commit
        ):
            return True
        if trace_text is not None:
            vcs = json.loads(trace_text).get("vcs")
            return isinstance(vcs, dict) and vcs.get("revision") == commit
    except (ValueError, AttributeError):
        pass
    return False


def inherit(
    added: Added, sources: list[tuple[Added, Lines]], otherwise: tuple[Claim, ...] = ()
) -> Lines:
    """The claims on the lines ADDED, taken from SOURCES (each: the lines a commit it was
    made from added, and their claims): a line takes the claim of the first unused line of
    the same text, in the same file or else in any; lines found nowhere get OTHERWISE."""
    by_path: dict[str, dict[str, deque]] = {}
    anywhere: dict[str, deque] = {}
    for source_added, source_lines in sources:
        for path, numbered in source_added.items():
            claims = source_lines.get(path, {})
            for number, text in numbered:
                entry = [claims.get(number, ()), False]  # the claim, and whether taken
                by_path.setdefault(path, {}).setdefault(text, deque()).append(entry)
                anywhere.setdefault(text, deque()).append(entry)
    lines: Lines = {}
    unfound = []
    for path, numbered in added.items():  # the same file first, for every line
        for number, text in numbered:
            entry = _take(by_path.get(path, {}).get(text))
            lines.setdefault(path, {})[number] = entry[0] if entry else otherwise
            if entry is None:
                unfound.append((path, number, text))
    for path, number, text in unfound:  # then any file: a line moved to another
        entry = _take(anywhere.get(text))
        if entry is not None:
            lines[path][number] = entry[0]
    return lines


def _take(entries: deque | None) -> list | None:
    while entries:
        entry = entries.popleft()
        if not entry[1]:
            entry[1] = True
            return entry
    return None


def sessions_in(lines: Lines) -> list[Session]:
    return list(
        dict.fromkeys(
            c.session for numbers in lines.values() for cs in numbers.values() for c in cs
        )
    )
