"""Blame lookup: from lines of a file to the reasoning recorded in the commits that wrote them.

A lookup costs two git processes whatever the history looks like: one
`git blame --porcelain` for the lines, then one `git cat-file --batch` that reads every
commit blame named. Nothing here imports more than the standard library, so
`git obversa why` starts about as fast as Python does and stays close to plain
`git blame` (bench/why.py measures it).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from git_obversa import git
from git_obversa.message import LEGACY_WHY_HEADING, RECORD_TRAILER, WHY_HEADING

# Git's own binary test: a NUL byte among the first 8000 bytes.
BINARY_PROBE_BYTES = 8000

# A trailer line as `git interpret-trailers` sees it: a token of letters, digits and
# dashes, optional blanks, then the separator.
_TRAILER_LINE = re.compile(r"[A-Za-z0-9-]+[ \t]*:")
# Lines git itself writes into a trailer paragraph (`commit -s`, `cherry-pick -x`).
_GIT_GENERATED_PREFIXES = ("Signed-off-by: ", "(cherry picked from commit ")
_RECORD_LINE = re.compile(re.escape(RECORD_TRAILER) + r"[ \t]*:", re.IGNORECASE)
_MARKDOWN_SECTION = re.compile(r"#{1,2}( |$)")
_LINE_COUNT_ERROR = re.compile(r"file .* has only (\d+) lines?")
_NO_SUCH_PATH = re.compile(r"no such path '?(.*?)'? in (\S+)$|Cannot lstat")
# The commit git blame reports for lines changed in the working tree but not committed.
_NOT_COMMITTED = re.compile(r"0+")


class BlameError(Exception):
    """The lines cannot be blamed (missing or binary file, bad range or revision)."""


@dataclass(frozen=True)
class Commit:
    """A commit and the reasoning recorded in its message."""

    commit: str
    author: str
    email: str
    date: str  # ISO 8601 author date in the author's time zone
    subject: str
    body: str  # the message after the subject paragraph, trailers included
    reasoning: str | None  # parse_reasoning(message)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BlamedCommit(Commit):
    """A commit as blame found it: the lines of the file it owns."""

    ranges: tuple[tuple[int, int], ...]  # 1-based inclusive line ranges, ascending
    paths: tuple[str, ...]  # the file's name(s) in that commit (renames, -C copies)

    def to_json(self) -> dict:
        value = super().to_json()
        value["ranges"] = [list(pair) for pair in self.ranges]
        value["paths"] = list(self.paths)
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
    return heading == LEGACY_WHY_HEADING and bool(_MARKDOWN_SECTION.match(rest))


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
            any(map(_RECORD_LINE.match, paragraph)) or 0 < number == len(paragraphs) - 1
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
        elif _TRAILER_LINE.match(line):
            trailers, continuations = trailers + 1, 0
        elif line[:1] in (" ", "\t"):
            continuations += 1
        else:
            others, continuations = others + 1 + continuations, 0
    others += continuations
    return trailers > 0 and (others == 0 or (generated and trailers * 3 >= others))


def _subject_and_body(message: str) -> tuple[str, str]:
    """Split a message as `git log` does for %s and %b: the first paragraph, the rest."""
    lines = message.replace("\r\n", "\n").strip("\n").split("\n")
    blank = next((number for number, line in enumerate(lines) if not line.strip()), len(lines))
    subject = " ".join(line.strip() for line in lines[:blank])
    return subject, "\n".join(lines[blank:]).strip("\n").rstrip()


# ---------------------------------------------------------------------------------------
# Blame


def annotate(
    repository: str | Path,
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
    try:
        # Bytes in, bytes out: a file's lines need not be UTF-8.
        output = git.run(args, repository, input=b"").stdout
    except git.GitError as error:
        raise BlameError(_blame_failure(str(error), path, start, rev)) from None
    lines, found = _parse_porcelain(output, path)
    messages = _read_messages(
        repository, [sha for sha in found if not _NOT_COMMITTED.fullmatch(sha)]
    )
    numbers: dict[str, list[int]] = {sha: [] for sha in found}
    for line in lines:
        numbers[line.commit].append(line.number)
    commits: dict[str, BlamedCommit] = {}
    for sha, details in found.items():
        message = messages.get(sha, "Not committed yet\n")
        subject, body = _subject_and_body(message)
        commits[sha] = BlamedCommit(
            commit=sha,
            author=details["author"],
            email=details["author-mail"].strip("<>"),
            date=_iso_date(details["author-time"], details["author-tz"]),
            subject=subject,
            body=body,
            reasoning=parse_reasoning(message),
            ranges=_ranges(numbers[sha]),
            paths=tuple(details["paths"]),
        )
    return Annotation(lines=lines, commits=commits)


def why(
    repository: str | Path,
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
    annotation = annotate(repository, path, start, end, rev, moves=moves, copies=copies)
    return list(annotation.commits.values())


def _blame_failure(detail: str, path: str, start: int | None, rev: str | None) -> str:
    """Git's one-line complaint, reworded where it can say more."""
    detail = detail.removeprefix("fatal: ")
    too_short = _LINE_COUNT_ERROR.search(detail)
    if too_short and start is not None:
        return f"{path} has only {too_short[1]} lines; line {start} is past the end"
    if _NO_SUCH_PATH.search(detail):
        where = "the working tree" if rev is None else rev
        return f"{path} is not a file in {where}; check the path, or the revision"
    return detail


