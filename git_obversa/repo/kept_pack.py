"""Objects written for a ref update, in a pack that `git gc` keeps until the refs move.

`git gc --prune=now` deletes every object that no ref reached when it walked the refs,
also one written a moment later for a ref that is about to name it: a process killed
after moving the ref, before it could put such objects back, leaves the ref naming
objects that are gone. Git's receive-pack protects what a push brings the way this
module does: the objects go into a pack with a `.keep` file beside it (gc never repacks
away or prunes a kept pack), the refs move, then the `.keep` goes and the pack is like
any other: gc keeps what refs reach and drops the rest. The pack goes too where nothing
needs it (`Kept.release`): the refs did not move, or every object is also a loose one
and no git runs in the repository (a gc or prune that walked the refs before they moved
could still delete those copies), which is the common case, so packs do not pile up.

The `.keep` comes first: written under a temporary name with our words in it and a
`flock` held on it (the kernel drops the flock when its process dies), then linked at
its name, so it is held from the moment it appears; the pack and then its index are
linked into place after it, so the pack is never visible unkept. A `.keep` of ours whose
flock is free is a killed process's: `dead_keeps_removed` removes it, and also the one
git's fetch makes the same way (`fetch-pack <pid> on <host>`, which git never removes
when the fetch is killed) once no git runs as that pid on this host. Any other `.keep`
(receive-pack's, `git repack --keep-pack`, a user's) is never touched.

Formats (Documentation/gitformat-pack.txt): a pack is "PACK", version 2, the number of
objects, each object as a type-and-size header and its zlib stream, then the checksum
of all that; its version 2 index is a fan-out table, the sorted object ids, the CRC-32
of each entry, their offsets (a second table for those past 2 GiB), the pack's
checksum and the index's own.
"""

import os
import random
import re
import zlib

from git_obversa.repo import locks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

KIND_NUMBERS = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}
KEEP_WORDS = b"git-obversa: objects of a ref update in progress"
ATTEMPTS = 20  # temporary files tried when a concurrent prune takes them
# (level, window bits) of zlib streams that differ in their header, which git reads alike.
VARIANTS = [(level, window) for window in range(15, 8, -1) for level in (1, 2, 6, 9)]
FETCH_KEEP = re.compile(rb"fetch-pack (\d+) on (\S+)\n?")  # what git's fetch writes


class Kept:
    """A kept pack: its `.keep` file, held by this process until `release`."""

    def __init__(self, common_dir: str, name: str, handle: int, oids: "list[str]") -> None:
        self.common_dir = common_dir
        self.keep = name + ".keep"
        self._name = name
        self._handle: int | None = handle
        self._oids = oids

    def release(self, moved: bool) -> None:
        """Remove the `.keep`: the refs may now name the objects (MOVED), or never will;
        and the pack where nothing needs it (see the module's docstring)."""
        if self._handle is None:
            return
        try:
            if not moved or self._redundant():
                _remove(self._name + ".idx")  # first: git no longer looks into the pack
                _remove(self._name + ".pack")
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Remove the `.keep` only (a pack of that name is not ours, or stays)."""
        if self._handle is None:
            return
        try:
            _remove(self.keep)
        finally:
            os.close(self._handle)
            self._handle = None

    def _redundant(self) -> bool:
        from git_obversa.repo.objects import LooseObjects

        loose = LooseObjects(self.common_dir)
        if not all(map(loose.exists, self._oids)):
            return False
        return not locks.git_may_run_in(self.common_dir)


def write(
    common_dir: str,
    objects: "Mapping[str, tuple[str, bytes]]",
    object_format: str,
    fsync: bool,
) -> Kept:
    """OBJECTS (id -> (type, content)) written as a kept pack of the repository at
    COMMON_DIR. FSYNC: flush the pack and its index as git would (`locks.fsyncs`).
    OSError when it cannot be written."""
    import hashlib

    directory = os.path.join(common_dir, "objects", "pack")
    os.makedirs(directory, exist_ok=True)
    hasher = hashlib.sha256 if object_format == "sha256" else hashlib.sha1
    order = list(objects)
    for attempt, (level, window) in enumerate(VARIANTS):
        # A pack of these bytes may be there already, unkept (an earlier write of the same
        # objects, kept beside a git): a running repack may be deleting it. Another zlib
        # header, another order: a pack of our own.
        if attempt:
            random.shuffle(order)
        pack, entries = _pack(objects, order, level, window, hasher)
        name = os.path.join(directory, "pack-" + pack[-hasher().digest_size :].hex())
        words = KEEP_WORDS + b" (pid %d)\n" % os.getpid()
        handle = _place(name + ".keep", words, False, held=True)
        if handle is None:
            continue
        kept = Kept(common_dir, name, handle, order)
        try:
            if _placed(name + ".pack", pack, fsync):
                if _placed(name + ".idx", _index(entries, pack, hasher), fsync):
                    return kept
                _remove(name + ".pack")  # ours, beside an index that is not
        except BaseException:
            kept.abandon()
            raise
        kept.abandon()
    raise FileExistsError(f"packs of these contents exist in {directory}")


def dead_keeps_removed(common_dir: str) -> "list[str]":
    """Remove the `.keep` files whose process is provably gone (see the module's
    docstring); those removed."""
    directory = os.path.join(common_dir, "objects", "pack")
    try:
        names = [name for name in os.listdir(directory) if name.endswith(".keep")]
    except OSError:
        return []
    removed = []
    for name in names:
        keep = os.path.join(directory, name)
        try:
            handle = os.open(keep, os.O_RDONLY)
        except OSError:
            continue
        try:
            # Ours is marked while this handle holds it: no writer can take it meanwhile.
            if _dead(handle, os.read(handle, 256)):
                if os.stat(keep).st_ino == os.fstat(handle).st_ino:
                    os.unlink(keep)
                    removed.append(keep)
        except OSError:
            continue
        finally:
            os.close(handle)
    return removed


def _dead(handle: int, words: bytes) -> bool:
    """Whether the `.keep` open as HANDLE, which says WORDS, is a dead process's of ours
    or of git's fetch."""
    if words.startswith(KEEP_WORDS):
        return locks.unheld(handle)
    fetch = FETCH_KEEP.fullmatch(words)
    if fetch is None or fetch.group(2).decode("utf-8", "replace") != os.uname().nodename:
        return False
    return not locks.live_git(int(fetch.group(1)))


