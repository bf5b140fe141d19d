"""Whether a working tree's file is unchanged, read from git's index as git reads it.

When the file is unchanged, git's answer comes from the index alone: it compares the
file's `lstat` with the stat data its index entry recorded (`ie_match_stat`), and when
they match it takes the entry's blob for the file's content without reading the file.
`index_holds` makes the same comparison, stricter: every field git may compare must match
(times to the nanosecond, device, inode, owner, group, size, the owner's execute bit),
whatever `core.trustctime`, `core.checkStat` or `core.fileMode` say (they only let git
compare fewer); and an entry git itself would re-read because it is racy (its file's
mtime not older than the index file's, to the second) is not trusted at all. Then, if the
entry's blob is the blob the caller names, the working tree's file is that blob as far as
git can tell, and its diff against a commit holding that blob is empty.

Anything not plainly understood gives False, and the caller runs git: another index named
by the environment (`GIT_INDEX_FILE`) or pathspecs read otherwise (`GIT_*_PATHSPECS`); an
index version other than 2-4, a split index (`link`), a sparse index (`sdir`), an
fsmonitor extension (`FSMN`) or any required extension; an entry that is not a regular
file at stage 0, is assumed unchanged, skip-worktree or intent-to-add (any extended flag),
has a recorded size of 0 (git's "racily smudged" mark), or that the index lists more than
once; a file that is not a regular file; an index too large to walk quickly. The index's
trailing checksum is not verified, as git itself does not verify it when it reads the
index (only `git fsck` does); its structure is, to its last byte.
"""

import os

from git_obversa.repo.varint import offset_varint

# Environment under which git reads another index, or matches the path otherwise.
_INDEX_REDIRECTING = (
    "GIT_INDEX_FILE",
    "GIT_ICASE_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
)
# Past this many entries, walking the index here takes longer than the `git diff-index`
# it stands in for (docs/benchmarks.md).
MAX_INDEX_ENTRIES = 2_000
# Extensions git may hold that change which entries exist or what they mean.
_UNTRUSTED_EXTENSIONS = (b"link", b"sdir", b"FSMN")
_LOW_32 = 0xFFFFFFFF
_BILLION = 1_000_000_000


def index_holds(git_dir: str, top: str, path: str, blob: str) -> bool:
    """Whether the file PATH (from the top TOP of the working tree, `/`-separated) is,
    by the stat data of its entry in GIT_DIR's index, the blob BLOB (hex id) as git sees
    it; False whenever that cannot be shown (see above)."""
    if any(name in os.environ for name in _INDEX_REDIRECTING):
        return False
    hash_size = len(blob) // 2
    if len(blob) not in (40, 64):
        return False
    try:
        wanted = bytes.fromhex(blob)
        with open(os.path.join(git_dir, "index"), "rb") as file:
            written = os.fstat(file.fileno()).st_mtime_ns // _BILLION
            data = file.read()
        status = os.lstat(os.path.join(top, path))
    except (OSError, ValueError):
        return False
    try:
        entry = _entry(data, path.encode("utf-8", "surrogateescape"), hash_size)
    except (IndexError, ValueError):  # an index that ends inside an entry
        return False
    if entry is None:
        return False
    fields = [int.from_bytes(entry[at : at + 4], "big") for at in range(0, 40, 4)]
    ctime, ctime_ns, mtime, mtime_ns, device, inode, mode, owner, group, size = fields
    if entry[40 : 40 + hash_size] != wanted or mode not in (0o100644, 0o100755):
        return False
    if size == 0 or mtime >= written:  # racily smudged; racy (git would read the file)
        return False
    return (
        status.st_mode & 0o170000 == 0o100000
        and status.st_mode & 0o100 == mode & 0o100
        and (status.st_ctime_ns // _BILLION) & _LOW_32 == ctime
        and status.st_ctime_ns % _BILLION == ctime_ns
        and (status.st_mtime_ns // _BILLION) & _LOW_32 == mtime
        and status.st_mtime_ns % _BILLION == mtime_ns
        and status.st_dev & _LOW_32 == device
        and status.st_ino & _LOW_32 == inode
        and status.st_uid & _LOW_32 == owner
        and status.st_gid & _LOW_32 == group
        and status.st_size & _LOW_32 == size
    )


def _entry(data: bytes, name: bytes, hash_size: int) -> bytes | None:
    """The fixed part (stat data, id, flags) of NAME's only entry in the index DATA,
    when that entry is at stage 0 with no flag but its name's length, and the index has
    nothing this module does not understand; else None."""
    end = len(data) - hash_size  # the trailing checksum
    if end < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4) or count > MAX_INDEX_ENTRIES:
        return None
    flags_at = 40 + hash_size  # after the stat data and the object id
    wanted = len(name)
    position = 12
    found = None
    previous = b""  # version 4: the name of the entry before
    for _ in range(count):  # the entries, walked with as little work as each needs
        at = position + flags_at
        flags = data[at] << 8 | data[at + 1]
        starts = at + 2
        if flags & 0x4000:  # extended flags follow
            if version == 2:
                return None  # git refuses such an entry
            starts += 2
        if version == 4:  # the name: how much of the previous one to drop, then the rest
            drop, starts = offset_varint(data, starts)
            if drop > len(previous):
                return None
            ends = data.index(b"\0", starts)
            previous = previous[: len(previous) - drop] + data[starts:ends]
            matches = previous == name
            following = ends + 1
        else:  # the name, then 1-8 NULs to a multiple of 8 bytes from the entry's start
            length = flags & 0xFFF
            if length == 0xFFF:  # a name too long for the flags: up to its NUL
                length = data.index(b"\0", starts) - starts
            matches = length == wanted and data[starts : starts + wanted] == name
            if matches and data[starts + wanted] != 0:
                return None  # a name not ended where its length says
            following = position + ((starts - position + length + 8) & ~7)
        if matches:
            # Listed twice; or assumed unchanged, with extended flags (skip-worktree,
            # intent-to-add), or at a stage of a merge.
            if found is not None or flags & 0xF000:
                return None
            found = data[position:at]
        position = following
    if position > end:
        return None
    while position < end:  # the extensions: a signature, a size, the data
        if position + 8 > end:
            return None
        signature = data[position : position + 4]
        position += 8 + int.from_bytes(data[position + 4 : position + 8], "big")
        # A signature starting with a capital is optional to git; others it must know.
        if signature in _UNTRUSTED_EXTENSIONS or not 65 <= signature[0] <= 90:
            return None
    return found if position == end else None
