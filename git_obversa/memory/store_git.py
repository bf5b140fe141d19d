"""The Git store's git processes: isolated, capped, and the two questions that locate it.

`locate` asks git where the repository's common directory is, which object format it
uses and what its config says (two git processes, side by side); `start_locating` asks
them ahead, so that git answers while the rest of a one-shot command loads.
"""

import os

from git_obversa.memory.store_errors import StoreError
from git_obversa.repo import git

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

OUTPUT_CAP = 1048576  # bytes of stdout+stderr any git process may print (SPEC §3.4)
GIT_TIMEOUT = 600.0


def run_git(
    args: "Sequence[str]", cwd: str, *, input: bytes | None = None, cap: int = OUTPUT_CAP
) -> "subprocess.CompletedProcess":
    """Run isolated git (no GIT_* from the caller, no hooks, no lazy fetch) with an output cap."""
    import subprocess

    try:
        completed = git.run(
            args, cwd, input=input if input is not None else b"", check=False,
            isolated=True, timeout=GIT_TIMEOUT,
        )  # fmt: skip
    except git.GitError as error:
        raise StoreError("STORAGE_ERROR", "Git could not start.") from error
    except subprocess.TimeoutExpired as error:
        raise StoreError("STORAGE_ERROR", "Git did not finish in time.") from error
    if len(completed.stdout) + len(completed.stderr) > cap:
        raise StoreError("UNSAFE_STORAGE", "Git output exceeded the memory storage limit.")
    return completed


CONFIG_KEYS = (
    r"^(core\.(repositoryformatversion|fsync|fsyncmethod|fsyncobjectfiles)|extensions\..*)$"
)
# Extensions the in-process store understands; any other sends a repository to git.
KNOWN_EXTENSIONS = {"extensions.objectformat", "extensions.worktreeconfig"}


# The two questions `locate` asks git, side by side.
LOCATE_COMMANDS = [
    ["rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format=storage"],
    ["config", "-z", "--get-regexp", CONFIG_KEYS],
]
# `locate`'s questions asked ahead (`start_locating`), or None.
_asked: "_Asked | None" = None


def start_locating(repository_path: str, key: str | None = None) -> "Callable[[], str] | None":
    """Ask git `locate`'s questions about REPOSITORY_PATH ahead; the next `locate` in this
    process takes the answers. A one-shot command asks before it imports the CLI and the
    engine, so that git answers meanwhile. The first question is asked at once, the
    second when this is called again for the same path (the CLI does, once it is
    imported) or when the answers are needed: two git processes started back to back
    slow each other (the second waits until the first is under way).

    With KEY (a config key of letters and dots, as `obversa.scope`), its value is asked
    in the same `git config` process when that reads what `git config --get KEY` reads
    in REPOSITORY_PATH run with this process's environment (`git.config_isolated_as_here`):
    one git process fewer. The function returned then waits for it and gives what that
    command prints, but its final newline ("" when KEY is unset). Else None: the caller
    asks itself."""
    global _asked
    where = os.path.abspath(repository_path)
    if _asked is not None and _asked.where == where and not _asked.answered:
        _asked.ask_next()
        return _asked.value if key is not None and _asked.key == key else None
    if _asked is not None:  # another path's, or answers an earlier command left unused
        try:
            _asked.answers()  # reaped, not used
        except git.GitError:
            pass
        _asked = None
    merged = key is not None and git.config_isolated_as_here()
    commands = LOCATE_COMMANDS
    if merged:
        assert key is not None
        pattern = CONFIG_KEYS[:-2] + "|" + key.replace(".", r"\.") + ")$"
        commands = [LOCATE_COMMANDS[0], ["config", "-z", "--get-regexp", pattern]]
    try:
        asked = _Asked(where, repository_path, commands, key if merged else None)
    except git.GitError:
        return None  # `locate` asks again, and says what is wrong
    _asked = asked
    return asked.value if merged else None