def _placed(final: str, data: bytes, fsync: bool) -> bool:
    """`_place` of a file nobody holds; False when FINAL exists already."""
    handle = _place(final, data, fsync)
    if handle is None:
        return False
    os.close(handle)
    return True


def _place(final: str, data: bytes, fsync: bool, held: bool = False) -> int | None:
    """DATA written at FINAL through a temporary file (which `git prune` removes should
    we be killed), flushed if FSYNC, held (`locks.hold`) before it appears if HELD; its
    open handle, or None when FINAL exists already."""
    for _ in range(ATTEMPTS):
        temporary = os.path.join(
            os.path.dirname(final), f"tmp_obversa_{os.getpid()}_{os.urandom(4).hex()}"
        )
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            if held:
                locks.hold(handle)
            locks.write_all(handle, data)
            if fsync:
                os.fsync(handle)
            os.link(temporary, final)
        except FileExistsError:
            os.close(handle)
            return None
        except FileNotFoundError:  # a concurrent prune took the temporary file: again
            os.close(handle)
            continue
        except BaseException:
            os.close(handle)
            raise
        finally:
            _remove(temporary)
        return handle
    raise FileNotFoundError(final)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _pack(
    objects: "Mapping[str, tuple[str, bytes]]",
    order: "Sequence[str]",
    level: int,
    window: int,
    hasher,
) -> "tuple[bytes, list[tuple[bytes, int, int]]]":
    """The pack of OBJECTS in ORDER, compressed at LEVEL with a window of WINDOW bits;
    and (raw id, CRC-32, offset) of each of its entries."""
    parts = [b"PACK", (2).to_bytes(4, "big"), len(order).to_bytes(4, "big")]
    offset = 12
    entries = []
    for oid in order:
        kind, data = objects[oid]
        compressor = zlib.compressobj(level, zlib.DEFLATED, window)
        compressed = compressor.compress(data) + compressor.flush()
        entry = _entry_header(KIND_NUMBERS[kind], len(data)) + compressed
        entries.append((bytes.fromhex(oid), zlib.crc32(entry), offset))
        parts.append(entry)
        offset += len(entry)
    body = b"".join(parts)
    return body + hasher(body).digest(), entries


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's header: the type and the low four bits of SIZE, then seven bits
    of SIZE a byte, each byte but the last with its top bit set."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _index(entries: "list[tuple[bytes, int, int]]", pack: bytes, hasher) -> bytes:
    """The version 2 index of a pack whose ENTRIES are (raw id, CRC-32, offset)."""
    entries = sorted(entries)
    fanout = [0] * 256
    for raw, _, _ in entries:
        fanout[raw[0]] += 1
    parts = [b"\xfftOc", (2).to_bytes(4, "big")]
    total = 0
    for count in fanout:
        total += count
        parts.append(total.to_bytes(4, "big"))
    parts += [raw for raw, _, _ in entries]
    parts += [crc.to_bytes(4, "big") for _, crc, _ in entries]
    large = []
    for _, _, offset in entries:
        if offset < 0x80000000:
            parts.append(offset.to_bytes(4, "big"))
        else:
            parts.append((0x80000000 | len(large)).to_bytes(4, "big"))
            large.append(offset.to_bytes(8, "big"))
    parts += large
    parts.append(pack[-hasher().digest_size :])
    body = b"".join(parts)
    return body + hasher(body).digest()
