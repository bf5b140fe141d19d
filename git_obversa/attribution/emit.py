"""After a commit that carried agent turns: the notes of who wrote its lines.

Opt-in per repository: `git config obversa.attribution git-ai,agent-trace` (either or
both). `prepare-commit-msg` leaves the marker ATTRIBUTE beside its claim when the setting
is there, so `post-commit` starts this only then; without the setting nothing of this
package is imported on the commit path.

What is claimed: git-obversa hears what an agent said, not who typed each line. The lines
a commit added are the agent's (`ai`, attested to its Git AI session) only when every turn
the commit carries comes from one agent session; a turn with no agent (a note written by
hand, a capture that did not say who) or turns of several sessions make them `mixed` in
the Agent Trace record and untracked (no attestation) in the Git AI note, whose metadata
still names the sessions. Edits made by hand while the agent worked are not seen.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from git_obversa.attribution import agent_trace, git_ai
from git_obversa.attribution.lines import added_lines, to_ranges
from git_obversa.repo import git

CONFIG = "obversa.attribution"
FORMATS = {"git-ai": git_ai.NOTES_REF, "agent-trace": agent_trace.NOTES_REF}
# Left in the turn store with the claim when CONFIG is set (see the hooks).
ATTRIBUTE_MARKER = "attribute"
REWRITE_SETTINGS = {"notes.rewrite.amend": "true", "notes.rewrite.rebase": "true"}


@dataclass(frozen=True)
class Session:
    agent: str
    conversation: str
    model: str

    @property
    def key(self) -> str:
        return git_ai.session_id(self.agent, self.conversation)


def formats(value: str) -> list[str]:
    """The formats a CONFIG value names ("git-ai,agent-trace"), in FORMATS order;
    ValueError naming what is not one."""
    names = {name.strip().lower() for name in value.replace(",", " ").split()}
    if names & {"false", "no", "off", "none"}:
        return []
    unknown = names - set(FORMATS) - {"true", "all"}
    if unknown:
        raise ValueError(
            f"{CONFIG} names {', '.join(sorted(unknown))}; it lists git-ai and/or agent-trace"
        )
    everything = bool(names & {"true", "all"})
    return [name for name in FORMATS if everything or name in names]


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


def notes_for(
    commit: str,
    added: dict[str, list[int]],
    sessions: list[Session],
    unknown: bool,
    human: str,
) -> dict[str, str]:
    """{notes ref: note text} for COMMIT, which ADDED those lines, said by SESSIONS."""
    only = len(sessions) == 1 and not unknown
    ranges = {path: to_ranges(numbers) for path, numbers in added.items()}
    log = git_ai.AuthorshipLog(
        files={},
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
    if only:
        key = f"{sessions[0].key}::{git_ai.trace_id()}"
        log.files = {path: [(key, runs)] for path, runs in ranges.items()}
    contributor = "ai" if only else "mixed"
    files = {
        path: [
            agent_trace.Conversation(
                contributor, session.model, session.agent, session.conversation, tuple(runs)
            )
            for session in sessions
        ]
        for path, runs in ranges.items()
    }
    from git_obversa import __version__

    return {
        git_ai.NOTES_REF: git_ai.render(log),
        agent_trace.NOTES_REF: agent_trace.render(agent_trace.build(commit, files, __version__)),
    }


def attribute(
    turns: list[dict], wanted: list[str], cwd: str | os.PathLike[str] | None = None
) -> list[str]:
    """Write the WANTED formats' notes on HEAD, said by TURNS (the turns it carried);
    the notes refs written. On an amend, the sessions of the amended commit's notes count
    too, and its notes go (else git would append them to these)."""
    [(_, entries)] = git.outputs([["log", "-g", "-2", "--format=%H%x00%ae%x00%gs", "HEAD"]], cwd)
    reflog = [line.split("\0") for line in entries.decode("utf-8", "replace").splitlines()]
    commit, human, action = reflog[0]
    sessions, unknown = sessions_of(turns)
    refs = [FORMATS[name] for name in wanted]
    amended = reflog[1][0] if action.startswith("commit (amend)") and len(reflog) > 1 else None
    if amended:
        before, before_unknown = _previous(amended, refs, cwd)
        sessions = list(dict.fromkeys(before + sessions))
        unknown = unknown or before_unknown
    if not sessions:
        return []
    notes = notes_for(commit, added_lines(commit, cwd), sessions, unknown, human)
    for ref in refs:
        blob = git.output(["hash-object", "-w", "--stdin"], cwd, input=notes[ref])
        git.run(["notes", "--ref", ref, "add", "-f", "-C", blob, commit], cwd)
        if amended:
            git.run(["notes", "--ref", ref, "remove", "--ignore-missing", amended], cwd)
    configure(cwd)
    return refs


def _previous(
    commit: str, refs: list[str], cwd: str | os.PathLike[str] | None
) -> tuple[list[Session], bool]:
    """The sessions our notes on COMMIT name, and whether they claimed less than `ai`."""
    sessions: list[Session] = []
    unknown = False
    shown = git.outputs([["notes", "--ref", ref, "show", commit] for ref in refs], cwd)
    for ref, (status, text) in zip(refs, shown, strict=True):
        if status != 0:
            continue
        note = text.decode("utf-8", "replace")
        try:
            if ref == git_ai.NOTES_REF:
                log = git_ai.parse(note)
                authors = [log.author(key) for key in log.metadata.get("sessions") or {}]
                sessions += [Session(a.tool, a.id, a.model) for a in authors if a]
                unknown = unknown or not log.files
            else:
                for conversations in agent_trace.parse(note).values():
                    for item in conversations:
                        sessions.append(Session(item.tool, item.session, item.model))
                        unknown = unknown or item.contributor != "ai"
        except ValueError:
            continue  # not ours to carry on
    return list(dict.fromkeys(s for s in sessions if s.agent)), unknown


def configure(cwd: str | os.PathLike[str] | None = None) -> list[str]:
    """Have git carry the notes across amend and rebase (`notes.rewriteRef`); the refs
    that were added to it."""
    [(_, listed)] = git.outputs([["config", "--get-all", "notes.rewriteRef"]], cwd)
    present = set(listed.decode("utf-8", "replace").split())
    missing = [ref for ref in FORMATS.values() if ref not in present]
    if not missing:
        return []
    for ref in missing:
        git.run(["config", "--add", "notes.rewriteRef", ref], cwd)
    for key, value in REWRITE_SETTINGS.items():
        git.run(["config", key, value], cwd)
    return missing


def enable(value: str, cwd: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """Ask for the formats VALUE names from the next commit on (`install --attribution`);
    {config key: values set}. ValueError when VALUE names no format."""
    wanted = formats(value)
    if not wanted:
        raise ValueError(f"name the formats for {CONFIG}: git-ai and/or agent-trace")
    git.run(["config", CONFIG, ",".join(wanted)], cwd)
    added = configure(cwd)
    return {CONFIG: [",".join(wanted)], **({"notes.rewriteRef": added} if added else {})}


def run(store: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> None:
    """Write the configured notes on HEAD from the turns claimed in the turn store
    directory STORE, and drop its ATTRIBUTE marker. Fails open: one warning line."""
    from git_obversa.record.turns import TurnStore

    turns = TurnStore(store)
    try:
        [(_, value)] = git.outputs([["config", "--get", CONFIG]], cwd)
        wanted = formats(value.decode("utf-8", "replace"))
        if wanted:
            attribute(turns.read_claimed(), wanted, cwd)
    except Exception as error:  # a broken note never costs the commit
        print(f"warning: git-obversa wrote no attribution notes: {error}", file=sys.stderr)
    finally:
        (turns.directory / ATTRIBUTE_MARKER).unlink(missing_ok=True)