class _Asked:
    """`locate`'s questions asked ahead, one git process at a time (`start_locating`)."""

    def __init__(self, where: str, cwd: str, commands: list[list[str]], key: str | None):
        self.where, self.key = where, key
        self._cwd, self._commands = cwd, commands
        self._running: list[Callable[[], list[tuple[int, bytes]]]] = []
        self._failed: git.GitError | None = None  # a question that could not be asked
        self._answers: list[tuple[int, bytes]] | git.GitError | None = None
        self.ask_next()
        if self._failed is not None:
            raise self._failed

    @property
    def answered(self) -> bool:
        """Whether the answers have been waited for (they may be stale now)."""
        return self._answers is not None

    def ask_next(self) -> None:
        """Start the next question, if one is left."""
        asked = len(self._running)
        if asked == len(self._commands) or self._failed is not None:
            return
        try:
            command = self._commands[asked : asked + 1]
            self._running.append(git.started(command, self._cwd, isolated=True, cap=OUTPUT_CAP))
        except git.GitError as error:
            self._failed = error

    def answers(self) -> list[tuple[int, bytes]]:
        """What `git.outputs` gives for the questions (waited for once; every process is
        reaped, whatever fails): GitError if one could not start or printed too much."""
        while len(self._running) < len(self._commands) and self._failed is None:
            self.ask_next()
        if self._answers is None:
            answers: list[tuple[int, bytes]] = []
            failure = self._failed
            for running in self._running:
                try:
                    answers += running()
                except git.GitError as error:
                    failure = failure or error
            self._answers = failure or answers
        if isinstance(self._answers, git.GitError):
            raise self._answers
        return self._answers

    def value(self) -> str:
        """KEY's value, as `git config --get KEY` prints it but its final newline."""
        assert self.key is not None
        try:
            _, (_, listed) = self.answers()
        except git.GitError:  # asked alone, as ever (`locate` says what went wrong)
            [(_, printed)] = git.outputs([["config", "--get", self.key]], self._cwd)
            return printed.decode("utf-8", "replace").removesuffix("\n")
        found = b""
        for item in listed.split(b"\0"):
            name, _, text = item.partition(b"\n")
            if name == self.key.encode():  # the last value wins, as `--get` prints it
                found = text
        return found.decode("utf-8", "replace")


def locate(repository_path: str) -> tuple[str, str, dict[str, str | None]]:
    """(absolute common git dir, object format, the config keys the store obeys) of the
    repository containing REPOSITORY_PATH. The two git processes run side by side; the
    config is what git itself sees there (system, global, repository, includes)."""
    global _asked
    asked, _asked = _asked, None
    extra = None
    try:
        if asked is not None and asked.where == os.path.abspath(repository_path):
            answers, extra = asked.answers(), asked.key
        else:
            if asked is not None:
                try:
                    asked.answers()  # another repository's: reaped, not used
                except git.GitError:
                    pass
            answers = git.outputs(LOCATE_COMMANDS, repository_path, isolated=True, cap=OUTPUT_CAP)
        (status, located), (_, configured) = answers
    except git.OutputTooLarge as error:
        message = "Git output exceeded the memory storage limit."
        raise StoreError("UNSAFE_STORAGE", message) from error
    except git.GitError as error:
        raise StoreError("STORAGE_ERROR", "Git could not start.") from error
    if status != 0:
        raise StoreError(
            "STORAGE_ERROR", f"repositoryPath must identify a Git repository: {repository_path}"
        )
    lines = located.decode("utf-8", "replace").splitlines()
    if len(lines) != 2:
        raise StoreError("STORAGE_ERROR", "Git did not report its object format")
    common_dir, object_format = lines
    if object_format not in ("sha1", "sha256"):
        raise StoreError("STORAGE_ERROR", f"unsupported Git object format: {object_format}")
    config: dict[str, str | None] = {}
    for item in configured.split(b"\0"):
        if item:  # "key\nvalue", or "key" alone for a key without "= value"
            key, newline, value = item.decode("utf-8", "replace").partition("\n")
            if key != extra:  # the caller's key, asked along (`start_locating`)
                config[key] = value if newline else None
    return common_dir, object_format, config
