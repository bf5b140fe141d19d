"""What a `git obversa why FILE` starts from the program's first lines.

A `why FILE` whose blame is not kept waits for one `git blame`, and whatever runs before
blame starts is added to that wait: Python's start, then the imports of the CLI and the
lookup engine. One whose blame is kept waits for the git processes that prove the cache
may answer (`start_checks`: `git config`, and `git diff-index` unless git's index shows
the file unchanged, `proven`). `bin/git-obversa` calls `start` before those imports, for the
plain `why FILE` (nothing else on its line), so either starts as soon as Python runs and
works while the modules load; the lookup takes the running processes over (`claim`,
`claim_checks`) where it would have started them. Nothing here is more than a guess
made from the file system: blame is started only when the cache directory plainly holds
nothing for FILE, and a lookup that turns out not to need it stops it; the checks are
the very ones the lookup would run.

Imports only what a `why` imports anyway (`os`, and modules that import nothing heavier):
what it costs a lookup that does not start blame is a directory listing.
"""

import os

from git_obversa.lookup import cache
from git_obversa.repo import git, location, refs
from git_obversa.repo.index import index_holds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# The diff blame itself makes between two versions of a file: whole lines, no context.
DIFF = ["-p", "-U0", "--inter-hunk-context=0", "--no-color", "--no-ext-diff", "--no-renames"]
# The configuration a lookup from the cache depends on (see blame's `_cache_limit`), and
# what places the repository elsewhere than `repo.location` reads it (`location.moved_by`).
CONFIG = [
    "config",
    "-z",
    "--get-regexp",
    r"^(blame|mailmap|diff|obversa)\.|^core\.(worktree|bare)$|^extensions\.refstorage$",
]

# The blame `start` left running: (directory it runs in, FILE as given, pid, the read
# end of its output); None once claimed.
_started: tuple[str, str, int, int] | None = None
# The checks `start` left running: (directory, FILE, `location.located`'s answer, HEAD's
# commit read, the function that waits for their outputs, the blob proven); None once
# claimed.
_checking: tuple | None = None


def checks(path: str, rev: str | None) -> list[list[str]]:
    """The git commands whose outputs tell whether the blame cache can answer a lookup of
    PATH at REV (blame's `_context` reads them) when nothing was read from the files:
    rev-parse, the configuration, and for the working tree (REV None) its diff of the
    file against HEAD (`worktree_diff`)."""
    commands = [located_command("HEAD" if rev is None else rev), CONFIG]
    if rev is None:
        commands.append(worktree_diff(path))
    return commands


def worktree_diff(path: str) -> list[str]:
    """The working tree's diff of PATH against HEAD, as blame's own diff."""
    return ["--literal-pathspecs", "diff-index", *DIFF, "HEAD", "--", path]


def start_checks(
    directory: str | os.PathLike[str], path: str, read: tuple[str, str, str, str], commit: str
) -> "tuple[Callable[[], list[tuple[int, bytes]]], str | None]":
    """Start the checks of a lookup of the working tree's PATH from the cache in
    DIRECTORY, the repository READ from the files (`location.located`) and HEAD's COMMIT:
    the configuration, and the file's diff against HEAD unless git's index shows the file
    holds the blob the cache entry of PATH at COMMIT records (`proven`). (A function that
    waits for their outputs, in that order; the blob proven, or None.) Raises GitError if
    git cannot start."""
    configured = git.started([CONFIG], directory)
    blob = proven(read, path, commit)
    if blob is not None:
        return configured, blob
    try:
        diffed = git.started([worktree_diff(path)], directory)
    except git.GitError:
        configured()
        raise
    return (lambda: configured() + diffed()), None


def proven(read: tuple[str, str, str, str], path: str, commit: str) -> str | None:
    """The blob the cache entry of PATH at COMMIT records, when git's index shows the
    working tree's file holds it (so its diff against COMMIT is empty: `index_holds`),
    the repository as READ; else None. The entry's claim is verified when it is loaded."""
    common_dir, git_dir, top, prefix = read
    relative = location.relative(path, top, prefix)
    if relative is None:
        return None
    blob = cache.recorded_blob(cache.directory(common_dir), commit, relative)
    return blob if blob is not None and index_holds(git_dir, top, relative, blob) else None


