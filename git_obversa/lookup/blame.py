"""Blame lookup engine: from lines of a file to the commits that wrote them, as plain data.

Without the blame cache, a lookup costs one `git blame` whatever the history looks
like, and one `git cat-file --batch` beside it that reads every commit blame names
(`git_blame.py`, loaded only then). The blame cache (below) answers most lookups without
running blame at all.

`git obversa why`, `blame` and `log` call this module directly, in a fresh Python process
each time, so it imports only the standard modules it needs (not dataclasses, datetime,
pathlib, typing or re: only a failure's wording and `reasoned_commits` use `re`, which
the CLI gets from argparse anyway) and returns plain dicts, lists and tuples; bench/why.py
compares the command with plain `git blame`.
`git_obversa.lookup.why` turns the same data into the
dataclasses of the Python API.

A commit is a dict with the keys `commit, author, email, date, subject, body,
reasoning` (the values `git obversa log --json` prints), plus `ranges` (1-based
inclusive `[first, last]` line ranges, ascending) and `paths` (the file's names in that
commit) for a commit blame found (what `git obversa why --json` prints).
"""

import os
import time

from git_obversa.lookup import (
    COMMIT_KEYS,
    BlameError,
    commit_dict,
    commit_fields,
    head_start,
    iso_date,
)
from git_obversa.lookup import cache as blame_cache
from git_obversa.repo import git, location, refs

TYPE_CHECKING = False  # `typing` and friends only for type checkers
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from git_obversa.lookup import git_blame


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
    origins: list[tuple[int, str, str, int]] | None = None,
) -> dict[str, dict]:
    """The commits owning lines START..END of PATH at REV, sha -> commit dict, in the
    order of the first line each owns. With LINES, each line also goes into it as
    (number, sha, text), the text without its end of line (and without a CR before it).
    With ORIGINS, each line goes into it as (number, sha, the file's path in that commit,
    the line's number there): where the commit's own records (its notes) place the line.

    PREPARE, when given, is called with a commit's dict (`ranges` and `paths` still
    empty; it must not change it) as soon as a whole file's blame run afresh has read
    the commit's message, while blame still runs: a caller lays out there what it will
    print of the commit, on the core blame leaves free. Not every commit answered need
    have been given to it.

    With CACHE (and neither MOVES nor COPIES), the blame cache answers when it can (see
    `_cached_lookup`): the same result, from a blame kept on disk. KEEP, when given, is
    handed the keeping of a blame computed afresh (a function of no arguments) rather
    than this doing it before it answers: a caller that can do it once its output is out
    (the CLI does).

    REV None blames the file in the working tree, as plain `git blame PATH` does (lines
    not committed yet belong to the all-zero commit). PATH is relative to REPOSITORY (or
    absolute). END past the end of the file stops at its last line; END None with START
    given reads to the end. MOVES and COPIES are `git blame -M` and `-C` (COPIES = how
    many times -C is given, 0 to 3). Git's own configuration applies,
    `blame.ignoreRevsFile` included. Raises BlameError when the lines cannot be blamed,
    ValueError for a range that is no range.
    """
    args = _blame_arguments(path, start, end, rev, moves, copies)
    cached = cache and not moves and not copies
    if cached:
        found = _cached_lookup(repository, path, start, end, rev, lines, prepare, keep, origins)
        if found is not None:
            return found
    # git blame run afresh: a lookup the cache answers never loads that module.
    from git_obversa.lookup import git_blame

    if not cached and start is None and end is None and lines is None:
        blamed = git_blame.IncrementalBlame(repository, args[2:])  # args: the porcelain's
        found = _streamed_lookup(repository, path, rev, blamed, prepare, origins)
        if found is not None:
            return found
    return git_blame.porcelain_lookup(repository, path, start, rev, args, lines, origins)


