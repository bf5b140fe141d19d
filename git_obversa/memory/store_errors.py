"""How the Git store fails, and how it tells the user what is not an error.

Every failure of storage is a `StoreError` (a `MemoryFailure` with code UNSAFE_STORAGE or
STORAGE_ERROR, a message, no path or details): the memory port turns it into an error
result. `notify` says what the user should know that is not an error (a stale lock
cleared, a history that starts again).
"""

import errno
import sys

from git_obversa.memory.port import MemoryFailure


def notify(message: str) -> None:
    """Say something the user should know that is not an error (a stale lock cleared).
    Programs embedding the library may replace this function."""
    sys.stderr.write(f"git-obversa: {message}\n")


class StoreError(MemoryFailure):
    """Storage failed: code UNSAFE_STORAGE or STORAGE_ERROR, a message, no path or details."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class MissingObject(StoreError):
    """An object is not in the repository (possibly only for a moment, during gc)."""

    def __init__(self, oid: str, message: str = "Memory blob cannot be read.") -> None:
        super().__init__("UNSAFE_STORAGE", message)
        self.oid = oid


def storage_failure(error: OSError, otherwise: StoreError) -> StoreError:
    """A full disk or quota says so in one line; other OS errors become OTHERWISE."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StoreError(
            "STORAGE_ERROR",
            "No space left on the disk holding the repository (or a quota or file-size "
            "limit reached); free some and retry.",
        )
    return otherwise


def write_failure(kind: str, error: OSError | None = None) -> StoreError:
    """The error for an object of KIND that could not be stored (SPEC §3.3 wording)."""
    what = "tree" if kind == "tree" else "blob"
    why = f" ({error.strerror})" if error is not None and error.strerror else ""
    return StoreError("STORAGE_ERROR", f"Git could not write a memory {what}.{why}")


def stale_lock_message(lock: str) -> str:
    return (
        f"Memory storage is locked by {lock}; if no git or git-obversa process is still "
        "running, remove that file and retry."
    )
