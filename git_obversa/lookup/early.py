"""`git blame` of a whole file started from the program's first lines.

A `git obversa why FILE` whose blame is not kept waits for one `git blame`, and every
millisecond before blame starts is added to it: Python's start, then the imports of the
CLI and the lookup engine. `bin/git-obversa` calls `start` before those imports, for the
plain `why FILE` (nothing else on its line), so blame starts as soon as Python runs; the
lookup takes the running process over (`claim`) when it gets to the point where it would
have started it. Nothing here is more than a guess made from the file system: blame is
started only when the cache directory plainly holds nothing for FILE, and a lookup that
turns out not to need it stops it.

Imports only what a `why` imports anyway (`os`, and modules that import nothing heavier):
what it costs a lookup that does not start blame is a directory listing.
"""

from __future__ import annotations

import os

from git_obversa import git
from git_obversa.lookup import cache, layout

# The blame `start` left running: (directory it runs in, FILE as given, pid, the read
# end of its output); None once claimed.
_started: tuple[str, str, int, int] | None = None


def start(words: list[str]) -> None:
    """Start the blame of FILE when WORDS (the program's arguments) are `why FILE` and the
    cache plainly holds nothing for FILE; otherwise do nothing."""
    global _started
    if len(words) != 2 or words[0] != "why" or _started is not None:
        return
    path = words[1]
    # An option, or PATH:LINE (which the CLI reads as a range): the CLI's to read.
    if path[:1] in ("", "-") or ":" in path:
        return
    if not nothing_cached(".", path):
        return
    try:
        pid, output = spawn_blame(".", ["--", path])
    except git.GitError:
        return  # the lookup will say what is wrong
    _started = (os.getcwd(), path, pid, output)


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
    False (no guess) wherever `layout.located` cannot read the repository. A wrong guess
    costs time, never an answer."""
    read = layout.located(repository)
    if read is None:
        return False
    common_dir, _, top, prefix = read
    relative = layout.relative(path, top, prefix)
    if relative is None:
        return False
    suffix = cache.entry_name("", relative)
    return not any(name.endswith(suffix) for name in cache.names(cache.directory(common_dir)))