def lines_in_commits(
    repository: str | os.PathLike[str],
    path: str,
    commits: "Sequence[dict]",
    rev: str | None = "HEAD",
    *,
    moves: bool = False,
    copies: int = 0,
) -> dict[str, list[list[int]]]:
    """For each of COMMITS (`lookup`'s dicts for PATH at REV) in which the file had
    another path: the [first, last] ranges its lines had in that commit. Today's numbers
    next to the old name would point at other lines there. One `git blame --porcelain`
    (an -L per range) when some commit had another path, none otherwise."""
    asked = os.path.normpath(path)
    renamed = [
        commit
        for commit in commits
        if not any(asked.endswith(name) or name.endswith(asked) for name in commit["paths"])
    ]
    if not renamed:
        return {}
    args = _blame_arguments(asked, None, None, rev, moves, copies)
    for first, last in (line for commit in renamed for line in commit["ranges"]):
        args[2:2] = ["-L", f"{first},{last}"]
    try:
        output = git.run(args, repository, input=b"").stdout
    except git.GitError as error:
        raise BlameError(str(error).removeprefix("fatal: ")) from None
    then: dict[int, int] = {}
    for row in output.split(b"\n"):
        fields = row.split(b" ")
        # A line's header: <sha> <line in the commit> <line now> [<lines in the group>].
        if row[:1] != b"\t" and len(fields) in (3, 4) and len(fields[0]) >= 40:
            then[int(fields[2])] = int(fields[1])
    found: dict[str, list[list[int]]] = {}
    for commit in renamed:
        runs: list[list[int]] = []
        for first, last in commit["ranges"]:
            for number in (then[n] for n in range(first, last + 1) if n in then):
                if runs and runs[-1][1] == number - 1:
                    runs[-1][1] = number
                else:
                    runs.append([number, number])
        if runs:
            found[commit["commit"]] = runs
    return found


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
        fields = commit_fields(sha, author, email, date, message)
        if fields[-1] is not None:
            commits.append(dict(zip(COMMIT_KEYS, fields, strict=True)))
    return commits


def _blame_arguments(
    path: str, start: int | None, end: int | None, rev: str | None, moves: bool, copies: int
) -> list[str]:
    """`git blame --porcelain` of PATH, lines START..END, at REV, with -M and -C as
    asked: its arguments (checked first, whether the cache answers or not)."""
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
_DIFF = head_start.DIFF


def _cached_lookup(
    repository: str | os.PathLike[str],
    path: str,
    start: int | None,
    end: int | None,
    rev: str | None,
    lines: list[tuple[int, str, str]] | None,
    prepare: "Callable[[dict], object] | None" = None,
    keep: "Callable[[Callable[[], object]], object] | None" = None,
    origins: list[tuple[int, str, str, int]] | None = None,
) -> dict[str, dict] | None:
    """`lookup` answered from the blame cache, or None when the cache cannot answer (the
    caller then runs git blame, which also gives any error its own words).

    The cache holds whole-file blames at commits. A lookup at a commit reads the entry for
    it; failing that, it extends the nearest cached blame along first parents (up to
    CHAIN commits back) by each commit's diff of the file, as blame itself passes lines
    to a parent; failing that, a lookup of the whole file runs `git blame` once (see
    `IncrementalBlame`) and keeps the result (a range leaves it to `git blame -L`,
    which costs less). REV None (the working tree) is the blame at HEAD with the working
    tree's diff against HEAD laid on top as lines not committed yet. Merges that change
    the file, renames and copies between the cached commit and this one, binary files,
    and configuration that changes what blame answers (ignored revisions, mailmap,
    textconv, diff.algorithm) all go to git blame.

    A whole-file lookup of the working tree for which the cache directory visibly holds
    nothing starts `git blame` of the working tree before anything else (or takes over
    the one `bin/git-obversa` started, see `head_start`): blame is what it will wait for, and
    the checks then run beside it. A clean working tree's blame is HEAD's, which the
    cache keeps; where the cache cannot answer (configuration that bypasses it, a merge
    in progress), that blame answers as without the cache; otherwise it is stopped,
    unused.
    """
    early = None
    if rev is None and start is None and end is None:
        started = head_start.claim(repository, path)
        if started is not None or head_start.nothing_cached(repository, path):
            from git_obversa.lookup import git_blame

            early = git_blame.IncrementalBlame(repository, ["--", path], started)
    try:
        found = _from_cache(repository, path, start, end, rev, lines, early, prepare, keep, origins)
        if found is None and early is not None and not early.read and lines is None:
            found = _streamed_lookup(repository, path, rev, early, prepare, origins)
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
    early: "git_blame.IncrementalBlame | None",
    prepare: "Callable[[dict], object] | None",
    keep: "Callable[[Callable[[], object]], object] | None" = None,
    origins: list[tuple[int, str, str, int]] | None = None,
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
            from git_obversa.lookup import git_blame

            if early is not None and not changes:
                blamed = early  # the working tree's blame is HEAD's: same lines, same owners
            elif rev is None and not changes:
                # Unchanged: the working tree's blame is HEAD's, found without naming it.
                blamed = git_blame.IncrementalBlame(top, ["--", relative])
            else:
                blamed = git_blame.IncrementalBlame(top, [commit, "--", relative])
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
    return _answer(table, path, start, end, lines, described, origins)


