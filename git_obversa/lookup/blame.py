"""Blame lookup engine: from lines of a file to the commits that wrote them, as plain data.

A lookup costs two git processes whatever the history looks like: one
`git blame --porcelain` for the lines and one `git cat-file --batch` that reads every
commit blame named. The reader starts together with blame, so its start-up overlaps
blame's work.

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

from __future__ import annotations

import codecs
import os
import time

from git_obversa import git
from git_obversa.lookup import cache as blame_cache
from git_obversa.record.message import LEGACY_WHY_HEADING, WHY_HEADING, parse_reasoning

TYPE_CHECKING = False  # typing costs a `git obversa why` process milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Sequence
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
) -> dict[str, dict]:
    """The commits owning lines START..END of PATH at REV, sha -> commit dict, in the
    order of the first line each owns. With LINES, each line also goes into it as
    (number, sha, text), the text without its end of line (and without a CR before it).

    With CACHE (and neither MOVES nor COPIES), the blame cache answers when it can (see
    `_cached_lookup`): the same result, from a blame kept on disk.

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
        found = _cached_lookup(repository, path, start, end, rev, lines)
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
    paths: Sequence[str] = (),
    rev: str = "HEAD",
    limit: int | None = None,
) -> list[dict]:
    """Commits reachable from REV (touching PATHS, if given) whose message records
    reasoning, newest first, at most LIMIT of them. One `git log` process."""
    if rev.startswith("-"):
        raise BlameError(f"{rev!r} is not a revision")
    import re  # here, as in _blame_failure: a lookup from the cache needs no `re`

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


def _filename(quoted: bytes) -> str:
    """A file name as blame's porcelain writes it (C-quoted when it holds unusual bytes)."""
    if len(quoted) > 1 and quoted[:1] == b'"' and quoted[-1:] == b'"':
        quoted = codecs.escape_decode(quoted[1:-1])[0]
    return quoted.decode("utf-8", "replace")


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
_DIFF = ["-p", "-U0", "--inter-hunk-context=0", "--no-color", "--no-ext-diff", "--no-renames"]


def _cached_lookup(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    end: int | None,
    rev: str | None,
    lines: list[tuple[int, str, str]] | None,
) -> dict[str, dict] | None:
    """`lookup` answered from the blame cache, or None when the cache cannot answer (the
    caller then runs git blame, which also gives any error its own words).

    The cache holds whole-file blames at commits. A lookup at a commit reads the entry for
    it; failing that, it extends the nearest cached blame along first parents (up to
    CHAIN commits back) by each commit's diff of the file, as blame itself passes lines
    to a parent; failing that, a lookup of the whole file runs `git blame --porcelain`
    once and keeps the result (a range leaves it to `git blame -L`, which costs less).
    REV None (the working tree) is the blame at HEAD with the working tree's diff
    against HEAD laid on top as lines not committed yet. Merges that
    change the file, renames and copies between the cached commit and this one, binary
    files, and configuration that changes what blame answers (ignored revisions,
    mailmap, textconv, diff.algorithm) all go to git blame.
    """
    target = "HEAD" if rev is None else rev
    commands = [
        [
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
            "--git-dir",
            "--show-toplevel",
            "--show-prefix",
            f"{target}^{{commit}}",
        ],
        ["config", "-z", "--get-regexp", r"^(blame|mailmap|diff|obversa)\."],
    ]
    if rev is None:
        commands.append(["--literal-pathspecs", "diff-index", *_DIFF, "HEAD", "--", path])
    try:
        answers = git.outputs(commands, repository)
    except git.GitError:
        return None
    (status, located), (_, configured) = answers[:2]
    changes = b""
    if rev is None:
        worktree_status, changes = answers[2]
        if worktree_status != 0:
            return None
    if status != 0:
        return None
    fields = located.decode("utf-8", "surrogateescape").split("\n")
    if len(fields) != 6:
        return None
    common_dir, git_dir, top, prefix, commit, _ = fields
    limit = _cache_limit(configured)
    if limit is None:
        return None
    if os.path.isabs(path):
        relative = os.path.relpath(path, top)
    else:
        relative = os.path.normpath(os.path.join(prefix, path))
    relative = relative.replace(os.sep, "/")
    if relative == "." or relative.startswith("../") or relative == "..":
        return None
    if os.path.lexists(os.path.join(top, ".mailmap")):
        return None
    if rev is None:
        on_disk = os.path.join(top, relative)
        if not os.path.isfile(on_disk) or os.path.islink(on_disk):
            return None
        if os.path.exists(os.path.join(git_dir, "MERGE_HEAD")):
            return None  # blame of the working tree then has the merged heads as parents
    folder = blame_cache.directory(common_dir)
    table = blame_cache.load(folder, commit, relative)
    if table is None:
        table = _extended(folder, commit, relative, top)
        if table is None:
            if start is not None:
                return None  # git blame -L costs less than the whole file's blame
            clean = rev is None and not changes
            table = _blamed(top, commit, relative, clean)
            if table is None:
                return None
        if not _uncommitted(table):
            blame_cache.store(folder, commit, relative, table, limit)
    if rev is None and changes:
        hunks = _hunks(changes)
        if hunks is None:
            return None
        table = _applied(table, hunks, _not_committed(commit), relative)
        if table is None:
            return None
    return _answer(table, path, start, end, lines)


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


def _uncommitted(table: tuple) -> bool:
    return any(not sha.strip("0") for sha, *_ in table[0])


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


