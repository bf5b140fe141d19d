"""Blame lookup, the Python API: from lines of a file to the reasoning recorded in the
commits that wrote them.

The lookup itself is `git_obversa.lookup.blame`, which returns plain data so that the
`git obversa why` command, a fresh Python process each time, need not import
`dataclasses`. This module gives that data its public shape: frozen dataclasses, ranges
and paths as tuples.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields

from git_obversa.lookup import blame
from git_obversa.lookup.blame import BlameError
from git_obversa.record.message import parse_reasoning

__all__ = [
    "Annotation",
    "BlameError",
    "BlamedCommit",
    "BlamedLine",
    "Commit",
    "annotate",
    "parse_reasoning",
    "reasoned_log",
    "kept_turns",
    "why",
]


@dataclass(frozen=True)
class Commit:
    """A commit and the reasoning recorded in its message."""

    commit: str
    author: str
    email: str
    date: str  # ISO 8601 author date in the author's time zone, as `git log %aI`
    subject: str
    body: str  # the message after the subject paragraph, trailers included
    reasoning: str | None  # parse_reasoning(message)

    def to_json(self) -> dict:
        """The fields as JSON values, as `git obversa log --json` (or `why`) prints them."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class BlamedCommit(Commit):
    """A commit as blame found it: the lines of the file it owns."""

    ranges: tuple[tuple[int, int], ...]  # 1-based inclusive line ranges, ascending
    paths: tuple[str, ...]  # the file's name(s) in that commit (renames, -C copies)
    # who wrote its lines, from Git AI / Agent Trace notes (`attribution.who.attach`):
    # each agent with the lines it wrote, and the lines the notes give to no agent
    agents: tuple[dict, ...] = ()
    unattributed: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict:
        value = super().to_json()
        value["ranges"] = [list(pair) for pair in self.ranges]
        value["paths"] = list(self.paths)
        value["agents"] = [dict(agent) for agent in self.agents]
        value["unattributed"] = [list(pair) for pair in self.unattributed]
        return value


@dataclass(frozen=True)
class BlamedLine:
    number: int
    commit: str
    text: str  # the line without its end of line (and without a CR before it)


@dataclass(frozen=True)
class Annotation:
    """`git blame` of some lines, with each commit's reasoning."""

    lines: list[BlamedLine]
    commits: dict[str, BlamedCommit]  # in the order of the first line each owns


def annotate(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None = None,
    end: int | None = None,
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
    cache: bool = True,
) -> Annotation:
    """Blame lines START..END of PATH at REV (the whole file by default) with reasoning.

    REV None blames the file in the working tree, as plain `git blame PATH` does (lines
    not committed yet belong to the all-zero commit). PATH is relative to REPOSITORY
    (or absolute). END past the end of the file stops at its last line; END None with
    START given reads to the end. `moves` and `copies` are `git blame -M` and `-C`
    (`copies` = how many times -C is given, 0 to 3). Git's own configuration applies,
    `blame.ignoreRevsFile` included. Raises BlameError when the lines cannot be blamed.

    `cache` False bypasses the blame cache (see docs/why.md); the answer is the same.
    """
    from git_obversa.attribution import who

    lines: list[tuple[int, str, str]] = []
    origins = who.wanted(repository)
    found = blame.lookup(
        repository,
        path,
        start,
        end,
        rev,
        moves=moves,
        copies=copies,
        lines=lines,
        cache=cache,
        origins=origins,
    )
    who.attach(found, origins, repository)
    return Annotation(
        [BlamedLine(*line) for line in lines],
        {sha: _blamed_commit(commit) for sha, commit in found.items()},
    )


def why(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None = None,
    end: int | None = None,
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
    cache: bool = True,
) -> list[BlamedCommit]:
    """The commits that own lines START..END of PATH at REV, ordered by line, with the
    reasoning each recorded (None when a commit recorded none). See `annotate`."""
    from git_obversa.attribution import who

    origins = who.wanted(repository)
    found = blame.lookup(
        repository, path, start, end, rev, moves=moves, copies=copies, cache=cache, origins=origins
    )
    who.attach(found, origins, repository)
    return [_blamed_commit(commit) for commit in found.values()]


def reasoned_log(
    repository: str | os.PathLike[str],
    paths: Sequence[str] = (),
    rev: str = "HEAD",
    limit: int | None = None,
) -> list[Commit]:
    """Commits reachable from REV (touching PATHS, if given) whose message records
    reasoning, newest first, at most LIMIT of them. One `git log` process."""
    return [Commit(**commit) for commit in blame.reasoned_commits(repository, paths, rev, limit)]


def _blamed_commit(commit: dict) -> BlamedCommit:
    return BlamedCommit(
        commit["commit"],
        commit["author"],
        commit["email"],
        commit["date"],
        commit["subject"],
        commit["body"],
        commit["reasoning"],
        tuple((first, last) for first, last in commit["ranges"]),
        tuple(commit["paths"]),
        tuple(commit.get("agents", ())),
        tuple((first, last) for first, last in commit.get("unattributed", ())),
    )


def kept_turns(repository: str | os.PathLike[str], commits: list[tuple[str, str]]) -> dict:
    """The whole record kept for each (commit, message or body) of COMMITS: commit ->
    {"ids": its record ids, "turns": every kept turn, "missing": ids not here}."""
    from git_obversa.record.kept import commits_ids, read_records

    ids = commits_ids(commits, repository)
    records = read_records([i for found in ids.values() for i in found], repository)
    return {
        commit: {
            "ids": found,
            "turns": [turn for i in found for turn in records.get(i, {}).get("turns", [])],
            "missing": [i for i in found if i not in records],
        }
        for commit, found in ids.items()
    }
