"""Running the `git` command: the one place that spawns it.

Most callers (hooks, isolated stages, blame lookup) run git inside the caller's Git
context and keep the environment as it is: a hook must see the `GIT_INDEX_FILE` of the
commit in progress. Memory storage passes `isolated=True`, which drops every `GIT_*`
variable and disables hooks, so nothing in the caller's environment can redirect it.
"""

import os

# pathlib and subprocess are imported where used: `git obversa why` answered from the
# blame cache needs neither (it spawns with `outputs`), nor does the commit hook.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path
    from typing import IO


class GitError(Exception):
    """git exited non-zero (or could not start)."""

    def __init__(self, args: "Sequence[str]", returncode: int, stderr: str) -> None:
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


# GIT_* variables that change nothing `git config` reads or where it finds the
# repository: GIT_EXEC_PATH, which git sets for every command it dispatches (`git obversa`
# included), and ones of transports, editors, pagers and identities. Any other (a
# `git -c` of the caller, GIT_DIR, GIT_CONFIG_GLOBAL, ...) may.
CONFIG_NEUTRAL = {"GIT_EXEC_PATH", "GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "GIT_SSH"}
CONFIG_NEUTRAL |= {"GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER"}
CONFIG_NEUTRAL |= {
    f"GIT_{who}_{what}" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL", "DATE")
}


def config_isolated_as_here() -> bool:
    """Whether `git config` run isolated reads the very values it reads run in this
    process's environment: no GIT_* variable here but neutral ones (`CONFIG_NEUTRAL`,
    and GIT_SSL_*), so one isolated process can answer for both."""
    return all(
        key in CONFIG_NEUTRAL or key.startswith("GIT_SSL_")
        for key in os.environ
        if key.startswith("GIT_")
    )


def run(
    args: "Sequence[str]",
    cwd: str | os.PathLike[str] | None = None,
    *,
    input: str | bytes | None = None,
    check: bool = True,
    isolated: bool = False,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> "subprocess.CompletedProcess":
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
    args: "Sequence[str]",
    cwd: str | os.PathLike[str] | None = None,
    *,
    stdin: bool = False,
    stdout: "IO[bytes] | None" = None,
    env: dict[str, str] | None = None,
) -> "subprocess.Popen":
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


def spawn(
    args: "Sequence[str]",
    cwd: str | os.PathLike[str] | None = None,
    *,
    stdin: bool = False,
    stdout: int | None = None,
    stderr: bool = False,
    env: dict[str, str] | None = None,
) -> tuple[int, int, int, int]:
    """Start `git ARGS` in CWD without waiting, and without `subprocess` (POSIX
    `os.posix_spawnp`): (pid, the write end of its stdin, the read end of its stdout,
    the read end of its stderr). Its stdin is the null device unless STDIN (else -1 is
    given for it); its stdout goes to the file descriptor STDOUT when given (then -1);
    its stderr to the null device (the caller judges by the exit status) unless STDERR
    (else -1). In ENV (default: this process's). The caller closes the ends it got and
    reaps the process (`os.waitpid`). Raises GitError if git cannot start."""
    prefix = ["git"] if cwd is None else ["git", "-C", os.fspath(cwd)]
    ours: list[int] = []  # the parent's ends: the pipes' other ends go to the child
    theirs: list[int] = []
    actions: list[tuple] = []

    def pipe(descriptor: int) -> None:
        """A pipe for the child's DESCRIPTOR: the child gets one end, we keep the other."""
        read, write = os.pipe()
        child, parent = (read, write) if descriptor == 0 else (write, read)
        ours.append(parent)
        theirs.append(child)
        actions.append((os.POSIX_SPAWN_DUP2, child, descriptor))

    try:
        if stdin:
            pipe(0)
        else:
            actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
        if stdout is None:
            pipe(1)
        else:
            actions.append((os.POSIX_SPAWN_DUP2, stdout, 1))
        if stderr:
            pipe(2)
        else:
            actions.append((os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0))
        pid = os.posix_spawnp(
            "git", [*prefix, *args], os.environ if env is None else env, file_actions=actions
        )
    except OSError as error:
        _close(*ours)
        raise GitError(args, 127, f"git could not start: {error}") from None
    finally:
        _close(*theirs)
    ends = iter(ours)
    given = next(ends) if stdin else -1
    printed = -1 if stdout is not None else next(ends)
    return pid, given, printed, next(ends) if stderr else -1


def outputs(
    commands: "Sequence[Sequence[str]]",
    cwd: str | os.PathLike[str] | None = None,
    *,
    isolated: bool = False,
    cap: int | None = None,
) -> list[tuple[int, bytes]]:
    """Run the `git` COMMANDS side by side in CWD, stdin and stderr on the null device:
    (exit status, stdout) of each, in order. Spawned with `os.posix_spawnp` where the
    system has it, so a caller that needs nothing else never imports `subprocess`.
    ISOLATED as for `run`. With CAP,
    stderr is counted too and a command whose stdout and stderr together exceed CAP bytes
    raises OutputTooLarge (every command is stopped; no more than CAP is held). Raises
    GitError if git cannot start."""
    return started(commands, cwd, isolated=isolated, cap=cap)()


def started(
    commands: "Sequence[Sequence[str]]",
    cwd: str | os.PathLike[str] | None = None,
    *,
    isolated: bool = False,
    cap: int | None = None,
) -> "Callable[[], list[tuple[int, bytes]]]":
    """Start the `git` COMMANDS as `outputs` runs them and return at once: calling the
    result waits for them and returns what `outputs` would. A caller that needs their
    answer only later (a one-shot command, while it imports the modules that will use
    it) works side by side with them meanwhile. Raises GitError if git cannot start."""
    env = isolated_environment() if isolated else dict(os.environ)
    hooks = ["-c", "core.hooksPath=/dev/null"] if isolated else []
    if not hasattr(os, "posix_spawnp"):
        results = []
        for process in [start([*hooks, *args], cwd, env=env) for args in commands]:
            stdout, stderr = process.communicate()
            if cap is not None and len(stdout) + len(stderr) > cap:
                raise OutputTooLarge(commands[len(results)], cap)
            results.append((process.returncode, stdout))
        return lambda: results
    running: list[tuple[int, int, int]] = []  # (pid, stdout pipe, stderr pipe or -1)
    try:
        for args in commands:
            pid, _, read, errors = spawn([*hooks, *args], cwd, stderr=cap is not None, env=env)
            running.append((pid, read, errors))
    except GitError as error:
        for pid, read, errors in running:
            _close(read, errors)
            os.waitpid(pid, 0)
        raise GitError(commands[len(running)], 127, error.stderr) from None
    if cap is not None:
        return lambda: _capped(commands, running, cap)
    return lambda: _collected(running)


def _collected(running: list[tuple[int, int, int]]) -> list[tuple[int, bytes]]:
    results = []
    for pid, read, _ in running:
        chunks = []
        with open(read, "rb", buffering=0) as pipe:  # closes READ
            while chunk := pipe.read(1 << 16):
                chunks.append(chunk)
        results.append((os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), b"".join(chunks)))
    return results


