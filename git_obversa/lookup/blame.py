"""Blame lookup engine: from lines of a file to the commits that wrote them, as plain data.

A lookup costs two git processes whatever the history looks like: one
`git blame --porcelain` for the lines and one `git cat-file --batch` that reads every
commit blame named. The reader starts together with blame, so its start-up overlaps
blame's work.

`git obversa why`, `blame` and `log` call this module directly, in a fresh Python process
each time, so it imports only cheap standard modules (no dataclasses, datetime, pathlib
or typing, no regular expression compiled at import) and returns plain dicts, lists and
tuples: the command then costs little more than Python's own start-up on top of plain
`git blame` (bench/why.py measures it). `git_obversa.lookup.why` turns the same data into the
dataclasses of the Python API.

A commit is a dict with the keys `commit, author, email, date, subject, body,
reasoning` (the values `git obversa log --json` prints), plus `ranges` (1-based
inclusive `[first, last]` line ranges, ascending) and `paths` (the file's names in that
commit) for a commit blame found (what `git obversa why --json` prints).
"""

from __future__ import annotations

import codecs
import os
import re
import time

from git_obversa import git
from git_obversa.record.message import LEGACY_WHY_HEADING, WHY_HEADING, parse_reasoning

TYPE_CHECKING = False  # typing costs a `git obversa why` process milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO

# Git's own binary test: a NUL byte among the first 8000 bytes.
BINARY_PROBE_BYTES = 8000


class BlameError(Exception):
    """The lines cannot be blamed (missing or binary file, bad range or revision)."""


def lookup(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None = None,
    end: int | None = None,
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
    lines: list[tuple[int, str, str]] | None = None,
) -> dict[str, dict]:
    """The commits owning lines START..END of PATH at REV, sha -> commit dict, in the
    order of the first line each owns. With LINES, each line also goes into it as
    (number, sha, text), the text without its end of line (and without a CR before it).

    REV None blames the file in the working tree, as plain `git blame PATH` does (lines
    not committed yet belong to the all-zero commit). PATH is relative to REPOSITORY (or
    absolute). END past the end of the file stops at its last line; END None with START
    given reads to the end. MOVES and COPIES are `git blame -M` and `-C` (COPIES = how
    many times -C is given, 0 to 3). Git's own configuration applies,
    `blame.ignoreRevsFile` included. Raises BlameError when the lines cannot be blamed,
    ValueError for a range that is no range.
    """
    args = _blame_arguments(path, start, end, rev, moves, copies)
    try:
        blame = git.start(args, repository)
    except git.GitError as error:
        raise BlameError(str(error)) from None
    try:
        # Started now, so its start-up overlaps blame's work.
        reader = _CommitReader(repository)
    except git.GitError as error:
        blame.kill()
        blame.communicate()
        raise BlameError(str(error)) from None
    try:
        # Bytes: a file's lines need not be UTF-8.
        output, errors = blame.communicate()
        if blame.returncode != 0:
            raise BlameError(_blame_failure(_last_line(errors), path, start, rev))
        rows = output.split(b"\n")
        # The fast test first: a NUL byte can only come from the file's lines.
        if b"\0" in output and _is_binary(rows):
            raise BlameError(f"{path} is a binary file; why reads lines of text")
        # Git reads the commits while Python parses the rest.
        reader.request(_named_commits(output))
        found, owned, paths = _parse_porcelain(rows, lines)
    except BaseException:
        reader.finish()  # blame's failure is the one to report
        raise
    messages = reader.messages()
    commits: dict[str, dict] = {}
    for sha, (author, mail, seconds, zone) in found.items():
        message = messages.get(sha)
        if message is None:
            if sha.strip("0"):
                raise BlameError(f"blame named commit {sha}, which was not read")
            # The all-zero commit holds the lines changed but not committed.
            message = "Not committed yet\n"
        subject, body = _subject_and_body(message)
        commits[sha] = {
            "commit": sha,
            "author": author.decode("utf-8", "replace"),
            "email": mail.decode("utf-8", "replace").strip("<>"),
            "date": _iso_date(seconds, zone),
            "subject": subject,
            "body": body,
            "reasoning": parse_reasoning(message),
            "ranges": owned[sha],
            "paths": paths[sha],
        }
    return commits


def reasoned_commits(
    repository: str | os.PathLike[str],
    paths: Sequence[str] = (),
    rev: str = "HEAD",
    limit: int | None = None,
) -> list[dict]:
    """Commits reachable from REV (touching PATHS, if given) whose message records
    reasoning, newest first, at most LIMIT of them. One `git log` process."""
    if rev.startswith("-"):
        raise BlameError(f"{rev!r} is not a revision")
    args = [
        "log",
        "-z",
        "--format=%H%n%aN%n%aE%n%aI%n%B",
        # Only messages with a heading line can hold reasoning; let git skip the rest.
        f"--grep=^ *{re.escape(WHY_HEADING)} *$",
        f"--grep=^ *{re.escape(LEGACY_WHY_HEADING)} *$",
        rev,
        "--",
        *paths,
    ]
    try:
        output = git.run(args, repository, input=b"").stdout
    except git.GitError as error:
        raise BlameError(str(error).removeprefix("fatal: ")) from None
    commits: list[dict] = []
    for record in output.decode("utf-8", "replace").split("\0"):
        if limit is not None and len(commits) >= limit:
            break
        fields = record.lstrip("\n").split("\n", 4)
        if len(fields) < 5:
            continue
        sha, author, email, date, message = fields
        reasoning = parse_reasoning(message)
        if reasoning is None:
            continue
        subject, body = _subject_and_body(message)
        commits.append(
            {
                "commit": sha,
                "author": author,
                "email": email,
                "date": date,
                "subject": subject,
                "body": body,
                "reasoning": reasoning,
            }
        )
    return commits


