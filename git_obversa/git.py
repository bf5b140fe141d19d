"""Running the `git` command: the one place that spawns it.

Most callers (hooks, isolated stages, blame lookup) run git inside the caller's Git
context and keep the environment as it is: a hook must see the `GIT_INDEX_FILE` of the
commit in progress. Memory storage passes `isolated=True`, which drops every `GIT_*`
variable and disables hooks, so nothing in the caller's environment can redirect it.
"""

from __future__ import annotations

import os

# pathlib and subprocess cost milliseconds to import; `git obversa why` answered from the
# blame cache needs neither (it spawns with `outputs`), nor does the commit hook, so they
# are imported where used (collections.abc too: only annotations name it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator, Sequence
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
    import subprocess

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
    import subprocess

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


def outputs(
    commands: Sequence[Sequence[str]], cwd: str | os.PathLike[str] | None = None
) -> list[tuple[int, bytes]]:
    """Run the `git` COMMANDS side by side in CWD, stdin and stderr on the null device:
    (exit status, stdout) of each, in order. Spawned with `os.posix_spawnp` where the
    system has it, so a caller that needs nothing else never imports `subprocess` (tens
    of milliseconds of a short-lived process's start). Raises GitError if git cannot
    start."""
    if not hasattr(os, "posix_spawnp"):
        results = []
        for process in [start(args, cwd) for args in commands]:
            stdout, _ = process.communicate()
            results.append((process.returncode, stdout))
        return results
    prefix = ["git"] if cwd is None else ["git", "-C", os.fspath(cwd)]
    started: list[tuple[int, int]] = []
    try:
        for args in commands:
            read, write = os.pipe()  # not inherited: only the dup2 below reaches the child
            started.append((-1, read))
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ]
            try:
                pid = os.posix_spawnp("git", [*prefix, *args], os.environ, file_actions=actions)
            finally:
                os.close(write)
            started[-1] = (pid, read)
    except OSError as error:
        for pid, read in started:
            os.close(read)
            if pid > 0:
                os.waitpid(pid, 0)
        raise GitError(commands[len(started) - 1], 127, f"git could not start: {error}") from None
    results = []
    for pid, read in started:
        chunks = []
        with open(read, "rb", buffering=0) as pipe:  # closes READ
            while chunk := pipe.read(1 << 16):
                chunks.append(chunk)
        results.append((os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), b"".join(chunks)))
    return results


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
