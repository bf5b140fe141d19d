"""Blame lookup: from lines of a file to the reasoning recorded in the commits that wrote them.

A lookup costs two git processes whatever the history looks like: one
`git blame --porcelain` for the lines and one `git cat-file --batch` that reads every
commit blame named. The reader starts together with blame, so its start-up overlaps
blame's work. `git obversa why` runs this module in a fresh Python process each time, so
it imports only cheap standard modules (no dataclasses, datetime or pathlib, no regular
expression compiled at import): the command then costs little more than Python's own
start-up on top of plain `git blame` (bench/why.py measures it).
"""

from __future__ import annotations

import codecs
import os
import re
import time
from collections.abc import Iterator, Sequence

from git_obversa import git
from git_obversa.message import LEGACY_WHY_HEADING, RECORD_TRAILER, WHY_HEADING

TYPE_CHECKING = False  # typing costs a `git obversa why` process milliseconds to import
if TYPE_CHECKING:
    from typing import IO

# Git's own binary test: a NUL byte among the first 8000 bytes.
BINARY_PROBE_BYTES = 8000

# The characters of a trailer token (`git interpret-trailers`): letters, digits, dashes.
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"
# Lines git itself writes into a trailer paragraph (`commit -s`, `cherry-pick -x`).
_GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
_RECORD_KEY = RECORD_TRAILER.lower()


class BlameError(Exception):
    """The lines cannot be blamed (missing or binary file, bad range or revision)."""


class _Record:
    """A value object: compared and shown by the fields FIELDS names.

    Plain classes with slots rather than dataclasses: importing `dataclasses` costs a
    `git obversa why` process more than blaming a recently changed line does.
    """

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({fields})"


class Commit(_Record):
    """A commit and the reasoning recorded in its message."""

    FIELDS = ("commit", "author", "email", "date", "subject", "body", "reasoning")
    __slots__ = FIELDS

    def __init__(
        self,
        commit: str,
        author: str,
        email: str,
        date: str,  # ISO 8601 author date in the author's time zone
        subject: str,
        body: str,  # the message after the subject paragraph, trailers included
        reasoning: str | None,  # parse_reasoning(message)
    ) -> None:
        self.commit = commit
        self.author = author
        self.email = email
        self.date = date
        self.subject = subject
        self.body = body
        self.reasoning = reasoning

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}


class BlamedCommit(Commit):
    """A commit as blame found it: the lines of the file it owns."""

    FIELDS = (*Commit.FIELDS, "ranges", "paths")
    __slots__ = ("ranges", "paths")

    def __init__(
        self,
        commit: str,
        author: str,
        email: str,
        date: str,
        subject: str,
        body: str,
        reasoning: str | None,
        ranges: tuple[tuple[int, int], ...],  # 1-based inclusive line ranges, ascending
        paths: tuple[str, ...],  # the file's name(s) in that commit (renames, -C copies)
    ) -> None:
        super().__init__(commit, author, email, date, subject, body, reasoning)
        self.ranges = ranges
        self.paths = paths

    def to_json(self) -> dict:
        value = super().to_json()
        value["ranges"] = [list(pair) for pair in self.ranges]
        value["paths"] = list(self.paths)
        return value


class BlamedLine(_Record):
    FIELDS = ("number", "commit", "text")
    __slots__ = FIELDS

    def __init__(self, number: int, commit: str, text: str) -> None:
        self.number = number
        self.commit = commit
        self.text = text  # the line without its end of line (and without a CR before it)


class Annotation(_Record):
    """`git blame` of some lines, with each commit's reasoning."""

    FIELDS = ("lines", "commits")
    __slots__ = FIELDS

    def __init__(self, lines: list[BlamedLine], commits: dict[str, BlamedCommit]) -> None:
        self.lines = lines
        self.commits = commits  # in the order of the first line each owns


# ---------------------------------------------------------------------------------------
# Reading the reasoning out of a commit message


def parse_reasoning(message: str) -> str | None:
    """The reasoning recorded in a commit message, or None when it holds none.

    That is the text under each line reading exactly `Why:` (what the hook writes), up
    to the trailer paragraph that closes it; failing that, the text of each `## Why`
    section (messages written with `git commit -F` from a record). Blocks indented
    together, as `git merge --squash` indents the squashed messages, are read the same
    way. Several blocks come back in message order, separated by a blank line.
    """
    if WHY_HEADING not in message and LEGACY_WHY_HEADING not in message:
        return None  # most messages: no heading line can be among them
    lines = [line.rstrip() for line in message.replace("\r\n", "\n").split("\n")]
    for heading in (WHY_HEADING, LEGACY_WHY_HEADING):
        blocks = [block for block in _blocks(lines, heading) if block]
        if blocks:
            return "\n\n".join(blocks)
    return None


def _blocks(lines: list[str], heading: str) -> Iterator[str]:
    index = 0
    while index < len(lines):
        stripped = lines[index].lstrip(" ")
        if stripped != heading:
            index += 1
            continue
        indent = len(lines[index]) - len(stripped)
        end = index + 1
        while end < len(lines) and not _ends_block(lines[end], indent, heading):
            end += 1
        yield _block_text([line[indent:] for line in lines[index + 1 : end]])
        index = end


