"""The blame cache: whole-file blames kept on disk, keyed by (commit, path).

A line's blame at a commit never changes, so what `git blame` computed once can be kept.
An entry is one file's blame at one commit, as a table (see `Table` in blame.py): the
commits that own lines (with their author, date, subject, body and reasoning), and for
each line its owner, its line number in that commit, the file's name there, and its text;
and the id of the file's blob at that commit when git named it (`recorded_blob`: a
lookup of the working tree proves the file unchanged from git's index with it, see
`repo/index.py`).

Entries live in `<common git dir>/obversa/blame/`, one file each, named
`<commit>-<checksum of the path>.v3` (`.v3`: the format whose checksum is
`lean.checksum`; entries of earlier formats, named otherwise, are left to the installs
that read them, and to eviction). `git gc` never looks there, and an entry for a commit
that gc removed is merely never asked for again. The directory is bounded in size
(`obversa.blameCacheSize`, default 64 MiB): after each write the least recently used
entries go until it holds three quarters of that.

Safe with several processes: an entry is written to a temporary file and renamed into
place, so a reader sees a whole entry or none; a reader whose entry vanishes (evicted
by another process) treats it as a miss. An entry is never trusted: it must start with
the format line, match its checksum and length, unmarshal, name the commit and path it
was asked for, and hold a well-formed table; otherwise it is deleted and the caller
computes the blame anew.

Imports only modules built into Python (`marshal`), and `lean.checksum` for its
checksum: `git obversa why` loads this in a fresh process on every call, before its
first git process starts.
"""

import marshal
import os
import time

from git_obversa.lean.checksum import checksum

# 2: the blob id in the header and the payload; 3: `lean.checksum` for entries of any
# size and for the path in their names. The entries' names end in VERSION_SUFFIX.
FORMAT = b"obversa-blame-cache 3 marshal %d" % marshal.version
VERSION_SUFFIX = ".v3"
UNKNOWN_BLOB = "-"
DEFAULT_LIMIT = 64 << 20
STALE_TEMPORARY_SECONDS = 3600  # a writer killed between write and rename leaves these


def directory(common_dir: str) -> str:
    return os.path.join(common_dir, "obversa", "blame")


def entry_name(commit: str, path: str) -> str:
    """The file name of COMMIT's entry for PATH: the commit and the checksum of the path."""
    return f"{commit}-{_path_checksum(path)}{VERSION_SUFFIX}"


_PATH_CHECKSUMS: dict[str, str] = {}


def _path_checksum(path: str) -> str:
    found = _PATH_CHECKSUMS.get(path)
    if found is None:
        found = _PATH_CHECKSUMS[path] = f"{checksum(path.encode('utf-8', 'surrogateescape')):08x}"
    return found


def names(folder: str) -> set[str]:
    """The entries the cache holds now (an empty set when there is no cache yet)."""
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def load(folder: str, commit: str, path: str) -> tuple[tuple, str | None] | None:
    """(the table cached for PATH at COMMIT, the id of PATH's blob there or None when the
    entry does not know it), or None. An entry that does not verify is deleted, so that
    the next write replaces it."""
    location = os.path.join(folder, entry_name(commit, path))
    try:
        with open(location, "rb") as file:
            data = file.read()
    except OSError:
        return None
    found = _verified(data, commit, path)
    if found is None:
        _remove(location)
        return None
    try:
        os.utime(location)  # least recently used goes first
    except OSError:
        pass
    return found


def recorded_blob(folder: str, commit: str, path: str) -> str | None:
    """The blob id the entry for PATH at COMMIT names in its header, read without the
    rest of it: a claim, which `load` verifies with the entry."""
    try:
        with open(os.path.join(folder, entry_name(commit, path)), "rb") as file:
            header = file.read(len(FORMAT) + 100).partition(b"\n")[0]
    except OSError:
        return None
    fields = header[len(FORMAT) + 1 :].split(b" ")
    if not header.startswith(FORMAT + b" ") or len(fields) != 3:
        return None
    blob = fields[2].decode("ascii", "replace")
    return None if blob == UNKNOWN_BLOB else blob


