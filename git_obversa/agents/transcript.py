"""Reading an agent's transcript once: a cursor per transcript and the ids already taken.

Agent hooks run after every response and before every committing tool call, on transcripts
that grow to tens of megabytes. `transcript_tail` hands over only the complete lines written
since the last run. The cursor is a byte offset plus a digest of the bytes just before it: if
the file is now shorter, or those bytes changed (the agent rewrote the file), the cursor is
no longer trusted and the whole file is read again (`Tail.recovered`). Recovery is safe
because of the second half, `SeenIds`: every entry an agent module takes is remembered by
its id, so replays (resumed sessions, compaction, a new file embedding old history) add
nothing.

Nothing here knows any agent: the modules in `agents/` parse the lines and choose the keys.
The files live in a directory the caller names, one per agent (under the turn store):
    lock             flock()ed around a whole read, so concurrent hooks never take a line twice
    cursors/KEY.json one per transcript: {"transcript", "offset", "lines", "check", "state",
                     "reported"}
    seen.ids         one key per line, appended; loaded only when an entry could be a replay
    seen.mark        the newest timestamp among the keys in seen.ids
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

# How many bytes before the cursor must be unchanged for the cursor to be trusted.
CHECK_BYTES = 256
# Malformed lines remembered as reported (so a recovery re-read does not report them again).
REPORTED_LIMIT = 256


class UnreadableTranscript(Exception):
    """The transcript cannot be read (missing, a directory, no permission)."""


class TailLine:
    """One complete line: its 1-based number in the file, its bytes, and its JSON value
    (None when the line is not JSON), parsed when first asked for — a reader may pass
    over lines it can tell from their bytes it does not need (large tool results)."""

    __slots__ = ("number", "raw", "_tail", "_value")
    _UNPARSED = object()

    def __init__(self, number: int, raw: bytes, tail: Tail) -> None:
        self.number, self.raw, self._tail, self._value = number, raw, tail, self._UNPARSED

    @property
    def value(self) -> object:
        if self._value is self._UNPARSED:
            try:
                self._value = json.loads(self.raw)
            except ValueError:  # JSONDecodeError and UnicodeDecodeError
                self._value = None
                self._tail._malformed_line(self)
        return self._value


class SeenIds:
    """Keys of entries already taken, across every transcript of one agent."""

    def __init__(self, directory: Path) -> None:
        self._ids_file = directory / "seen.ids"
        self._mark_file = directory / "seen.mark"
        self._loaded: set[str] | None = None
        self._added: dict[str, None] = {}  # in order, to append them as they came
        try:
            self._mark = self._mark_file.read_text(encoding="utf-8").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            self._mark = ""
        self._new_mark = self._mark

    def _keys(self) -> set[str]:
        if self._loaded is None:
            try:
                raw = self._ids_file.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                raw = ""
            self._loaded = set(raw.splitlines())
        return self._loaded

    def has(self, key: str, stamp: str | None = None) -> bool:
        """Whether KEY was taken before. An entry stamped later than every key taken so far
        cannot be a replay, so the id file is not even read for it."""
        if isinstance(stamp, str) and self._mark and stamp > self._mark:
            return key in self._added
        return key in self._keys() or key in self._added

    def add(self, key: str, stamp: str | None = None) -> None:
        if "\n" in key or "\r" in key:
            raise ValueError("a seen-id key must be one line")
        self._added[key] = None
        if self._loaded is not None:
            self._loaded.add(key)
        if isinstance(stamp, str) and stamp > self._new_mark:
            self._new_mark = stamp

    def _save(self) -> None:
        if self._added:
            with open(self._ids_file, "a", encoding="utf-8") as handle:
                handle.write("".join(key + "\n" for key in self._added))
        if self._new_mark != self._mark:
            _replace(self._mark_file, self._new_mark)


class Tail:
    """What `transcript_tail` hands over; see the module docstring. `malformed` lists the
    numbers of the malformed lines met (parsed) so far that were not reported before."""

    def __init__(
        self,
        transcript: Path,
        lines: list[TailLine],
        recovered: bool,
        malformed: list[int],
        state: dict,
        seen: SeenIds,
        reported: list[str],
    ) -> None:
        self.transcript, self.lines, self.recovered = transcript, lines, recovered
        self.malformed, self.state, self.seen, self.reported = malformed, state, seen, reported

    def _malformed_line(self, line: TailLine) -> None:
        digest = _digest(line.raw)
        if digest not in self.reported:
            self.malformed.append(line.number)
            self.reported.append(digest)


def _cursor_path(directory: Path, transcript: Path) -> Path:
    key = hashlib.sha256(os.fsencode(transcript)).hexdigest()[:24]
    return directory / "cursors" / f"{key}.json"


def _load_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _read_new(handle, cursor: dict) -> tuple[bytes, bytes, int, int, bool]:
    """(the checked bytes before the trusted offset, the bytes from it to EOF, the offset,
    the lines before it, whether the cursor was lost and the whole file is read)."""
    offset, lines, check = cursor.get("offset"), cursor.get("lines"), cursor.get("check")
    size = os.fstat(handle.fileno()).st_size
    if (
        isinstance(offset, int)
        and isinstance(lines, int)
        and isinstance(check, str)
        and 0 < offset <= size
    ):
        start = max(0, offset - CHECK_BYTES)
        handle.seek(start)
        before = handle.read(offset - start)
        if _digest(before) == check:
            return before, handle.read(), offset, lines, False
    handle.seek(0)
    return b"", handle.read(), 0, 0, bool(cursor.get("offset"))


def read_offset(directory: str | os.PathLike[str], transcript: str | os.PathLike[str]) -> int:
    """How far TRANSCRIPT was read (its cursor's byte offset; 0 when never read). Taken
    without the lock: a hint for a caller waiting for new bytes, not a cursor."""
    transcript = Path(os.path.abspath(transcript))
    offset = _load_json(_cursor_path(Path(directory), transcript)).get("offset")
    return offset if isinstance(offset, int) and offset > 0 else 0


@contextlib.contextmanager
def transcript_tail(
    directory: str | os.PathLike[str], transcript: str | os.PathLike[str]
) -> Iterator[Tail]:
    """The lines of TRANSCRIPT not taken before, under DIRECTORY's lock.

    When the block ends without an exception, the cursor moves past the lines handed over
    and the keys added to `tail.seen` are kept; if it raises, nothing is written and the
    next run sees the same lines. Raises UnreadableTranscript when the file cannot be read.
    """
    directory = Path(directory)
    transcript = Path(os.path.abspath(transcript))
    cursor_file = _cursor_path(directory, transcript)
    cursor_file.parent.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cursor = _load_json(cursor_file)
        try:
            with open(transcript, "rb") as handle:
                before, data, offset, number, recovered = _read_new(handle, cursor)
        except OSError as error:
            raise UnreadableTranscript(
                f"cannot read the transcript {transcript}: {error.strerror or error}"
            ) from error
        end = data.rfind(b"\n") + 1  # a last line without its newline is still being written
        reported = [item for item in cursor.get("reported", []) if isinstance(item, str)]
        state = cursor.get("state")
        tail = Tail(
            transcript=transcript,
            lines=[],
            recovered=recovered,
            malformed=[],
            state=dict(state) if isinstance(state, dict) else {},  # compared when saved
            seen=SeenIds(directory),
            reported=reported,
        )
        for raw in data[:end].split(b"\n")[:-1]:
            number += 1
            if raw.strip():
                tail.lines.append(TailLine(number, raw, tail))
        yield tail
        tail.seen._save()
        updated = {
            "transcript": str(transcript),
            "offset": offset + end,
            "lines": number,
            # The bytes the next run must find unchanged before its offset.
            "check": _digest((before + data[:end])[-CHECK_BYTES:]),
            "state": tail.state,
            "reported": tail.reported[-REPORTED_LIMIT:],
        }
        if updated != cursor:
            _replace(cursor_file, json.dumps(updated, ensure_ascii=False))