def _ends_block(line: str, indent: int, heading: str) -> bool:
    if not line:
        return False
    if line[:indent].strip(" "):
        return True  # less indented than the heading: the squashed message is over
    rest = line[indent:]
    if rest in (WHY_HEADING, LEGACY_WHY_HEADING):
        return True
    # A Markdown section of level 1 or 2 ends a `## Why` section.
    return heading == LEGACY_WHY_HEADING and (rest in ("#", "##") or rest.startswith(("# ", "## ")))


def _block_text(lines: list[str]) -> str:
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    if not paragraphs[-1]:
        paragraphs.pop()
    kept: list[list[str]] = []
    for number, paragraph in enumerate(paragraphs):
        # Trailers close the block: the paragraph carrying the hook's own trailer, or
        # the last paragraph (unless it is the only one: then it is the reasoning).
        if _is_trailer_paragraph(paragraph) and (
            any(map(_is_record_line, paragraph)) or 0 < number == len(paragraphs) - 1
        ):
            break
        kept.append(paragraph)
    return "\n\n".join("\n".join(paragraph) for paragraph in kept)


def _is_trailer_paragraph(lines: Sequence[str]) -> bool:
    """Whether `git interpret-trailers --parse` would take this paragraph as trailers.

    Git's rule: every line is a trailer (or a folded continuation of one), or at least
    a quarter are and one of them is a line git itself generates.
    """
    trailers = others = continuations = 0
    generated = False
    for line in reversed(lines):
        if line.startswith(_GIT_GENERATED_PREFIXES):
            trailers, continuations, generated = trailers + 1, 0, True
        elif _is_trailer_line(line):
            trailers, continuations = trailers + 1, 0
        elif line[:1] in (" ", "\t"):
            continuations += 1
        else:
            others, continuations = others + 1 + continuations, 0
    others += continuations
    return trailers > 0 and (others == 0 or (generated and trailers * 3 >= others))


def _is_trailer_line(line: str) -> bool:
    """A token of letters, digits and dashes, optional blanks, then the separator."""
    token, separator, _ = line.partition(":")
    token = token.rstrip(" \t")
    return bool(separator and token) and not token.strip(_TOKEN_CHARS)


def _is_record_line(line: str) -> bool:
    """The hook's own trailer, `Obversa-Record:` (any case, blanks before the colon)."""
    key = line[: len(_RECORD_KEY)]
    return key.lower() == _RECORD_KEY and line[len(key) :].lstrip(" \t").startswith(":")


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
# Blame


def annotate(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None = None,
    end: int | None = None,
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
) -> Annotation:
    """Blame lines START..END of PATH at REV (the whole file by default) with reasoning.

    REV None blames the file in the working tree, as plain `git blame PATH` does (lines
    not committed yet belong to the all-zero commit). PATH is relative to REPOSITORY
    (or absolute). END past the end of the file stops at
    its last line; END None with START given reads to the end. `moves` and `copies` are
    `git blame -M` and `-C` (`copies` = how many times -C is given, 0 to 3). Git's own
    configuration applies, `blame.ignoreRevsFile` included. Raises BlameError when the
    lines cannot be blamed.
    """
    lines: list[BlamedLine] = []
    commits = _blame(repository, path, start, end, rev, moves, copies, lines)
    return Annotation(lines, commits)


def why(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None = None,
    end: int | None = None,
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
) -> list[BlamedCommit]:
    """The commits that own lines START..END of PATH at REV, ordered by line, with the
    reasoning each recorded (None when a commit recorded none). See `annotate`."""
    return list(_blame(repository, path, start, end, rev, moves, copies, None).values())


def _blame(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    end: int | None,
    rev: str | None,
    moves: bool,
    copies: int,
    lines: list[BlamedLine] | None,
) -> dict[str, BlamedCommit]:
    """The commits owning the lines, in line order; the lines go into LINES unless None."""
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
    commits: dict[str, BlamedCommit] = {}
    for sha, (author, mail, seconds, zone) in found.items():
        message = messages.get(sha)
        if message is None:
            if sha.strip("0"):
                raise BlameError(f"blame named commit {sha}, which was not read")
            # The all-zero commit holds the lines changed but not committed.
            message = "Not committed yet\n"
        subject, body = _subject_and_body(message)
        commits[sha] = BlamedCommit(
            sha,
            author.decode("utf-8", "replace"),
            mail.decode("utf-8", "replace").strip("<>"),
            _iso_date(seconds, zone),
            subject,
            body,
            parse_reasoning(message),
            tuple((first, last) for first, last in owned[sha]),
            tuple(paths[sha]),
        )
    return commits


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
    rows: list[bytes], lines: list[BlamedLine] | None
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
                lines.append(BlamedLine(number, sha, text.decode("utf-8", "replace")))
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
        position = 0
        for sha in self.commits:
            newline = output.index(b"\n", position)
            header = output[position:newline].split()
            if len(header) != 3 or header[1] != b"commit":
                raise BlameError(f"cannot read commit {sha}: {output[position:newline].decode()}")
            size = int(header[2])
            messages[sha] = _commit_message(output[newline + 1 : newline + 1 + size])
            position = newline + 1 + size + 1
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


# ---------------------------------------------------------------------------------------
# Log


def reasoned_log(
    repository: str | os.PathLike[str],
    paths: Sequence[str] = (),
    rev: str = "HEAD",
    limit: int | None = None,
) -> list[Commit]:
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
    commits: list[Commit] = []
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
        commits.append(Commit(sha, author, email, date, subject, body, reasoning))
    return commits