def store(
    folder: str,
    commit: str,
    path: str,
    table: tuple,
    limit: int = DEFAULT_LIMIT,
    blob: str | None = None,
) -> None:
    """Keep TABLE as the blame of PATH at COMMIT, whose blob is BLOB (when known). Best
    effort: a cache that cannot be written (read-only repository, full disk) costs the
    next lookup its speed, not its answer."""
    named = UNKNOWN_BLOB if blob is None else blob
    payload = marshal.dumps((commit, path, named, *table))
    header = b"%s %08x %d %s\n" % (FORMAT, checksum(payload), len(payload), named.encode())
    name = entry_name(commit, path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(temporary, "wb") as file:
            file.write(header + payload)
        os.replace(temporary, os.path.join(folder, name))
    except OSError:
        _remove(temporary)
        return
    _evict(folder, limit)


def _verified(data: bytes, commit: str, path: str) -> tuple[tuple, str | None] | None:
    header, newline, payload = data.partition(b"\n")
    if not newline or not header.startswith(FORMAT + b" "):
        return None
    fields = header[len(FORMAT) + 1 :].split(b" ")
    try:
        claimed, length = int(fields[0], 16), int(fields[1])
    except (ValueError, IndexError):
        return None
    if len(fields) != 3 or length != len(payload) or claimed != checksum(payload):
        return None
    try:
        value = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if type(value) is not tuple or len(value) != 9 or value[:2] != (commit, path):
        return None
    blob, table = value[2], value[3:]
    if type(blob) is not str or blob.encode() != fields[2] or not well_formed(table):
        return None
    return table, (None if blob == UNKNOWN_BLOB else blob)


def well_formed(table: tuple) -> bool:
    """Whether TABLE is (commits, owners, origins, sources, names, texts) that hang
    together: a commit is 7 fields (sha, author, email, date, subject, body, reasoning),
    all strings but reasoning (a string or None); each line has an owner among the
    commits, an origin line of at least 1, a source among the names, and a text."""
    if type(table) is not tuple or len(table) != 6:
        return False
    commits, owners, origins, sources, names_, texts = table
    if not all(type(part) is list for part in table):
        return False
    count = len(owners)
    if not (len(origins) == len(sources) == len(texts) == count):
        return False
    if set(map(type, commits)) - {tuple} or set(map(len, commits)) - {7}:
        return False
    columns = list(zip(*commits, strict=True)) or [()] * 7
    if any(set(map(type, column)) - {str} for column in columns[:6]):
        return False
    if set(map(type, columns[6])) - {str, type(None)}:
        return False
    if set(map(type, names_)) - {str} or set(map(type, texts)) - {str}:
        return False
    if count and (
        set(map(type, owners)) - {int}
        or set(map(type, origins)) - {int}
        or set(map(type, sources)) - {int}
        or min(owners) < 0
        or max(owners) >= len(commits)
        or min(origins) < 1
        or min(sources) < 0
        or max(sources) >= len(names_)
    ):
        return False
    return True


def _evict(folder: str, limit: int) -> None:
    """Remove the least recently used entries while the cache holds more than LIMIT
    bytes, down to three quarters of it; and temporary files a killed writer left."""
    now = time.time()
    entries = []
    total = 0
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                try:
                    status = entry.stat()
                except OSError:
                    continue
                if entry.name.endswith(".tmp"):
                    if now - status.st_mtime > STALE_TEMPORARY_SECONDS:
                        _remove(entry.path)
                    continue
                entries.append((status.st_mtime, entry.path, status.st_size))
                total += status.st_size
    except OSError:
        return
    if total <= limit:
        return
    for _, location, size in sorted(entries):
        if total <= limit * 3 // 4:
            break
        _remove(location)
        total -= size


def _remove(location: str) -> None:
    try:
        os.remove(location)
    except OSError:
        pass