class OutputTooLarge(GitError):
    """A git command printed more than its caller's cap."""

    def __init__(self, args: "Sequence[str]", cap: int) -> None:
        super().__init__(args, -1, f"git {args[0]} printed more than {cap} bytes")


def _close(*descriptors: int) -> None:
    for descriptor in descriptors:
        if descriptor >= 0:
            os.close(descriptor)


def _capped(
    commands: "Sequence[Sequence[str]]", started: list[tuple[int, int, int]], cap: int
) -> list[tuple[int, bytes]]:
    """Read the stdout and stderr of every started command at once (no pipe fills and
    stalls its writer); stop them all when one prints more than CAP bytes."""
    import select

    poller = select.poll()
    owner: dict[int, int] = {}
    for index, (_, read, errors) in enumerate(started):
        for descriptor in (read, errors):
            poller.register(descriptor, select.POLLIN)
            owner[descriptor] = index
    stdout: list[list[bytes]] = [[] for _ in started]
    printed = [0] * len(started)
    flooded = None
    while owner and flooded is None:
        for descriptor, _ in poller.poll():
            index = owner[descriptor]
            data = os.read(descriptor, 1 << 16)
            if not data:
                poller.unregister(descriptor)
                del owner[descriptor]
                os.close(descriptor)
                continue
            printed[index] += len(data)
            if descriptor == started[index][1]:
                stdout[index].append(data)
            if printed[index] > cap:
                flooded = index
                break
    for descriptor in owner:
        os.close(descriptor)
    statuses = []
    for pid, _, _ in started:
        if flooded is not None:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        statuses.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    if flooded is not None:
        raise OutputTooLarge(commands[flooded], cap)
    return [(status, b"".join(chunks)) for status, chunks in zip(statuses, stdout, strict=True)]


def output(args: "Sequence[str]", cwd: str | os.PathLike[str] | None = None, **kwargs) -> str:
    """stdout of `git ARGS` without the final newline."""
    return run(args, cwd, **kwargs).stdout.rstrip("\n")


def git_path(name: str, cwd: str | os.PathLike[str] | None = None) -> "Path":
    """`git rev-parse --git-path NAME` as an absolute path (per-worktree where Git says so)."""
    from pathlib import Path

    return Path(output(["rev-parse", "--path-format=absolute", "--git-path", name], cwd))


def batch_records(output: bytes) -> "Iterator[tuple[list[bytes], bytes]]":
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