def _blamed(
    cwd: str | os.PathLike[str], commit: str, path: str, working_tree: bool
) -> tuple | None:
    """PATH's whole blame at COMMIT from one `git blame --porcelain` (of the working tree
    when WORKING_TREE: it is then the same as HEAD's, and cheaper for git to compute)."""
    args = ["blame", "--porcelain"] + ([] if working_tree else [commit]) + ["--", path]
    try:
        blame = git.start(args, cwd)
        reader = _CommitReader(cwd)
    except git.GitError:
        return None
    try:
        output, _ = blame.communicate()
        rows = output.split(b"\n")
        if blame.returncode != 0 or (b"\0" in output and _is_binary(rows)):
            reader.finish()
            return None
        reader.request(_named_commits(output))
        found, table = _parse_table(rows)
    except BaseException:
        reader.finish()
        raise
    try:
        messages = reader.messages()
    except BlameError:
        return None
    commits = table[0]
    for index, sha in enumerate(commits):
        author, mail, seconds, zone = found[sha]
        message = messages.get(sha, "Not committed yet\n")
        commits[index] = _commit_fields(
            sha,
            author.decode("utf-8", "replace"),
            mail.decode("utf-8", "replace").strip("<>"),
            _iso_date(seconds, zone),
            message,
        )
    return table


def _commit_fields(sha: str, author: str, email: str, date: str, message: str) -> tuple:
    """A commit's values in the order of COMMIT_KEYS, from its message."""
    subject, body = _subject_and_body(message)
    return (sha, author, email, date, subject, body, parse_reasoning(message))


def _parse_table(rows: list[bytes]) -> tuple[dict[str, tuple[bytes, ...]], tuple]:
    """(author fields per commit, the table) from whole-file porcelain ROWS; the table's
    commits are bare shas, for the caller to fill in."""
    found: dict[str, tuple[bytes, ...]] = {}
    index_of: dict[bytes, int] = {}
    commits: list = []
    source_of: dict[bytes, int] = {}  # sha -> the name its latest group gave
    name_index: dict[str, int] = {}
    owners: list[int] = []
    origins: list[int] = []
    sources: list[int] = []
    names: list[str] = []
    texts: list[str] = []
    index = 0
    last = len(rows) - 1
    while index < last:
        sha_field, origin_field, _, count_field = rows[index].split(b" ")
        count = int(count_field)
        origin = int(origin_field)
        index += 1
        if rows[index][0] != 9:
            end = index + 1
            while rows[end][0] != 9:
                end += 1
            if sha_field not in index_of:
                sha = sha_field.decode()
                index_of[sha_field] = len(commits)
                commits.append(sha)
                found[sha] = _author_fields(rows[index:end])
            name = rows[end - 1]
            if name[:9] == b"filename ":
                text = _filename(name[9:])
                if text not in name_index:
                    name_index[text] = len(names)
                    names.append(text)
                source_of[sha_field] = name_index[text]
            index = end
        owners += [index_of[sha_field]] * count
        origins += range(origin, origin + count)
        sources += [source_of[sha_field]] * count
        for row in rows[index : index + 2 * count - 1 : 2]:
            text = row[1:-1] if row.endswith(b"\r") else row[1:]
            texts.append(text.decode("utf-8", "replace"))
        index += 2 * count - 1
    return found, (commits, owners, origins, sources, names, texts)


def _extended(folder: str, commit: str, path: str, top: str) -> tuple | None:
    """PATH's blame at COMMIT from the nearest cached blame of an ancestor along first
    parents, each commit in between applied by its diff; None when there is none within
    CHAIN commits, or a commit in between is one blame does not simply pass through (a
    merge that changes the file, the file added, deleted or binary)."""
    held = blame_cache.names(folder)
    if not held:
        return None
    try:
        listed = git.run(
            ["rev-list", "--first-parent", "--parents", f"--max-count={CHAIN}", commit, "--"],
            top,
        ).stdout
    except git.GitError:
        return None
    chain = [row.split(" ") for row in listed.split("\n") if row]
    base, distance = None, 1
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
    table = base
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
    return table


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


def _answer(
    table: tuple,
    path: str,
    start: int | None,
    end: int | None,
    lines: list[tuple[int, str, str]] | None,
) -> dict[str, dict]:
    """`lookup`'s result for lines START..END of the whole-file TABLE."""
    commits_of, owners, _, sources, names, texts = table
    total = len(owners)
    first = 1 if start is None else start
    if start is not None and first > total:
        raise BlameError(f"{path} has only {total} lines; line {start} is past the end")
    last = total if end is None else min(end, total)
    commits: dict[str, dict] = {}
    by_owner: dict[int, dict] = {}
    for number in range(first, last + 1):
        owner = owners[number - 1]
        commit = by_owner.get(owner)
        if commit is None:
            fields = commits_of[owner]
            commit = dict(zip(COMMIT_KEYS, fields, strict=True), ranges=[], paths=[])
            by_owner[owner] = commits[fields[0]] = commit
        ranges = commit["ranges"]
        if ranges and ranges[-1][1] == number - 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
        name = names[sources[number - 1]]
        if name not in commit["paths"]:
            commit["paths"].append(name)
    if lines is not None:
        lines += [
            (number, commits_of[owners[number - 1]][0], texts[number - 1])
            for number in range(first, last + 1)
        ]
    return commits
