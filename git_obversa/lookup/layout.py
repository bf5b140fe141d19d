"""Where a repository is, and which commit its HEAD names, read from the file system.

A `git obversa why` answered from the blame cache used to start `git rev-parse` only to
learn the repository's directories and HEAD's commit: on a 2-core machine a third git
process beside the other two checks costs ~4 ms of a ~30 ms command
(docs/benchmarks.md, "Blame lookup"). Both are files git keeps in known places, so this
module reads them as git does, for the plain layouts only: a working tree with a `.git`
directory, or a `.git` file naming its git directory (a linked worktree, a submodule);
HEAD a branch whose ref is a loose file or a line of `packed-refs`, or a detached commit.
Anything else (variables that move the repository, a bare or unowned repository, a
symbolic ref that is not HEAD, an unborn branch, a file system boundary on the way up)
gives None, and the caller asks git.

What it cannot see from here is the configuration (`core.worktree`, `core.bare`,
`extensions.refStorage` relocate or replace what is read); the caller checks those in the
`git config` output it reads anyway (`moved_by`). And a commit read here is only a name:
the blame cache keeps entries under ids git itself gave (`rev-parse <rev>^{commit}`), so
a name read here finds an entry only if git named it so before; a miss asks git.

And whether a file of the working tree is unchanged: when its blame is cached, the lookup
would run `git diff-index`, a second git process beside `git config`; git's own answer
for an unchanged file comes from its index, which `index_holds` reads as git does (see
its section below).

Imports only `os`: `bin/git-obversa` loads this before anything else of the package (one
module rather than two: each costs a fresh process ~0.2 ms to import).
"""

import os

# Environment that changes where git looks for the repository, its refs or its objects.
_RELOCATING = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_NAMESPACE",
    "GIT_OBJECT_DIRECTORY",
)
# Refs kept per worktree (in its own git directory) rather than in the common one.
_PER_WORKTREE = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")
_HEX = frozenset("0123456789abcdef")


def located(repository: str | os.PathLike[str]) -> tuple[str, str, str, str] | None:
    """(common git dir, git dir, top of the working tree, the directory REPOSITORY from
    the top as `rev-parse --show-prefix` prints it: "" or ending in "/"), absolute, as git
    finds them from REPOSITORY; None unless the layout is a plain one (see above)."""
    if any(name in os.environ for name in _RELOCATING):
        return None
    try:
        here = os.path.realpath(repository)  # git works from the physical directory
        device = os.stat(here).st_dev
        top = here
        while True:
            try:
                dot_git = os.stat(os.path.join(top, ".git"))
                break
            except (FileNotFoundError, NotADirectoryError):
                if os.path.lexists(os.path.join(top, ".git")):
                    return None  # a dangling link: git's to say
            if os.path.lexists(os.path.join(top, "HEAD")):
                return None  # maybe a git directory itself (bare, or inside .git): git's to say
            parent = os.path.dirname(top)
            if parent == top or os.stat(parent).st_dev != device:
                return None  # no repository, or one git would not look for across a mount
            top = parent
        git_dir = os.path.join(top, ".git")
        if not _is_directory(dot_git.st_mode):
            pointer = _read(git_dir)
            if pointer is None or not pointer.startswith("gitdir: "):
                return None
            git_dir = os.path.normpath(os.path.join(top, pointer[8:].strip()))
        common = _read(os.path.join(git_dir, "commondir"))
        common_dir = (
            git_dir if common is None else os.path.normpath(os.path.join(git_dir, common.strip()))
        )
        owner = os.geteuid()
        if os.stat(top).st_uid != owner or os.stat(git_dir).st_uid != owner:
            return None  # git may refuse it (safe.directory): let git say
    except OSError:
        return None
    prefix = os.path.relpath(here, top)
    prefix = "" if prefix == "." else prefix.replace(os.sep, "/") + "/"
    return common_dir, git_dir, top, prefix


def head_commit(git_dir: str, common_dir: str) -> str | None:
    """The commit id HEAD names (a branch's, or the detached one), read as git reads it:
    the loose ref first, then `packed-refs`; None for anything else (an unborn branch, a
    symbolic ref below HEAD, a ref store other than files)."""
    try:
        head = _read(os.path.join(git_dir, "HEAD"))
        if head is None:
            return None
        if head.startswith("ref: "):
            name = head[5:].strip()
            if not name.startswith("refs/") or ".." in name.split("/"):
                return None
            base = git_dir if name.startswith(_PER_WORKTREE) else common_dir
            head = _read(os.path.join(base, name))
            if head is None:
                head = _packed(common_dir, name)
                if head is None:
                    return None
    except OSError:
        return None  # a ref that is a directory, or unreadable: git's to say
    sha = head.strip()
    return sha if len(sha) in (40, 64) and _HEX.issuperset(sha) else None


