"""The notes of who wrote the lines, to and from a remote, beside the kept records.

`git push` and `git fetch` leave notes refs alone unless told, so `memory sync` (which the
`pre-push` hook of `install --sync` runs) carries `refs/notes/ai` and
`refs/notes/agent-trace` too: fetch the remote's into `refs/obversa-remote/<remote>/notes/`,
merge them into ours, push the result leased on what was fetched (never forced over notes
we have not seen; fetched and merged again when the remote moved meanwhile).

The merge is git's notes merge, made for these formats: fast-forward when one side holds
the other; otherwise each note three-way against the merge base, taking a side's change
(a removal too, as git does), and where both sides wrote a note on the same commit, one
note holding both (`combine`): a Git AI log with both attestations and sessions, a trace
record with both files' conversations. A note neither format reads is kept with the other
side's below it (git's `concatenate`): no note is ever dropped.
"""

from __future__ import annotations

import json
import os
import re

from git_obversa.attribution import AGENT_TRACE_REF, GIT_AI_REF, agent_trace, git_ai
from git_obversa.attribution.lines import to_ranges
from git_obversa.repo import exchange, git

REFS = (GIT_AI_REF, AGENT_TRACE_REF)
NOTE_PATH = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# Who merged: fixed, so a merge needs no identity configured here.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "git-obversa",
    "GIT_AUTHOR_EMAIL": "notes@git-obversa.invalid",
    "GIT_COMMITTER_NAME": "git-obversa",
    "GIT_COMMITTER_EMAIL": "notes@git-obversa.invalid",
}


class NotesError(Exception):
    """The notes could not be carried as asked; the text says what to do."""


def tracking_ref(remote: str, ref: str) -> str:
    """Where REMOTE's REF (refs/notes/…) is kept here after a fetch."""
    return f"refs/obversa-remote/{remote}/{ref.removeprefix('refs/')}"


def sync(remote: str, cwd: str | os.PathLike[str] | None = None) -> dict:
    """Fetch REMOTE's notes of both formats, merge them into ours, push the result.
    Returns {"remote", "received": notes new here, "sent": notes new there}."""

    def merged(ref: str, theirs: str | None) -> str | None:
        return merge(ref, theirs, cwd) if theirs else exchange.tip(ref, cwd)

    tracking = {ref: tracking_ref(remote, ref) for ref in REFS}
    try:
        tips = exchange.exchange(remote, tracking, merged, cwd, what="notes")
    except exchange.ExchangeError as error:
        raise NotesError(str(error)) from error
    received = sum(_count_new(before, ours, cwd) for before, _, ours in tips.values())
    sent = sum(_count_new(theirs, ours, cwd) for _, theirs, ours in tips.values())
    return {"remote": remote, "received": received, "sent": sent}


def merge(ref: str, theirs: str, cwd: str | os.PathLike[str] | None = None) -> str:
    """Merge the notes commit THEIRS into REF (created if missing); REF's new tip."""
    ours = exchange.tip(ref, cwd)
    if ours is None or ours == theirs or _is_ancestor(ours, theirs, cwd):
        git.run(["update-ref", ref, theirs, ours or "0" * len(theirs)], cwd)
        return theirs
    if _is_ancestor(theirs, ours, cwd):
        return ours
    [(status, base)] = git.outputs([["merge-base", ours, theirs]], cwd)
    base_notes = _notes(base.decode().strip(), cwd) if status == 0 else {}
    our_notes, their_notes = _notes(ours, cwd), _notes(theirs, cwd)
    merged = {}
    for commit in dict.fromkeys([*our_notes, *their_notes, *base_notes]):
        was, mine, other = (notes.get(commit) for notes in (base_notes, our_notes, their_notes))
        if mine == other or other == was:
            blob = mine
        elif mine == was:
            blob = other
        elif mine is None or other is None:
            blob = mine or other  # removed on one side, changed on the other: kept
        else:
            blob = _combined(ref, mine, other, cwd)
        if blob is not None:
            merged[commit] = blob
    listing = "".join(f"100644 blob {blob}\t{commit}\0" for commit, blob in sorted(merged.items()))
    tree = git.output(["mktree", "-z"], cwd, input=listing)
    environment = {**os.environ, **_IDENTITY}
    made = git.run(
        ["commit-tree", tree, "-p", ours, "-p", theirs, "-m", "Notes merged by git-obversa"],
        cwd,
        env=environment,
    ).stdout.strip()
    git.run(["update-ref", ref, made, ours], cwd)
    return made