def _parse_porcelain(output: bytes, path: str) -> tuple[list[BlamedLine], dict[str, dict]]:
    """Lines and per-commit details of `git blame --porcelain` output.

    Details (author, ...) come once per commit, before its first line; a group of lines
    is introduced by `<sha> <original line> <final line> [<count>]`.
    """
    lines: list[BlamedLine] = []
    found: dict[str, dict] = {}
    sha = ""
    number = 0
    probed = 0
    for raw in output.split(b"\n"):
        if raw.startswith(b"\t"):
            text = raw[1:]
            if probed < BINARY_PROBE_BYTES and b"\0" in text[: BINARY_PROBE_BYTES - probed]:
                raise BlameError(f"{path} is a binary file; why reads lines of text")
            probed += len(raw)
            if text.endswith(b"\r"):
                text = text[:-1]
            lines.append(BlamedLine(number, sha, text.decode("utf-8", "replace")))
            continue
        key, _, value = raw.partition(b" ")
        if len(key) in (40, 64):  # "<sha> <original line> <final line> [<count>]"
            sha = key.decode()
            number = int(value.split(b" ", 2)[1])
            found.setdefault(sha, {"paths": []})
            continue
        if not raw or not sha:
            continue
        details = found[sha]
        if key == b"filename":
            name = value.decode("utf-8", "replace")
            if name not in details["paths"]:
                details["paths"].append(name)
        else:
            details[key.decode()] = value.decode("utf-8", "replace")
    return lines, found


def _read_messages(repository: str | Path, commits: list[str]) -> dict[str, str]:
    """The messages of COMMITS, read with one `git cat-file --batch`."""
    if not commits:
        return {}
    request = "".join(sha + "\n" for sha in commits).encode()
    output = git.run(["cat-file", "--batch"], repository, input=request).stdout
    messages: dict[str, str] = {}
    position = 0
    for sha in commits:
        newline = output.index(b"\n", position)
        header = output[position:newline].split()
        if len(header) != 3 or header[1] != b"commit":
            raise BlameError(f"cannot read commit {sha}: {output[position:newline].decode()}")
        size = int(header[2])
        messages[sha] = _commit_message(output[newline + 1 : newline + 1 + size])
        position = newline + 1 + size + 1
    return messages


def _commit_message(raw: bytes) -> str:
    headers, _, message = raw.partition(b"\n\n")
    encoding = "utf-8"
    for header in headers.split(b"\n"):
        if header.startswith(b"encoding "):
            name = header[len(b"encoding ") :].decode("ascii", "replace").strip()
            try:
                encoding = codecs.lookup(name).name
            except LookupError:
                pass
    return message.decode(encoding, "replace")


def _iso_date(seconds: str, zone: str) -> str:
    try:
        minutes = int(zone[1:3]) * 60 + int(zone[3:5])
        offset = timezone(timedelta(minutes=-minutes if zone.startswith("-") else minutes))
    except ValueError:
        offset = timezone.utc
    return datetime.fromtimestamp(int(seconds), offset).isoformat()


def _ranges(numbers: list[int]) -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    for number in numbers:
        if ranges and ranges[-1][1] == number - 1:
            ranges[-1] = (ranges[-1][0], number)
        else:
            ranges.append((number, number))
    return tuple(ranges)


# ---------------------------------------------------------------------------------------
# Log


def reasoned_log(
    repository: str | Path,
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
