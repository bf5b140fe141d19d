"""Blame lookups git computes afresh: `git blame`, its output read, the commits' messages.

What `blame.py` runs when the blame cache cannot answer (a miss, `--no-cache`, `-M`/`-C`,
a range that misses). Without the cache, a lookup costs one `git blame` whatever the
history looks like, and one `git cat-file --batch` beside it that reads every commit
blame names. A whole file's blame is read as git computes it (`IncrementalBlame`):
messages are read and parsed while blame still runs, on the other core. A range, or
lines with their text, come from `git blame --porcelain` (`porcelain_lookup`), its
reader started together with it.

A module of its own, imported only when git blame runs: a lookup answered from the cache
(every warm `git obversa why`) need not load its code.
"""

import codecs
import os

from git_obversa.lookup import (
    COMMIT_KEYS,
    BlameError,
    commit_dict,
    commit_fields,
    head_start,
    iso_date,
)
from git_obversa.repo import git

TYPE_CHECKING = False  # `typing` and friends only for type checkers
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

# Git's own binary test: a NUL byte among the first 8000 bytes.
BINARY_PROBE_BYTES = 8000


def porcelain_lookup(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    rev: str | None,
    args: list[str],
    lines: list[tuple[int, str, str]] | None,
    origins: list[tuple[int, str, str, int]] | None = None,
) -> dict[str, dict]:
    """`blame.lookup` of PATH by `git blame ARGS` (`--porcelain`, START the range's first
    line, REV the revision, as given there), its commits read beside it; LINES and
    ORIGINS as `blame.lookup` fills them."""
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
        found, owned, paths = _parse_porcelain(rows, lines, origins)
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
        fields = commit_fields(
            sha,
            author.decode("utf-8", "replace"),
            mail.decode("utf-8", "replace").strip("<>"),
            iso_date(seconds, zone),
            message,
        )
        commits[sha] = dict(
            zip(COMMIT_KEYS, fields, strict=True), ranges=owned[sha], paths=paths[sha]
        )
    return commits


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
    rows: list[bytes],
    lines: list[tuple[int, str, str]] | None,
    origins: list[tuple[int, str, str, int]] | None = None,
) -> tuple[dict[str, tuple[bytes, ...]], dict[str, list[list[int]]], dict[str, list[str]]]:
    """Per commit: (author, author-mail, author-time, author-tz), the line ranges owned
    (ascending, adjacent ones joined) and the file's names. Lines go into LINES and
    ORIGINS (as `blame.lookup` fills them) unless they are None.

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
    where = ""  # the file's name in the group's commit (git gives it with every group)
    while index < last:
        sha_field, then_field, first_field, count_field = rows[index].split(b" ")
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
                where = name
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
        if origins is not None:
            then = int(then_field) - first
            origins += [(number, sha, where, number + then) for number in range(first, final + 1)]
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


def _filename(quoted: bytes) -> str:
    """A file name as blame's porcelain writes it (C-quoted when it holds unusual bytes)."""
    if len(quoted) > 1 and quoted[:1] == b'"' and quoted[-1:] == b'"':
        quoted = codecs.escape_decode(quoted[1:-1])[0]
    return quoted.decode("utf-8", "replace")


class IncrementalBlame:
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
        output: `head_start.claim`)."""
        self._running: list[int] = []
        self._descriptors: list[int] = []
        self._output = _unnamed_file()
        try:
            pid, self._rows_from = started or head_start.spawn_blame(cwd, args)
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

    def __enter__(self) -> "IncrementalBlame":
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
            self.described = [commit_dict(fields) if fields else None for fields in self._commits]
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
            fields = self._commits[place] = commit_fields(
                sha.decode(),
                author.decode("utf-8", "replace"),
                mail.decode("utf-8", "replace").strip("<>"),
                iso_date(seconds, zone),
                _commit_message(content),
            )
            if self.described is not None:
                made = self.described[place] = commit_dict(fields)
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