def combine(ref: str, ours: str, theirs: str) -> str:
    """One note of REF holding both OURS and THEIRS, written on the same commit on two
    sides: merged by the format when both read as it, else THEIRS below OURS."""
    try:
        if ref == GIT_AI_REF:
            return git_ai.render(_combined_logs(git_ai.parse(ours), git_ai.parse(theirs)))
        if ref == AGENT_TRACE_REF:
            return _combined_records(json.loads(ours), json.loads(theirs))
    except (ValueError, TypeError, AttributeError, KeyError):
        pass
    return ours.rstrip("\n") + "\n\n" + theirs


def _combined_logs(
    ours: git_ai.AuthorshipLog, theirs: git_ai.AuthorshipLog
) -> git_ai.AuthorshipLog:
    files: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for log in (ours, theirs):
        for path, entries in log.files.items():
            for key, ranges in entries:
                files.setdefault(path, {}).setdefault(key, []).extend(ranges)
    metadata = {**theirs.metadata, **ours.metadata}
    for section in ("sessions", "prompts", "humans"):
        theirs_section, ours_section = (
            git_ai.json_object(note.metadata.get(section)) for note in (theirs, ours)
        )
        both = {**theirs_section, **ours_section}
        if both or section in metadata:
            metadata[section] = both
    return git_ai.AuthorshipLog(
        files={
            path: [(key, _runs(ranges)) for key, ranges in keys.items()]
            for path, keys in files.items()
        },
        metadata=metadata,
    )


def _runs(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return to_ranges([n for start, end in ranges for n in range(start, end + 1)])


def _combined_records(ours: dict, theirs: dict) -> str:
    agent_trace.parse(json.dumps(ours))  # both must read as records
    agent_trace.parse(json.dumps(theirs))
    files: dict[str, list] = {}
    for record in (ours, theirs):
        for file in record["files"]:
            conversations = files.setdefault(file["path"], [])
            for conversation in file.get("conversations", []):
                if conversation not in conversations:
                    conversations.append(conversation)
    merged = {**ours, "files": [{"path": p, "conversations": c} for p, c in files.items()]}
    return agent_trace.render(merged)


def _combined(ref: str, ours: str, theirs: str, cwd) -> str:
    """The blob of `combine` of the blobs OURS and THEIRS."""
    [(_, mine), (_, other)] = git.outputs([["cat-file", "blob", b] for b in (ours, theirs)], cwd)
    text = combine(ref, mine.decode("utf-8", "replace"), other.decode("utf-8", "replace"))
    return git.output(["hash-object", "-w", "--stdin"], cwd, input=text)


def _notes(commit: str, cwd) -> dict[str, str]:
    """{annotated commit: note blob} in the notes commit COMMIT (fanout read through)."""
    listed = git.run(["ls-tree", "-r", "-z", commit], cwd).stdout
    notes = {}
    for entry in listed.split("\0"):
        info, _, path = entry.partition("\t")
        fields = info.split()
        name = path.replace("/", "")
        if len(fields) == 3 and fields[1] == "blob" and NOTE_PATH.match(name):
            notes[name] = fields[2]
    return notes


def _count_new(before: str | None, after: str | None, cwd) -> int:
    if not after or after == before:
        return 0
    old = _notes(before, cwd) if before else {}
    return sum(1 for commit, blob in _notes(after, cwd).items() if old.get(commit) != blob)


def _is_ancestor(first: str, second: str, cwd) -> bool:
    [(status, _)] = git.outputs([["merge-base", "--is-ancestor", first, second]], cwd)
    return status == 0