def _subject_and_body(message: str) -> tuple[str, str]:
    """Split a message as `git log` does for %s and %b: the first paragraph, the rest."""
    text = message.replace("\r\n", "\n").strip("\n")
    first, _, rest = text.partition("\n\n")
    if "\n" not in first and first.strip():  # the usual: a one-line subject
        return first.strip(), rest.strip("\n").rstrip()
    lines = text.split("\n")
    blank = next((number for number, line in enumerate(lines) if not line.strip()), len(lines))
    subject = " ".join(line.strip() for line in lines[:blank])
    return subject, "\n".join(lines[blank:]).strip("\n").rstrip()


# ---------------------------------------------------------------------------------------
# Running and reading git blame


def _blame_arguments(
    path: str, start: int | None, end: int | None, rev: str | None, moves: bool, copies: int
) -> list[str]:
    args = ["blame", "--porcelain"]
    if start is not None or end is not None:
        first = 1 if start is None else start
        if first < 1 or (end is not None and end < first):
            raise ValueError(f"bad line range {start}-{end}: lines count from 1, END >= START")
        args += ["-L", f"{first},{'' if end is None else end}"]
    if moves:
        args.append("-M")
    args += ["-C"] * copies
    if rev is not None:
        if rev.startswith("-"):
            raise BlameError(f"{rev!r} is not a revision")
        args.append(rev)
    args += ["--", path]
    return args


def _last_line(errors: bytes) -> str:
    lines = errors.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "git blame failed"


def _blame_failure(detail: str, path: str, start: int | None, rev: str | None) -> str:
    """Git's one-line complaint, reworded where it can say more."""
    detail = detail.removeprefix("fatal: ")
    too_short = re.search(r"file .* has only (\d+) lines?", detail)
    if too_short and start is not None:
        return f"{path} has only {too_short[1]} lines; line {start} is past the end"
    if re.search(r"no such path '?(.*?)'? in (\S+)$|Cannot lstat", detail):
        where = "the working tree" if rev is None else rev
        return f"{path} is not a file in {where}; check the path, or the revision"
    return detail


def _is_binary(rows: list[bytes]) -> bool:
    """Whether the blamed lines hold a NUL byte in their first 8000 bytes."""
    probed = 0
    for row in rows:
        if row[:1] == b"\t":  # a line of the file; every other row is blame's own
            if b"\0" in row[1 : 1 + BINARY_PROBE_BYTES - probed]:
                return True
            probed += len(row)  # the line and its newline
            if probed >= BINARY_PROBE_BYTES:
                return False
    return False


def _parse_porcelain(
    rows: list[bytes], lines: list[tuple[int, str, str]] | None
) -> tuple[dict[str, tuple[bytes, ...]], dict[str, list[list[int]]], dict[str, list[str]]]:
    """Per commit: (author, author-mail, author-time, author-tz), the line ranges owned
    (ascending, adjacent ones joined) and the file's names. Lines go into LINES unless it
    is None.

    `git blame --porcelain` writes groups of lines blamed on one commit, in line order:
    `<sha> <original line> <final line> <count>`; the commit's fields the first time the
    commit appears (`filename` also later, when the commit has several paths); a tab and
    the group's first line; then `<sha> <original line> <final line>` and a tab and the
    text for each of its COUNT - 1 further lines. So a group is read by slicing, not
    row by row.
    """
    found: dict[str, tuple[bytes, ...]] = {}
    owned: dict[str, list[list[int]]] = {}
    paths: dict[str, list[str]] = {}
    names: dict[bytes, str] = {}  # sha as blame writes it -> as str
    index = 0
    last = len(rows) - 1  # the output ends with a newline: the final row is empty
    while index < last:
        sha_field, _, first_field, count_field = rows[index].split(b" ")
        first = int(first_field)
        final = first + int(count_field) - 1
        index += 1
        sha = names.get(sha_field)
        if rows[index][0] != 9:  # not a tab: the commit's fields come first
            end = index + 1
            while rows[end][0] != 9:
                end += 1
            if sha is None:
                sha = names[sha_field] = sha_field.decode()
                found[sha] = _author_fields(rows[index:end])
                owned[sha], paths[sha] = [], []
            name = rows[end - 1]
            if name[:9] == b"filename ":
                name = name[9:].decode("utf-8", "replace")
                if name not in paths[sha]:
                    paths[sha].append(name)
            index = end
        ranges = owned[sha]
        if ranges and ranges[-1][1] == first - 1:
            ranges[-1][1] = final
        else:
            ranges.append([first, final])
        if lines is not None:
            for number, row in enumerate(rows[index : index + 2 * (final - first) + 1 : 2], first):
                text = row[1:-1] if row.endswith(b"\r") else row[1:]
                lines.append((number, sha, text.decode("utf-8", "replace")))
        index += 2 * (final - first) + 1
    return found, owned, paths