def _streamed_lookup(
    repository: str | os.PathLike[str],
    path: str,
    rev: str | None,
    blamed: "git_blame.IncrementalBlame",
    prepare: "Callable[[dict], object] | None",
    origins: list[tuple[int, str, str, int]] | None = None,
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
    if table is None:
        return None
    return _answer(table, path, None, None, None, blamed.described, origins)


def _context(
    repository: str | os.PathLike[str], path: str, rev: str | None, *, read_head: bool = True
) -> tuple[str, str, str, str, list[str] | None, bytes, bytes, str | None] | None:
    """(common git dir, top of the working tree, PATH from there, the commit, None when git
    gave that commit id (else what was read from the files: [common git dir, git dir,
    top, prefix]), the
    `blame.*`/`mailmap.*`/`diff.*`/`obversa.*` configuration as `git config -z` lists it,
    the working tree's `-U0` diff of the file against the commit (for REV None; else
    empty), and the blob the working tree's file was shown to hold from git's index
    instead of running that diff (`head_start.proven`; else None)), from git processes run
    side by side; None when they fail or the file is not a regular file of the working
    tree (REV None) or a merge is in progress.

    For HEAD (REV None or "HEAD") and READ_HEAD, the directories and HEAD's commit are
    read from the files where `repo.location` can (no `rev-parse`: one process fewer); the
    configuration then also says whether they are where git would look (`moved_by`).
    For the working tree, `bin/git-obversa` may have started these very checks already
    (`head_start.start_checks`): they are taken over."""
    target = "HEAD" if rev is None else rev
    claimed = head_start.claim_checks(repository, path) if read_head and rev is None else None
    proven = None
    try:
        if claimed is not None:  # started by the program's first lines: the same commands
            read, commit, waiting, proven = claimed
        else:
            read = location.located(repository) if read_head and target == "HEAD" else None
            commit = None if read is None else refs.head_commit(read[1], read[0])
            if commit is None:
                waiting = git.started(head_start.checks(path, rev), repository)
            elif rev is None:
                waiting, proven = head_start.start_checks(repository, path, read, commit)
            else:
                waiting = git.started([head_start.CONFIG], repository)
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
    if not given and location.moved_by(configured):
        return _context(repository, path, rev, read_head=False)
    changes = b""
    if rev is None and proven is None:
        worktree_status, changes = answers[1]
        if worktree_status != 0:
            return None
    common_dir, git_dir, top, prefix = read
    relative = location.relative(path, top, prefix)
    if relative is None:
        return None
    if rev is None:
        on_disk = os.path.join(top, relative)
        if not os.path.isfile(on_disk) or os.path.islink(on_disk):
            return None
        if refs.merging(git_dir):
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
    """The working tree's diff of PATH against HEAD (`head_start.worktree_diff`), or None
    when git fails."""
    try:
        [(status, output)] = git.outputs([head_start.worktree_diff(path)], repository)
    except git.GitError:
        return None
    return output if status == 0 else None


def _confirmed(repository: str | os.PathLike[str], read: list[str], commit: str) -> bool:
    """Whether git finds the repository where READ says and HEAD at COMMIT. The cache
    names its entries by commit ids git gave: a HEAD read from the files is asked of git
    before anything is computed and kept under it (a hit needs no asking: the entry's
    name was git's)."""
    try:
        [(status, output)] = git.outputs([head_start.located_command("HEAD")], repository)
    except git.GitError:
        return False
    return _located_by_git(status, output) == [*read, commit]


def _located_by_git(status: int, output: bytes) -> list[str] | None:
    """[common git dir, git dir, top, prefix, commit] from `head_start.located_command`'s
    exit STATUS and OUTPUT, or None when it failed."""
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
    date = iso_date(b"%d" % int(now), zone)
    return ("0" * len(commit), "Not Committed Yet", "not.committed.yet", date) + (
        "Not committed yet",
        "",
        None,
    )


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
        owner = commit_fields(sha, fields[1], fields[2], iso_date(seconds, zone), fields[4])
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


def _answer(
    table: tuple,
    path: str,
    start: int | None,
    end: int | None,
    lines: list[tuple[int, str, str]] | None,
    described: list[dict] | None = None,
    origins: list[tuple[int, str, str, int]] | None = None,
) -> dict[str, dict]:
    """`lookup`'s result for lines START..END of the whole-file TABLE; DESCRIBED, when
    given, holds the dict of each of its commits (`commit_dict`), made beforehand; LINES
    and ORIGINS as `lookup` fills them."""
    commits_of, owners, numbers_then, sources, names, texts = table
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
        by_owner = {owner: commit_dict(commits_of[owner]) for owner in owning}
    else:
        by_owner = {owner: described[owner] for owner in owning}
    # Where the owner changes: the runs are maximal, so a commit's runs never touch.
    # (zip with the list shifted, not itertools.pairwise: a warm `why` loads no itertools,
    # see tests/test_cli_start.py.)
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
    if origins is not None:
        origins += [
            (number, commits_of[owners[at]][0], names[sources[at]], numbers_then[at])
            for at, number in enumerate(range(first, last + 1), first - 1)
        ]
    return commits
