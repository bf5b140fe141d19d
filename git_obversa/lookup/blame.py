"""Blame lookup engine: from lines of a file to the commits that wrote them, as plain data.

Without the blame cache, a lookup costs one `git blame` whatever the history looks
like, and one `git cat-file --batch` beside it that reads every commit blame names. A
whole file's blame is read as git computes it (`_IncrementalBlame`): messages are read
and parsed while blame still runs, on the other core. A range, or lines with their text,
come from `git blame --porcelain`, its reader started together with it. The blame cache
(below) answers most lookups without running blame at all.

`git obversa why`, `blame` and `log` call this module directly, in a fresh Python process
each time, so it imports only cheap standard modules (no dataclasses, datetime, pathlib,
typing or re; `re` costs ~15 ms to import on the bench machine and only a failure's
wording and `reasoned_commits` use it: the CLI gets it from argparse anyway, an API caller
need not) and returns plain dicts, lists and tuples: the command then costs little more
than Python's own start-up on top of plain `git blame` (bench/why.py measures it).
`git_obversa.lookup.why` turns the same data into the
dataclasses of the Python API.

A commit is a dict with the keys `commit, author, email, date, subject, body,
reasoning` (the values `git obversa log --json` prints), plus `ranges` (1-based
inclusive `[first, last]` line ranges, ascending) and `paths` (the file's names in that
commit) for a commit blame found (what `git obversa why --json` prints).
"""

import codecs
import os
import time

from git_obversa import git
from git_obversa.lookup import cache as blame_cache
from git_obversa.lookup import early as early_blame
from git_obversa.lookup import layout

TYPE_CHECKING = False  # typing costs a `git obversa why` process milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import IO

# The fields of a commit, in the order `_commit_fields` gives them (and a cache entry
# keeps them); a commit blame found also has "ranges" and "paths".
COMMIT_KEYS = ("commit", "author", "email", "date", "subject", "body", "reasoning")

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
    cache: bool = True,
    prepare: "Callable[[dict], object] | None" = None,
    keep: "Callable[[Callable[[], object]], object] | None" = None,
) -> dict[str, dict]:
    """The commits owning lines START..END of PATH at REV, sha -> commit dict, in the
    order of the first line each owns. With LINES, each line also goes into it as
    (number, sha, text), the text without its end of line (and without a CR before it).

    PREPARE, when given, is called with a commit's dict (`ranges` and `paths` still
    empty; it must not change it) as soon as a whole file's blame run afresh has read
    the commit's message, while blame still runs: a caller lays out there what it will
    print of the commit, on the core blame leaves free. Not every commit answered need
    have been given to it.

    With CACHE (and neither MOVES nor COPIES), the blame cache answers when it can (see
    `_cached_lookup`): the same result, from a blame kept on disk. KEEP, when given, is
    handed the keeping of a blame computed afresh (a function of no arguments) rather
    than this doing it before it answers: a caller that can do it once its output is out
    (the CLI: docs/benchmarks.md, "Blame lookup").

    REV None blames the file in the working tree, as plain `git blame PATH` does (lines
    not committed yet belong to the all-zero commit). PATH is relative to REPOSITORY (or
    absolute). END past the end of the file stops at its last line; END None with START
    given reads to the end. MOVES and COPIES are `git blame -M` and `-C` (COPIES = how
    many times -C is given, 0 to 3). Git's own configuration applies,
    `blame.ignoreRevsFile` included. Raises BlameError when the lines cannot be blamed,
    ValueError for a range that is no range.
    """
    args = _blame_arguments(path, start, end, rev, moves, copies)
    if cache and not moves and not copies:
        found = _cached_lookup(repository, path, start, end, rev, lines, prepare, keep)
        if found is not None:
            return found
    elif start is None and end is None and lines is None:
        blamed = _IncrementalBlame(repository, args[2:])  # args: the porcelain blame's
        found = _streamed_lookup(repository, path, rev, blamed, prepare)
        if found is not None:
            return found
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
        fields = _commit_fields(
            sha,
            author.decode("utf-8", "replace"),
            mail.decode("utf-8", "replace").strip("<>"),
            _iso_date(seconds, zone),
            message,
        )
        commits[sha] = dict(
            zip(COMMIT_KEYS, fields, strict=True), ranges=owned[sha], paths=paths[sha]
        )
    return commits


