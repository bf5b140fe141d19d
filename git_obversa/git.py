"""Running the `git` command: the one place that spawns it.

Most callers (hooks, isolated stages, blame lookup) run git inside the caller's Git
context and keep the environment as it is: a hook must see the `GIT_INDEX_FILE` of the
commit in progress. Memory storage passes `isolated=True`, which drops every `GIT_*`
variable and disables hooks, so nothing in the caller's environment can redirect it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence

# pathlib costs milliseconds to import; only git_path needs it (`git obversa why` does not).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO


class GitError(Exception):
    """git exited non-zero (or could not start)."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.args_ = list(args)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(_reason(stderr) or f"git {args[0]} exited {returncode}")


def _reason(stderr: str) -> str:
    """The line of git's stderr that says what failed: the first `fatal:`/`error:` line
    (hints that follow it, like "remove the file manually", say what to do, not why)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal: ", "error: ")):
            return line
    return lines[-1] if lines else ""


def isolated_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env["GIT_NO_LAZY_FETCH"] = "1"
    return env


def run(
    args: Sequence[str],
    cwd: str | os.PathLike[str] | None = None,
    *,
    input: str | bytes | None = None,
    check: bool = True,
    isolated: bool = False,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run `git ARGS` and return the completed process (text mode unless input is bytes)."""
    command = ["git"]
    if isolated:
        command += ["-c", "core.hooksPath=/dev/null"]
    command += list(args)
    if env is None:
        env = isolated_environment() if isolated else None
    try:
        completed = subprocess.run(
            command,
            cwd=cwd,
            input=input,
            capture_output=True,
            text=not isinstance(input, bytes),
            env=env,
            timeout=timeout,
        )
    except OSError as error:
        raise GitError(args, 127, f"git could not start: {error}") from error
    if check and completed.returncode != 0:
        stderr = completed.stderr
        if isinstance(stderr, bytes):
            stderr = stderr.decode("utf-8", "replace")
        raise GitError(args, completed.returncode, stderr)
    return completed


def start(
    args: Sequence[str],
    cwd: str | os.PathLike[str] | None = None,
    *,
    stdin: bool = False,
    stdout: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start `git ARGS` without waiting: stderr piped (bytes), stdout piped or written to
    the file STDOUT, stdin piped when STDIN is true (else empty), in ENV (default: this
    process's). The caller reads, waits, and checks the exit status."""
    try:
        return subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError as error:
        raise GitError(args, 127, f"git could not start: {error}") from error


def output(args: Sequence[str], cwd: str | os.PathLike[str] | None = None, **kwargs) -> str:
    """stdout of `git ARGS` without the final newline."""
    return run(args, cwd, **kwargs).stdout.rstrip("\n")


def git_path(name: str, cwd: str | os.PathLike[str] | None = None) -> Path:
    """`git rev-parse --git-path NAME` as an absolute path (per-worktree where Git says so)."""
    from pathlib import Path

    return Path(output(["rev-parse", "--path-format=absolute", "--git-path", name], cwd))


def batch_records(output: bytes) -> Iterator[tuple[list[bytes], bytes]]:
    """The records of `git cat-file --batch` output, in request order: (header fields,
    content). A header is `<oid> <type> <size>`; an object git cannot find has a header
    alone (`<name> missing`) and empty content."""
    position = 0
    while position < len(output):
        newline = output.index(b"\n", position)
        fields = output[position:newline].split()
        if len(fields) != 3:
            yield fields, b""
            position = newline + 1
            continue
        size = int(fields[2])
        yield fields, output[newline + 1 : newline + 1 + size]
        position = newline + 1 + size + 1  # the content is followed by a newline