def located_command(target: str) -> list[str]:
    """rev-parse of the directories, the prefix and TARGET's commit."""
    return [
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
        "--git-dir",
        "--show-toplevel",
        "--show-prefix",
        f"{target}^{{commit}}",
    ]


def start(words: list[str]) -> None:
    """When WORDS (the program's arguments) are `why FILE`: start the blame of FILE if
    the cache plainly holds nothing for it, else the checks of a lookup from the cache;
    otherwise, or where the repository cannot be read from the files, do nothing."""
    global _started, _checking
    if len(words) != 2 or words[0] != "why" or _started or _checking:
        return
    path = words[1]
    # An option, or PATH:LINE (which the CLI reads as a range): the CLI's to read.
    if path[:1] in ("", "-") or ":" in path:
        return
    read = location.located(".")
    if read is None:
        return
    try:
        if _nothing_kept(read, path):
            pid, output = spawn_blame(".", ["--", path])
            _started = (os.getcwd(), path, pid, output)
            return
        commit = refs.head_commit(read[1], read[0])
        if commit is not None:
            waiter, blob = start_checks(".", path, read, commit)
            _checking = (os.getcwd(), path, read, commit, waiter, blob)
    except git.GitError:
        return  # the lookup will say what is wrong


def claim(repository: str | os.PathLike[str], path: str) -> tuple[int, int] | None:
    """(pid, output) of the blame of the working tree's PATH that `start` left running
    in REPOSITORY, now the caller's to read and reap; None when there is none."""
    global _started
    if _started is None:
        return None
    directory, started_path, pid, output = _started
    if started_path != path or os.path.abspath(repository) != directory:
        return None
    _started = None
    return pid, output


def claim_checks(
    repository: str | os.PathLike[str], path: str
) -> "tuple[tuple, str, Callable[[], list[tuple[int, bytes]]], str | None] | None":
    """(`location.located`'s answer, HEAD's commit read, and what `start_checks` gave: the
    function that waits for the outputs of the checks, the blob proven) that `start` left
    running in REPOSITORY, now the caller's; None when there are none."""
    global _checking
    if _checking is None:
        return None
    directory, started_path, read, commit, waiter, blob = _checking
    if started_path != path or os.path.abspath(repository) != directory:
        return None
    _checking = None
    return read, commit, waiter, blob


def spawn_blame(cwd: str | os.PathLike[str], args: list[str]) -> tuple[int, int]:
    """Start `git blame --incremental ARGS` in CWD: (pid, the read end of its output).
    Raises GitError if git cannot start."""
    # GIT_FLUSH=0: blame's output in full buffers rather than a write per group, so the
    # reader wakes up a hundred times rather than two thousand.
    pid, _, output, _ = git.spawn(
        ["blame", "--incremental", *args], cwd, env={**os.environ, "GIT_FLUSH": "0"}
    )
    return pid, output


def nothing_cached(repository: str | os.PathLike[str], path: str) -> bool:
    """Whether the blame cache plainly holds no entry for PATH (so a lookup of it will
    run git blame). A guess from the file system alone, made before asking git anything:
    False (no guess) wherever `location.located` cannot read the repository. A wrong guess
    costs time, never an answer."""
    if (
        _checking is not None
        and _checking[1] == path
        and _checking[0] == os.path.abspath(repository)
    ):
        return False  # `start` found PATH's blame kept, and started the cache's checks
    read = location.located(repository)
    return read is not None and _nothing_kept(read, path)


def _nothing_kept(read: tuple[str, str, str, str], path: str) -> bool:
    """`nothing_cached`, given what `location.located` READ."""
    common_dir, _, top, prefix = read
    relative = location.relative(path, top, prefix)
    if relative is None:
        return False
    suffix = cache.entry_name("", relative)
    return not any(name.endswith(suffix) for name in cache.names(cache.directory(common_dir)))