def reasoned_commits(
    repository: str | os.PathLike[str],
    paths: "Sequence[str]" = (),
    rev: str = "HEAD",
    limit: int | None = None,
) -> list[dict]:
    """Commits reachable from REV (touching PATHS, if given) whose message records
    reasoning, newest first, at most LIMIT of them. One `git log` process."""
    if rev.startswith("-"):
        raise BlameError(f"{rev!r} is not a revision")
    import re  # here, as in _blame_failure: a lookup from the cache needs no `re`

    from git_obversa.record.message import LEGACY_WHY_HEADING, WHY_HEADING

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
        fields = _commit_fields(sha, author, email, date, message)
        if fields[-1] is not None:
            commits.append(dict(zip(COMMIT_KEYS, fields, strict=True)))
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
    import re

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
                name = _filename(name[9:])
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


def _unnamed_file() -> "IO[bytes]":
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


def _filename(quoted: bytes) -> str:
    """A file name as blame's porcelain writes it (C-quoted when it holds unusual bytes)."""
    if len(quoted) > 1 and quoted[:1] == b'"' and quoted[-1:] == b'"':
        quoted = codecs.escape_decode(quoted[1:-1])[0]
    return quoted.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------
# A whole file's blame read while git computes it


class _IncrementalBlame:
    """`git blame --incremental`, read while it runs, beside a `git cat-file --batch`
    that reads each commit's message as soon as blame first names the commit.

    Blame finds the owners of the lines newest first and prints each group of lines as
    it finds it, over the whole of its run; so the table is filled in, and the messages
    read, decoded and parsed (subject, body, reasoning), on the other core while blame
    still walks history, and little is left to do once it exits. Its output has no
    text: the lines are the blob's, read by the same cat-file (`table`). The cat-file
    writes into a file without a name, so it never waits for Python, and Python's
    requests to it never wait for long.

    Both processes start at once (blame first: it is the one waited for); `table`
    reads them to the end; `close` (or leaving a `with` block) stops what still runs.
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str],
        args: list[str],
        started: tuple[int, int] | None = None,
    ) -> None:
        """Blame ARGS in CWD; STARTED, when given, is that blame already running (pid,
        output: `early.claim`)."""
        self._running: list[int] = []
        self._descriptors: list[int] = []
        self._output = _unnamed_file()
        try:
            pid, self._rows_from = started or early_blame.spawn_blame(cwd, args)
            self._running.append(pid)
            self._descriptors.append(self._rows_from)
            pid, self._requests, _, _ = git.spawn(
                ["cat-file", "--batch", "--buffer"], cwd, stdin=True, stdout=self._output.fileno()
            )
            self._running.append(pid)
            self._descriptors.append(self._requests)
        except git.GitError as error:
            self.close()
            raise BlameError(str(error)) from None
        self._partial = b""  # the start of a group blame has not finished
        self._authors: dict[bytes, tuple[bytes, ...]] = {}  # commit -> blame's author fields
        self._index_of: dict[bytes, int] = {}  # commit -> its place in the table's commits
        self._name_index: dict[bytes, int] = {}  # file name as blame writes it -> its place
        # The table being filled in; its columns of lines wait for the blob's line count,
        # the groups found before it come in PENDING: (final line, count, owner, origin
        # line, source).
        self._commits: list[tuple | None] = []  # None until the message is read
        self.described: list[dict] | None = None  # their dicts, when `table` is asked to
        self._prepare: Callable[[dict], object] | None = None
        self._names: list[str] = []
        self._lines: tuple[list[int], list[int], list[int]] | None = None
        self._texts: list[str] = []
        self._pending: list[tuple[int, int, int, int, int]] = []
        self._blamed = 0  # lines the groups so far cover
        self._fits = True  # no group so far falls outside the file
        self._want_texts = True
        self._binary = False
        self._asked: list[int] = []  # each request, in order: a commit's place, or -1 (the blob)
        self._answered = 0
        self._read_to = 0  # how far cat-file's output has been read
        self._unread = b""  # read, but not a whole record yet
        self.read = False  # whether `table` has been asked (it reads blame's output once)
        self.blob: str | None = None  # the blamed content's blob id, once cat-file gave it

    def __enter__(self) -> "_IncrementalBlame":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def table(
        self,
        blob: str,
        texts: bool = True,
        described: bool = False,
        prepare: "Callable[[dict], object] | None" = None,
    ) -> tuple | None:
        """The file's whole blame as a table (see the blame cache below), once both
        processes have finished; BLOB names the blamed file's content (`<commit>:<path>`),
        read for the lines' count and text (an empty list of texts unless TEXTS) and
        checked for a NUL byte as git's own binary test does. With DESCRIBED, the dict of
        each commit `lookup` answers with is made as its message arrives (`described`,
        for `_answer`), and given to PREPARE (see `lookup`). None when blame fails, the
        file is binary, or the answer does not hang together (the caller then asks git
        blame itself, whose error, if any, says what is wrong)."""
        self.read = True
        name = blob.encode("utf-8", "surrogateescape")
        if b"\n" in name:
            return None  # cat-file reads a name per line
        self._want_texts = texts
        self._prepare = prepare
        if described:
            self.described = [_described(fields) if fields else None for fields in self._commits]
        self._request([name], [-1])
        while data := os.read(self._rows_from, 1 << 16):
            self._read_groups(data)
            self._read_answers()
        # Blame has printed all; cat-file reads the last commits while blame exits.
        os.close(self._requests)
        self._descriptors.remove(self._requests)
        reader_status = self._reap(1)
        if self._reap(0) != 0 or reader_status != 0 or self._partial:
            return None
        self._read_answers()
        lines = self._lines
        if self._answered != len(self._asked) or lines is None or self._binary:
            return None
        owners, origins, sources = lines
        if not self._fits or self._blamed != len(owners) or (owners and min(owners) < 0):
            return None  # the groups do not cover each line once
        if None in self._commits:
            return None  # a commit not read, or the all-zero one: not a commit's blame
        return (self._commits, owners, origins, sources, self._names, self._texts)

    def close(self) -> None:
        """Stop whatever still runs and let go of everything held."""
        for pid in self._running:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        while self._running:
            self._reap(0)
        for descriptor in self._descriptors:
            os.close(descriptor)
        self._descriptors.clear()
        self._output.close()

    def _reap(self, index: int) -> int:
        """Wait for the INDEXth process still running (blame, then cat-file); its exit
        status."""
        pid = self._running.pop(index)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def _read_groups(self, data: bytes) -> None:
        """Take in DATA, more of blame's output: a group is `<sha> <origin line> <final
        line> <count>`, the commit's fields the first time it appears (and `previous`
        and `boundary` rows), and a `filename` row that ends it."""
        data = self._partial + data
        position = 0
        first_seen = []
        found = []
        while (newline := data.find(b"\n", position)) >= 0:
            name_row = data.find(b"\nfilename ", newline)  # the row that ends the group
            end = data.find(b"\n", name_row + 10) if name_row >= 0 else -1
            if end < 0:
                break  # the group is not whole yet
            sha, origin, final, count = data[position:newline].split(b" ")
            owner = self._index_of.get(sha)
            if owner is None:
                owner = self._index_of[sha] = len(self._commits)
                self._commits.append(None)
                if self.described is not None:
                    self.described.append(None)
                self._authors[sha] = _author_fields(data[newline + 1 : name_row].split(b"\n"))
                if sha.strip(b"0"):
                    first_seen.append(sha)
            name = data[name_row + 10 : end]
            source = self._name_index.get(name)
            if source is None:
                source = self._name_index[name] = len(self._names)
                self._names.append(_filename(name))
            found.append((int(final), int(count), owner, int(origin), source))
            position = end + 1
        self._partial = data[position:]
        if first_seen:
            self._request(first_seen, [self._index_of[sha] for sha in first_seen])
        if self._lines is None:
            self._pending += found
        else:
            self._place(found)

    def _place(self, groups: list[tuple[int, int, int, int, int]]) -> None:
        """Write GROUPS into the table's columns of lines."""
        owners, origins, sources = self._lines
        total = len(owners)
        for final, count, owner, origin, source in groups:
            last = final - 1 + count
            if final < 1 or count < 1 or last > total:
                self._fits = False
                return
            owners[final - 1 : last] = [owner] * count
            origins[final - 1 : last] = range(origin, origin + count)
            sources[final - 1 : last] = [source] * count
            self._blamed += count

    def _request(self, names: list[bytes], places: list[int]) -> None:
        """Ask cat-file for the objects NAMES: commits at PLACES of the table, or the
        blob (place -1)."""
        self._asked += places
        data = b"".join(name + b"\n" for name in names)
        try:
            while data:
                data = data[os.write(self._requests, data) :]
        except BrokenPipeError:
            pass  # cat-file has stopped; its exit status says so

    def _read_answers(self) -> None:
        """Take in the records cat-file has written since last time."""
        size = os.fstat(self._output.fileno()).st_size
        if size > self._read_to:
            self._unread += os.pread(self._output.fileno(), size - self._read_to, self._read_to)
            self._read_to = size
        data = self._unread
        position = 0
        while (newline := data.find(b"\n", position)) >= 0:
            header = data[position:newline].split(b" ")
            # `<oid> <type> <size>`, then the content; or `<name> missing` (or
            # `ambiguous`) alone, where the name may hold spaces.
            whole = len(header) == 3 and header[2].isdigit()
            end = newline + 1 + int(header[2]) if whole else newline
            if end + 1 > len(data):
                break  # the record is not whole yet
            self._take_record(
                header[1] if whole else b"missing", header[0], data[newline + 1 : end]
            )
            position = end + 1
        self._unread = data[position:]

    def _take_record(self, kind: bytes, sha: bytes, content: bytes) -> None:
        """Take in one record of cat-file: the object's KIND (`missing` when there is
        none), SHA and CONTENT."""
        place = self._asked[self._answered]
        self._answered += 1
        if place < 0:
            if kind == b"blob":
                self.blob = sha.decode("ascii", "replace")
                self._take_blob(content)
        elif kind == b"commit":
            author, mail, seconds, zone = self._authors[sha]
            fields = self._commits[place] = _commit_fields(
                sha.decode(),
                author.decode("utf-8", "replace"),
                mail.decode("utf-8", "replace").strip("<>"),
                _iso_date(seconds, zone),
                _commit_message(content),
            )
            if self.described is not None:
                made = self.described[place] = _described(fields)
                if self._prepare is not None:
                    self._prepare(made)

    def _take_blob(self, content: bytes) -> None:
        """The file's content: its line count sizes the table, its lines are the texts."""
        if b"\0" in content[:BINARY_PROBE_BYTES]:
            self._binary = True
        rows = content.split(b"\n")
        if rows[-1] == b"":
            rows.pop()  # the file ends with a newline (or is empty)
        count = len(rows)
        self._lines = ([-1] * count, [0] * count, [0] * count)
        if self._want_texts:
            self._texts = [
                (row[:-1] if row[-1:] == b"\r" else row).decode("utf-8", "replace") for row in rows
            ]
        self._place(self._pending)
        self._pending = []


# ---------------------------------------------------------------------------------------
# The blame cache
#
# A table is one file's whole blame at one commit, as plain lists (what cache.py keeps):
# (commits, owners, origins, sources, names, texts). `commits` are 7-tuples (sha, author,
# email, date, subject, body, reasoning); line i (0-based) is owned by commits[owners[i]],
# is line origins[i] of that commit's version of the file, named names[sources[i]] there,
# and reads texts[i].

# Configuration under which blame's answer is not a function of (commit, path) alone, or
# the one-commit diff would not be the diff blame uses: then git blame answers.
_BYPASS_PREFIXES = ("blame.ignorerevs", "mailmap.")
CHAIN = 512  # how far back along first parents an extension looks for a cached blame
_DIFF = early_blame.DIFF


def _cached_lookup(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    end: int | None,
    rev: str | None,
    lines: list[tuple[int, str, str]] | None,
    prepare: "Callable[[dict], object] | None" = None,
    keep: "Callable[[Callable[[], object]], object] | None" = None,
) -> dict[str, dict] | None:
    """`lookup` answered from the blame cache, or None when the cache cannot answer (the
    caller then runs git blame, which also gives any error its own words).

    The cache holds whole-file blames at commits. A lookup at a commit reads the entry for
    it; failing that, it extends the nearest cached blame along first parents (up to
    CHAIN commits back) by each commit's diff of the file, as blame itself passes lines
    to a parent; failing that, a lookup of the whole file runs `git blame` once (see
    `_IncrementalBlame`) and keeps the result (a range leaves it to `git blame -L`,
    which costs less). REV None (the working tree) is the blame at HEAD with the working
    tree's diff against HEAD laid on top as lines not committed yet. Merges that change
    the file, renames and copies between the cached commit and this one, binary files,
    and configuration that changes what blame answers (ignored revisions, mailmap,
    textconv, diff.algorithm) all go to git blame.

    A whole-file lookup of the working tree for which the cache directory visibly holds
    nothing starts `git blame` of the working tree before anything else (or takes over
    the one `bin/git-obversa` started, see `early`): blame is what it will wait for, and
    the checks then run beside it. A clean working tree's blame is HEAD's, which the
    cache keeps; where the cache cannot answer (configuration that bypasses it, a merge
    in progress), that blame answers as without the cache; otherwise it is stopped,
    unused.
    """
    early = None
    if rev is None and start is None and end is None:
        started = early_blame.claim(repository, path)
        if started is not None or early_blame.nothing_cached(repository, path):
            early = _IncrementalBlame(repository, ["--", path], started)
    try:
        found = _from_cache(repository, path, start, end, rev, lines, early, prepare, keep)
        if found is None and early is not None and not early.read and lines is None:
            found = _streamed_lookup(repository, path, rev, early, prepare)
        return found
    finally:
        if early is not None:
            early.close()


def _from_cache(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    end: int | None,
    rev: str | None,
    lines: list[tuple[int, str, str]] | None,
    early: _IncrementalBlame | None,
    prepare: "Callable[[dict], object] | None",
    keep: "Callable[[Callable[[], object]], object] | None" = None,
) -> dict[str, dict] | None:
    """`_cached_lookup`, given the blame of the working tree it may have started."""
    # With EARLY, nothing is kept for the file: git's own reading of HEAD will be needed.
    context = _context(repository, path, rev, read_head=early is None)
    if context is None:
        return None
    common_dir, top, relative, commit, read, configured, changes, proven = context
    limit = _cache_limit(configured)
    if limit is None or os.path.lexists(os.path.join(top, ".mailmap")):
        return None
    folder = blame_cache.directory(common_dir)
    described = None
    blob = None
    found = blame_cache.load(folder, commit, relative)
    if found is not None:
        table, blob = found
    if proven is not None and (found is None or blob != proven):
        # The working tree was shown to hold the blob the entry claimed, and the entry
        # does not hold up (gone, or damaged): git's diff decides after all.
        changes = _worktree_changes(repository, path)
        if changes is None:
            return None
    if found is None and read is not None and not _confirmed(repository, read, commit):
        return None
    if found is None:
        found = _extended(folder, commit, relative, top)
        if found is not None:
            table, blob = found
        else:
            if start is not None:
                return None  # git blame -L costs less than the whole file's blame
            if early is not None and not changes:
                blamed = early  # the working tree's blame is HEAD's: same lines, same owners
            elif rev is None and not changes:
                blamed = _IncrementalBlame(top, ["--", relative])  # cheaper than naming HEAD
            else:
                blamed = _IncrementalBlame(top, [commit, "--", relative])
            with blamed:
                table = blamed.table(f"{commit}:{relative}", described=not changes, prepare=prepare)
            if table is None:
                return None
            described, blob = blamed.described, blamed.blob
        if keep is None:
            blame_cache.store(folder, commit, relative, table, limit, blob)
        else:
            keep(lambda kept=table: blame_cache.store(folder, commit, relative, kept, limit, blob))
    if changes:
        hunks = _hunks(changes)
        if hunks is None:
            return None
        table = _applied(table, hunks, _not_committed(commit), relative)
        if table is None:
            return None
    return _answer(table, path, start, end, lines, described)


def _streamed_lookup(
    repository: str | os.PathLike[str],
    path: str,
    rev: str | None,
    blamed: _IncrementalBlame,
    prepare: "Callable[[dict], object] | None",
) -> dict[str, dict] | None:
    """`lookup` of a whole file without the cache, from BLAMED, the file's blame at REV
    (started, not yet read) and the reader beside it: two git processes, as the
    porcelain blame costs. None when it cannot answer exactly (the caller then runs the
    porcelain blame, which also gives any error its own words).

    The lines' text is not needed, but whether they are text is (a binary file is
    refused): the file's blob at REV (HEAD for the working tree) is probed for a NUL in
    its first 8000 bytes, as the porcelain path probes blame's lines, and must have as
    many lines as blame blamed. The blob holds the lines blame reads unless the working
    tree changed the file — then blame names the all-zero commit for changed lines, or
    covers fewer lines than the blob for deleted ones, and this gives way — or a
    textconv driver makes other lines of it (a binary blob gives way as well).
    """
    if os.path.isabs(path):
        path = os.path.relpath(path, os.path.abspath(repository))
    # `./`: the path from the directory git runs in, as blame takes it.
    blob = f"{'HEAD' if rev is None else rev}:./{os.path.normpath(path)}"
    with blamed:
        table = blamed.table(blob, texts=False, described=True, prepare=prepare)
    return None if table is None else _answer(table, path, None, None, None, blamed.described)


def _context(
    repository: str | os.PathLike[str], path: str, rev: str | None, *, read_head: bool = True
) -> tuple[str, str, str, str, list[str] | None, bytes, bytes, str | None] | None:
    """(common git dir, top of the working tree, PATH from there, the commit, None when git
    gave that commit id (else what was read from the files: [common git dir, git dir,
    top, prefix]), the
    `blame.*`/`mailmap.*`/`diff.*`/`obversa.*` configuration as `git config -z` lists it,
    the working tree's `-U0` diff of the file against the commit (for REV None; else
    empty), and the blob the working tree's file was shown to hold from git's index
    instead of running that diff (`early.proven`; else None)), from git processes run
    side by side; None when they fail or the file is not a regular file of the working
    tree (REV None) or a merge is in progress.

    For HEAD (REV None or "HEAD") and READ_HEAD, the directories and HEAD's commit are
    read from the files where `layout` can (no `rev-parse`: one process fewer); the
    configuration then also says whether they are where git would look (`moved_by`).
    For the working tree, `bin/git-obversa` may have started these very checks already
    (`early.start_checks`): they are taken over."""
    target = "HEAD" if rev is None else rev
    claimed = early_blame.claim_checks(repository, path) if read_head and rev is None else None
    proven = None
    try:
        if claimed is not None:  # started by the program's first lines: the same commands
            read, commit, waiting, proven = claimed
        else:
            read = layout.located(repository) if read_head and target == "HEAD" else None
            commit = None if read is None else layout.head_commit(read[1], read[0])
            if commit is None:
                waiting = git.started(early_blame.checks(path, rev), repository)
            elif rev is None:
                waiting, proven = early_blame.start_checks(repository, path, read, commit)
            else:
                waiting = git.started([early_blame.CONFIG], repository)
        answers = waiting()
    except git.GitError:
        return None
    given = commit is None  # then rev-parse gave the directories and the commit
    if given:
        read = _located_by_git(*answers.pop(0))
        if read is None:
            return None
        commit = read.pop()
    config_status, configured = answers[0]
    if config_status not in (0, 1):  # 1: no key matched
        return None
    if not given and layout.moved_by(configured):
        return _context(repository, path, rev, read_head=False)
    changes = b""
    if rev is None and proven is None:
        worktree_status, changes = answers[1]
        if worktree_status != 0:
            return None
    common_dir, git_dir, top, prefix = read
    relative = layout.relative(path, top, prefix)
    if relative is None:
        return None
    if rev is None:
        on_disk = os.path.join(top, relative)
        if not os.path.isfile(on_disk) or os.path.islink(on_disk):
            return None
        if os.path.exists(os.path.join(git_dir, "MERGE_HEAD")):
            return None  # blame of the working tree then has the merged heads as parents
    return (
        common_dir,
        top,
        relative,
        commit,
        None if given else read,
        configured,
        changes,
        proven,
    )


def _worktree_changes(repository: str | os.PathLike[str], path: str) -> bytes | None:
    """The working tree's diff of PATH against HEAD (`early.worktree_diff`), or None
    when git fails."""
    try:
        [(status, output)] = git.outputs([early_blame.worktree_diff(path)], repository)
    except git.GitError:
        return None
    return output if status == 0 else None


def _confirmed(repository: str | os.PathLike[str], read: list[str], commit: str) -> bool:
    """Whether git finds the repository where READ says and HEAD at COMMIT. The cache
    names its entries by commit ids git gave: a HEAD read from the files is asked of git
    before anything is computed and kept under it (a hit needs no asking: the entry's
    name was git's)."""
    try:
        [(status, output)] = git.outputs([early_blame.located_command("HEAD")], repository)
    except git.GitError:
        return False
    return _located_by_git(status, output) == [*read, commit]


def _located_by_git(status: int, output: bytes) -> list[str] | None:
    """[common git dir, git dir, top, prefix, commit] from `early.located_command`'s exit STATUS
    and OUTPUT, or None when it failed."""
    if status != 0:
        return None
    fields = output.decode("utf-8", "surrogateescape").split("\n")
    if len(fields) != 6:
        return None
    return fields[:5]


def _cache_limit(configured: bytes) -> int | None:
    """The cache's size limit from the configuration `git config -z --get-regexp`
    printed, or None when the configuration makes the cache unfit to answer."""
    limit = blame_cache.DEFAULT_LIMIT
    for record in configured.decode("utf-8", "replace").split("\0"):
        key, _, value = record.partition("\n")
        if key.startswith(_BYPASS_PREFIXES) or key == "diff.algorithm":
            return None
        if key.startswith("diff.") and key.endswith(".textconv"):
            return None
        if key == "obversa.blamecachesize":
            size = value.strip().lower()
            scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(size[-1:], 1)
            try:
                limit = int(size[:-1] if scale > 1 else size) * scale
            except ValueError:
                pass
    return limit


def _not_committed(commit: str) -> tuple:
    """The commit git blame credits with lines of the working tree that HEAD lacks."""
    now = time.time()
    offset = time.localtime(now).tm_gmtoff // 60
    zone = b"%s%02d%02d" % (b"-" if offset < 0 else b"+", abs(offset) // 60, abs(offset) % 60)
    date = _iso_date(b"%d" % int(now), zone)
    return ("0" * len(commit), "Not Committed Yet", "not.committed.yet", date) + (
        "Not committed yet",
        "",
        None,
    )


def _commit_fields(sha: str, author: str, email: str, date: str, message: str) -> tuple:
    """A commit's values in the order of COMMIT_KEYS, from its message."""
    subject, body = _subject_and_body(message)
    return (sha, author, email, date, subject, body, _reasoning(message))


def _reasoning(message: str) -> str | None:
    """`parse_reasoning`, its module imported on the first call (then it replaces this
    function): a lookup answered from the cache reads no message, and need not load it."""
    global _reasoning
    from git_obversa.record.message import parse_reasoning

    _reasoning = parse_reasoning
    return parse_reasoning(message)


def _extended(folder: str, commit: str, path: str, top: str) -> tuple[tuple, str | None] | None:
    """(PATH's blame at COMMIT, from the nearest cached blame of an ancestor along first
    parents, each commit in between applied by its diff; the id of PATH's blob at COMMIT,
    when known); None when there is none within CHAIN commits, or a commit in between is
    one blame does not simply pass through (a merge that changes the file, the file
    added, deleted or binary)."""
    held = blame_cache.names(folder)
    suffix = blame_cache.entry_name("", path)
    if not any(name.endswith(suffix) for name in held):
        return None  # no blame of this path is kept at any commit
    try:
        listed = git.run(
            ["rev-list", "--first-parent", "--parents", f"--max-count={CHAIN}", commit, "--"],
            top,
        ).stdout
    except git.GitError:
        return None
    chain = [row.split(" ") for row in listed.split("\n") if row]
    base: tuple[tuple, str | None] | None = None
    distance = 1
    while base is None:
        if distance >= len(chain):
            return None
        ancestor = chain[distance][0]
        if blame_cache.entry_name(ancestor, path) in held:
            base = blame_cache.load(folder, ancestor, path)
        distance += 1
    distance -= 1
    # Each commit against its first parent, oldest first; git prints only those that
    # change the file, with their author, date and message. (Given its parent on the
    # line, diff-tree takes it for the only one: merges are known from rev-list.)
    pairs = "".join(f"{row[0]} {row[1]}\n" for row in reversed(chain[:distance]))
    try:
        output = git.run(
            [
                "--literal-pathspecs",
                "diff-tree",
                "--stdin",
                *_DIFF,
                "--full-index",  # the blob each commit leaves, on its `index` line
                "--date=raw",
                "--format=%x00%x00%H%n%an%n%ae%n%ad%n%B%x00",
                "--",
                path,
            ],
            top,
            input=pairs.encode(),
        ).stdout
    except git.GitError:
        return None
    merges = {row[0] for row in chain[:distance] if len(row) > 2}
    table, blob = base
    for record in output.split(b"\0\0")[1:]:
        head, _, patch = record.partition(b"\0")
        fields = head.decode("utf-8", "replace").split("\n", 4)
        sha = fields[0]
        if len(fields) < 5 or sha in merges:
            return None  # a merge that changes the file: blame may credit either side
        seconds, _, zone = fields[3].encode().partition(b" ")
        hunks = _hunks(patch)
        if hunks is None:
            return None
        owner = _commit_fields(sha, fields[1], fields[2], _iso_date(seconds, zone), fields[4])
        table = _applied(table, hunks, owner, path)
        if table is None:
            return None
        blob = _new_blob(patch)
    return table, blob


def _new_blob(patch: bytes) -> str | None:
    """The id of the blob a `--full-index` PATCH of one file leaves (its `index OLD..NEW`
    line), or None when it names none."""
    at = patch.find(b"\nindex ")
    if at < 0:
        return None
    ids = patch[at + 7 : patch.find(b"\n", at + 1)].split(b" ")[0]
    _, dots, new = ids.partition(b"..")
    blob = new.decode("ascii", "replace")
    return blob if dots and len(blob) in (40, 64) and blob.strip("0123456789abcdef") == "" else None


def _hunks(patch: bytes) -> list[tuple[int, int, int, int, list[str]]] | None:
    """The hunks of a one-file `-U0` PATCH as (old start, old count, new start, new
    count, new lines' texts); None for a patch that is not a plain change of lines."""
    hunks: list[tuple[int, int, int, int, list[str]]] = []
    for row in patch.split(b"\n"):
        if row[:2] == b"@@":
            old, new = row.split(b" ", 3)[1:3]
            old_start, _, old_count = old[1:].partition(b",")
            new_start, _, new_count = new[1:].partition(b",")
            hunks.append(
                (
                    int(old_start),
                    int(old_count) if old_count else 1,
                    int(new_start),
                    int(new_count) if new_count else 1,
                    [],
                )
            )
        elif row[:1] == b"+" and hunks:
            text = row[1:-1] if row.endswith(b"\r") else row[1:]
            hunks[-1][4].append(text.decode("utf-8", "replace"))
        elif row.startswith((b"Binary files ", b"new file", b"deleted file", b"rename ")):
            return None
        elif row.startswith((b"copy ", b"similarity ", b"GIT binary patch")):
            return None
    return hunks


def _applied(table: tuple, hunks: list, owner: tuple, path: str) -> tuple | None:
    """TABLE carried through a commit whose diff of the file is HUNKS: lines outside the
    hunks keep their blame, lines a hunk adds belong to OWNER (a commit's 7 fields) under
    PATH. None when the hunks do not fit the table (it did not describe the parent)."""
    commits, owners, origins, sources, names, texts = table
    new_owners: list[int] = []
    new_origins: list[int] = []
    new_sources: list[int] = []
    new_texts: list[str] = []
    mine = len(commits)
    source = names.index(path) if path in names else len(names)
    at = 0  # lines of the old file consumed
    for old_start, old_count, new_start, new_count, added in hunks:
        old_first = old_start if old_count else old_start + 1
        new_first = new_start if new_count else new_start + 1
        keep = old_first - 1 - at
        if keep < 0 or len(new_owners) + keep != new_first - 1 or len(added) != new_count:
            return None
        new_owners += owners[at : at + keep]
        new_origins += origins[at : at + keep]
        new_sources += sources[at : at + keep]
        new_texts += texts[at : at + keep]
        at += keep + old_count
        if at > len(owners):
            return None
        new_owners += [mine] * new_count
        new_origins += range(new_first, new_first + new_count)
        new_sources += [source] * new_count
        new_texts += added
    new_owners += owners[at:]
    new_origins += origins[at:]
    new_sources += sources[at:]
    new_texts += texts[at:]
    # Keep only the commits and names that still own lines.
    used_commits = sorted(set(new_owners))
    used_names = sorted(set(new_sources))
    all_commits = [*commits, owner]
    all_names = [*names, path]
    commit_at = {old: new for new, old in enumerate(used_commits)}
    name_at = {old: new for new, old in enumerate(used_names)}
    return (
        [all_commits[index] for index in used_commits],
        [commit_at[index] for index in new_owners],
        new_origins,
        [name_at[index] for index in new_sources],
        [all_names[index] for index in used_names],
        new_texts,
    )


def _described(fields: tuple) -> dict:
    """A commit's dict as `lookup` gives it, from its 7 fields, its `ranges` and `paths`
    still empty."""
    sha, author, email, date, subject, body, reasoning = fields
    # COMMIT_KEYS written out: half the cost of dict(zip(COMMIT_KEYS, ...)).
    return {
        "commit": sha,
        "author": author,
        "email": email,
        "date": date,
        "subject": subject,
        "body": body,
        "reasoning": reasoning,
        "ranges": [],
        "paths": [],
    }


def _answer(
    table: tuple,
    path: str,
    start: int | None,
    end: int | None,
    lines: list[tuple[int, str, str]] | None,
    described: list[dict] | None = None,
) -> dict[str, dict]:
    """`lookup`'s result for lines START..END of the whole-file TABLE; DESCRIBED, when
    given, holds the dict of each of its commits (`_described`), made beforehand."""
    commits_of, owners, _, sources, names, texts = table
    total = len(owners)
    first = 1 if start is None else start
    if start is not None and first > total:
        raise BlameError(f"{path} has only {total} lines; line {start} is past the end")
    last = total if end is None else min(end, total)
    # Whole runs of lines at a time, found and grouped by C loops (zip, dict.fromkeys):
    # a whole file's answer is on the path of every `why`.
    span = owners[first - 1 : last]
    owning = dict.fromkeys(span)  # in the order of the first line each owns
    if described is None:
        by_owner = {owner: _described(commits_of[owner]) for owner in owning}
    else:
        by_owner = {owner: described[owner] for owner in owning}
    # Where the owner changes: the runs are maximal, so a commit's runs never touch.
    # (zip with the list shifted rather than itertools.pairwise: importing itertools costs
    # a fresh process more than these copies of a list of owners.)
    changes = [at for at, (a, b) in enumerate(zip(span, span[1:], strict=False), 1) if a != b]
    bounds = [0, *changes, len(span)] if span else []
    for begin, stop in zip(bounds, bounds[1:], strict=False):
        by_owner[span[begin]]["ranges"].append([first + begin, first + stop - 1])
    for owner, source in dict.fromkeys(zip(span, sources[first - 1 : last], strict=True)):
        by_owner[owner]["paths"].append(names[source])
    commits = {commit["commit"]: commit for commit in by_owner.values()}
    if lines is not None:
        lines += [
            (number, commits_of[owners[number - 1]][0], texts[number - 1])
            for number in range(first, last + 1)
        ]
    return commits