_AUTHOR_KEYS = (b"author", b"author-mail", b"author-time", b"author-tz")


def _author_fields(details: list[bytes]) -> tuple[bytes, ...]:
    """(author, author-mail, author-time, author-tz) from a commit's porcelain fields."""
    # Git writes these four first, in this order; read them by position when it did.
    if len(details) > 3 and details[3][:10] == b"author-tz " and details[0][:7] == b"author ":
        return details[0][7:], details[1][12:], details[2][12:], details[3][10:]
    fields = dict(row.partition(b" ")[::2] for row in details)
    return tuple(fields.get(key, b"") for key in _AUTHOR_KEYS)


def _named_commits(output: bytes) -> list[bytes]:
    """The commits blame's porcelain OUTPUT names, in order, without the all-zero one.

    Found without parsing: the fields of each commit, given once, start with an `author`
    row right after the commit's first header row, and no other row starts with it.
    """
    commits = []
    for before in output.split(b"\nauthor ")[:-1]:
        header = before[before.rfind(b"\n") + 1 :]
        sha = header[: header.find(b" ")]
        if sha.strip(b"0"):
            commits.append(sha)
    return commits


# ---------------------------------------------------------------------------------------
# Reading the commits: one `git cat-file --batch`


class _CommitReader:
    """`git cat-file --batch` reading the messages of the commits blame names.

    Started together with blame, so its start-up overlaps blame's work; given every
    commit before the porcelain is parsed, so git reads them while Python parses. Its
    output goes to a file without a name rather than a pipe: git never waits for
    Python to read.
    """

    def __init__(self, repository: str | os.PathLike[str]) -> None:
        self._output = _unnamed_file()
        try:
            self.process = git.start(
                ["cat-file", "--batch", "--buffer"], repository, stdin=True, stdout=self._output
            )
        except BaseException:
            self._output.close()
            raise
        self.commits: list[str] = []

    def request(self, commits: list[bytes]) -> None:
        """Ask for COMMITS (hex ids as blame writes them) and end the input."""
        self.commits = [sha.decode() for sha in commits]
        try:
            self.process.stdin.write(b"".join(sha + b"\n" for sha in commits))
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # git has stopped; messages() says why

    def finish(self) -> tuple[bytes, bytes]:
        """End the input, wait for git to exit: (its output, its stderr)."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        with self.process.stderr:
            errors = self.process.stderr.read()  # to its end: git has exited or is exiting
        self.process.wait()
        with self._output:
            self._output.seek(0)
            return self._output.read(), errors

    def messages(self) -> dict[str, str]:
        """The message of every commit requested, once git has read them all."""
        output, errors = self.finish()
        if self.process.returncode != 0:
            raise BlameError(f"cannot read the commits blame named: {_last_line(errors)}")
        messages: dict[str, str] = {}
        for sha, (header, content) in zip(self.commits, git.batch_records(output), strict=True):
            if len(header) != 3 or header[1] != b"commit":
                raise BlameError(f"cannot read commit {sha}: {b' '.join(header).decode()}")
            messages[sha] = _commit_message(content)
        return messages


def _unnamed_file() -> IO[bytes]:
    """A file with no name, gone once closed: in memory where the system can (Linux)."""
    if hasattr(os, "memfd_create"):
        return open(os.memfd_create("git-obversa-why"), "w+b")
    import tempfile

    return tempfile.TemporaryFile()


def _commit_message(raw: bytes) -> str:
    headers, _, message = raw.partition(b"\n\n")
    encoding = "utf-8"
    if b"\nencoding " in headers:
        for header in headers.split(b"\n"):
            if header.startswith(b"encoding "):
                name = header[len(b"encoding ") :].decode("ascii", "replace").strip()
                try:
                    encoding = codecs.lookup(name).name
                except LookupError:
                    pass
    return message.decode(encoding, "replace")


def _iso_date(seconds: bytes, zone: bytes) -> str:
    """ISO 8601 date of SECONDS since the epoch in ZONE (`+0100`), as `git log %aI`."""
    offset = _ZONES.get(zone)
    if offset is None:
        try:
            minutes = int(zone[1:3]) * 60 + int(zone[3:5])
        except ValueError:
            minutes = 0
        if zone.startswith(b"-"):
            minutes = -minutes
        sign = "-" if minutes < 0 else "+"
        offset = _ZONES[zone] = (
            minutes * 60,
            f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}",
        )
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(seconds) + offset[0])) + offset[1]


# Time zone as blame writes it (`-0530`) -> (offset in seconds, as ISO 8601 writes it).
_ZONES: dict[bytes, tuple[int, str]] = {}