def relative(path: str, top: str, prefix: str) -> str | None:
    """PATH (relative to the directory PREFIX of the working tree TOP, or absolute) as
    git names it from TOP; None when it is outside."""
    if os.path.isabs(path):
        relative = os.path.relpath(path, top)
    else:
        relative = os.path.normpath(os.path.join(prefix, path))
    relative = relative.replace(os.sep, "/")
    if relative == "." or relative.startswith("../") or relative == "..":
        return None
    return relative


def moved_by(configured: bytes) -> bool:
    """Whether the configuration `git config -z --get-regexp` printed (keys `core.worktree`,
    `core.bare`, `extensions.refstorage` among them) places the working tree or the refs
    elsewhere than `located` and `head_commit` read them."""
    for record in configured.split(b"\0"):
        key, newline, value = record.partition(b"\n")
        key = key.lower()
        if key in (b"core.worktree", b"extensions.refstorage"):
            return True
        if key == b"core.bare" and (
            not newline or value.strip().lower() not in (b"false", b"no", b"off", b"0", b"")
        ):
            return True
    return False


def _is_directory(mode: int) -> bool:
    return mode & 0o170000 == 0o040000


def _read(location: str) -> str | None:
    """The text of the file at LOCATION, or None when there is no such file."""
    try:
        with open(location, "rb") as file:
            return file.read().decode("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError):
        return None


def _packed(common_dir: str, name: str) -> str | None:
    """The id `packed-refs` gives the ref NAME, or None."""
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as file:
            data = file.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not data.endswith(b"\n"):
        data += b"\n"
    wanted = b" " + name.encode("utf-8", "surrogateescape") + b"\n"
    at = data.find(wanted)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        if data[start : start + 1] not in (b"#", b"^"):
            return data[start:at].decode("ascii", "replace")
        at = data.find(wanted, at + 1)
    return None


# ---------------------------------------------------------------------------------------
# The working tree's file, from git's index
#
# A `git obversa why FILE` answered from the blame cache must know whether FILE differs
# from HEAD's version; it asked `git diff-index`, a second git process beside `git config`
# (on 2 cores, with Python's own imports, three processes at once: ~2-3 ms of a ~30 ms
# command, docs/benchmarks.md, "Blame lookup"). When the file is unchanged, git's answer
# comes from the index alone: it compares the file's `lstat` with the stat data its index
# entry recorded (`ie_match_stat`), and when they match it takes the entry's blob for the
# file's content without reading the file. `index_holds` makes the same comparison,
# stricter: every field git may compare must match (times to the nanosecond, device,
# inode, owner, group, size, the owner's execute bit), whatever `core.trustctime`,
# `core.checkStat` or `core.fileMode` say (they only let git compare fewer); and an entry
# git itself would re-read because it is racy (its file's mtime not older than the index
# file's, to the second) is not trusted at all. Then, if the entry's blob is the blob the
# caller names, the working tree's file is that blob as far as git can tell, and its diff
# against a commit holding that blob is empty.
#
# Anything not plainly understood gives False, and the caller runs git as before: another
# index named by the environment (`GIT_INDEX_FILE`) or pathspecs read otherwise
# (`GIT_*_PATHSPECS`); an index version other than 2-4, a split index (`link`), a sparse
# index (`sdir`), an fsmonitor extension (`FSMN`) or any required extension; an entry that
# is not a regular file at stage 0, is assumed unchanged, skip-worktree or intent-to-add
# (any extended flag), has a recorded size of 0 (git's "racily smudged" mark), or that the
# index lists more than once; a file that is not a regular file; an index too large to
# walk quickly (git would be faster). The index's trailing checksum is not verified, as git
# itself does not verify it when it reads the index (only `git fsck` does); its structure
# is, to its last byte.

# Environment under which git reads another index, or matches the path otherwise.
_INDEX_REDIRECTING = (
    "GIT_INDEX_FILE",
    "GIT_ICASE_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
)
# Past this many entries walking the index in Python (~0.5 us an entry on the bench
# machine: 1 ms here) costs more than the `git diff-index` it saves, which runs beside.
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
            drop, starts = _varint(data, starts)
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


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """Git's variable-length number at AT in DATA (`decode_varint`): (it, where it ends)."""
    byte = data[at]
    at += 1
    value = byte & 127
    while byte & 128:
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 127)
    return value, at
