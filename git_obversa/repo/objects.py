"""Git's object files, read with the standard library: loose objects and packs.

Only what the memory store needs, and each reader sized before it inflates: a hostile
500 MB blob costs its header, not 500 MB. Readers raise `Corrupt` for bytes that are
not what Git writes, and return None for an object they do not hold.

Formats (Documentation/gitformat-pack.txt): a loose object is the zlib stream of
"<type> <size>\\0<content>"; a pack index v2 is a fan-out table, the sorted object ids,
their CRCs and their offsets into the pack; a pack entry is a type-and-size header and
a zlib stream, either a whole object or a delta against a base given by offset
(OFS_DELTA) or by id (REF_DELTA).
"""

import errno
import os
import zlib

from git_obversa.repo.locks import write_all
from git_obversa.repo.varint import offset_varint, size_varint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
OFS_DELTA = 6
REF_DELTA = 7
MAX_DELTA_CHAIN = 10000  # git's own limit is 4095 (pack.depth)
CHUNK = 65536


class Corrupt(Exception):
    """Bytes on disk that are not what Git writes."""


class TooLarge(Exception):
    """An object larger than the caller accepts (its SIZE is known, its content unread)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _inflate(
    source: "Callable[[int], bytes]",
    size: int,
    begun: "tuple[Any, bytes, bytes] | None" = None,
) -> bytes:
    """The SIZE bytes inflated from the zlib stream SOURCE(n) returns, n bytes at a time
    (an error unless the stream ends exactly there). BEGUN, when the caller has inflated
    the stream's start already: (its decompressor, what it gave, the input it has not
    consumed yet)."""
    stream, first, pending = begun if begun is not None else (zlib.decompressobj(), b"", b"")
    out: list[bytes] = [first]
    length = len(first)
    try:
        while not stream.eof and length <= size:
            data = pending or source(CHUNK)
            if not data:
                break
            piece = stream.decompress(data, size + 1 - length)
            pending = stream.unconsumed_tail
            out.append(piece)
            length += len(piece)
    except zlib.error as error:
        raise Corrupt("zlib") from error
    content = b"".join(out)
    if len(content) != size or not stream.eof:
        raise Corrupt("size")
    return content


def read_loose(path: str, limit: int) -> tuple[str, bytes] | None:
    """(type, content) of the loose object file PATH; None when there is no such file.
    TooLarge when its header declares more than LIMIT bytes."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:  # unbuffered: a small object is one read, not a buffered file's ten system calls
        start = os.read(handle, CHUNK)
        # The header first (from at most 256 bytes, inflated to at most 64), then the
        # rest of the same stream once the size it declares is known to be acceptable.
        stream = zlib.decompressobj()
        try:
            head = stream.decompress(start[:256], 64)
        except zlib.error as error:
            raise Corrupt("zlib") from error
        header, nul, _ = head.partition(b"\0")
        kind, _, size_text = header.decode("ascii", "replace").partition(" ")
        if not nul or kind not in TYPES.values() or not size_text.isdigit():
            raise Corrupt("header")
        size = int(size_text)
        if size > limit:
            raise TooLarge(size)

        def source(wanted: int) -> bytes:
            return os.read(handle, wanted)

        begun = (stream, head, stream.unconsumed_tail + start[256:])
        whole = _inflate(source, len(header) + 1 + size, begun)
        return kind, whole[len(header) + 1 :]
    finally:
        os.close(handle)


def _delta_header(delta: bytes) -> tuple[int, int, int]:
    """(the base's size, the result's size, where the instructions start): the two
    numbers a delta starts with."""
    try:
        source_size, position = size_varint(delta, 0)
        target_size, position = size_varint(delta, position)
    except IndexError:
        raise Corrupt("delta header") from None
    return source_size, target_size, position


def apply_delta(base: bytes, delta: bytes) -> bytes:
    """The object DELTA describes in terms of BASE (git's copy/insert instructions)."""
    source_size, target_size, position = _delta_header(delta)
    if source_size != len(base):
        raise Corrupt("delta base size")
    out = bytearray()
    end = len(delta)
    while position < end:
        command = delta[position]
        position += 1
        if command & 0x80:
            offset = length = 0
            for bit in range(4):
                if command & (1 << bit):
                    offset |= delta[position] << (8 * bit)
                    position += 1
            for bit in range(3):
                if command & (0x10 << bit):
                    length |= delta[position] << (8 * bit)
                    position += 1
            length = length or 0x10000
            if offset + length > len(base):
                raise Corrupt("delta copy")
            out += base[offset : offset + length]
        elif command:
            out += delta[position : position + command]
            position += command
        else:
            raise Corrupt("delta instruction")
    if len(out) != target_size:
        raise Corrupt("delta result size")
    return bytes(out)


class Pack:
    """One pack and its version 2 index, memory-mapped (a pack deleted by a concurrent
    repack stays readable through the mapping)."""

    def __init__(self, index_path: str, id_bytes: int) -> None:
        import mmap  # here: a repository whose objects are all loose needs no mapping

        self.id_bytes = id_bytes
        with open(index_path, "rb") as handle:
            self._index = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        with open(index_path[: -len(".idx")] + ".pack", "rb") as handle:
            self._pack = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        index = self._index
        if index[:8] != b"\xfftOc\x00\x00\x00\x02" or self._pack[:4] != b"PACK":
            raise Corrupt("pack version")
        self.count = int.from_bytes(index[8 + 255 * 4 : 8 + 256 * 4], "big")
        self._names = 8 + 1024
        self._offsets = self._names + self.count * (id_bytes + 4)
        self._large = self._offsets + self.count * 4
        if len(index) < self._large + 2 * id_bytes:
            raise Corrupt("pack index size")

    def offset(self, raw: bytes) -> int | None:
        """Where the object RAW (binary id) starts in the pack, or None."""
        index, width = self._index, self.id_bytes
        first = raw[0]
        low = int.from_bytes(index[4 + first * 4 : 8 + first * 4], "big") if first else 0
        high = int.from_bytes(index[8 + first * 4 : 12 + first * 4], "big")
        while low < high:
            middle = (low + high) // 2
            start = self._names + middle * width
            found = index[start : start + width]
            if found < raw:
                low = middle + 1
            elif found > raw:
                high = middle
            else:
                at = self._offsets + middle * 4
                value = int.from_bytes(index[at : at + 4], "big")
                if value & 0x80000000:
                    at = self._large + (value & 0x7FFFFFFF) * 8
                    value = int.from_bytes(index[at : at + 8], "big")
                return value
        return None

    def _entry(self, offset: int) -> tuple[int, int, int, int]:
        """(type, inflated size, where its data starts, base offset or -1) at OFFSET."""
        pack = self._pack
        if offset >= len(pack):
            raise Corrupt("pack offset")
        byte = pack[offset]
        kind, size, shift, position = (byte >> 4) & 7, byte & 0x0F, 4, offset + 1
        while byte & 0x80:
            byte = pack[position]
            position += 1
            size |= (byte & 0x7F) << shift
            shift += 7
        base = -1
        if kind == OFS_DELTA:
            distance, position = offset_varint(pack, position)
            base = offset - distance
        elif kind == REF_DELTA:
            position += self.id_bytes
        elif kind not in TYPES:
            raise Corrupt("pack entry type")
        return kind, size, position, base

    def _data(self, position: int, size: int) -> bytes:
        cursor = position

        def source(amount: int) -> bytes:
            nonlocal cursor
            piece = self._pack[cursor : cursor + amount]
            cursor += len(piece)
            return piece

        return _inflate(source, size)

    def size(self, offset: int) -> int:
        """The size of the object at OFFSET, from its header (a delta: its result size,
        the second number at the start of the delta), without inflating it whole."""
        kind, size, position, _ = self._entry(offset)
        if kind in TYPES:
            return size
        stream = zlib.decompressobj()
        try:
            head = stream.decompress(self._pack[position : position + 4096], 32)
        except zlib.error as error:
            raise Corrupt("zlib") from error
        return _delta_header(head)[1]

    def read(
        self, offset: int, find: "Callable[[bytes], tuple[str, bytes] | None]"
    ) -> tuple[str, bytes]:
        """(type, content) of the object at OFFSET; FIND reads a REF_DELTA's base by id."""
        deltas: list[bytes] = []
        for _ in range(MAX_DELTA_CHAIN):
            kind, size, position, base = self._entry(offset)
            if kind in TYPES:
                content = self._data(position, size)
                for delta in reversed(deltas):
                    content = apply_delta(content, delta)
                return TYPES[kind], content
            deltas.append(self._data(position, size))
            if kind == REF_DELTA:
                raw = self._pack[position - self.id_bytes : position]
                found = find(raw)
                if found is None:
                    raise Corrupt("delta base missing")
                base_kind, content = found
                for delta in reversed(deltas):
                    content = apply_delta(content, delta)
                return base_kind, content
            offset = base
        raise Corrupt("delta chain too long")

    def close(self) -> None:
        self._index.close()
        self._pack.close()


class Packs:
    """The packs of a repository, rescanned when an object is not found."""

    def __init__(self, common_dir: str, id_bytes: int) -> None:
        self.directory = os.path.join(common_dir, "objects", "pack")
        self.id_bytes = id_bytes
        self._packs: dict[str, Pack] = {}
        self._scanned = False

    def rescan(self) -> bool:
        """Open packs that appeared since the last scan; whether any did."""
        self._scanned = True
        try:
            names = {n for n in os.listdir(self.directory) if n.endswith(".idx")}
        except FileNotFoundError:
            names = set()
        added = False
        for name in names - self._packs.keys():
            try:
                self._packs[name] = Pack(os.path.join(self.directory, name), self.id_bytes)
                added = True
            except FileNotFoundError:  # removed by a concurrent repack meanwhile
                continue
            except (OSError, ValueError, Corrupt):  # e.g. an index still being written
                continue
        for name in self._packs.keys() - names:
            self._packs.pop(name).close()
        return added

    def locate(self, raw: bytes) -> tuple[Pack, int] | None:
        """(pack, offset) holding the object RAW, rescanning once when not found."""
        if not self._scanned:
            self.rescan()
        for attempt in range(2):
            for pack in self._packs.values():
                offset = pack.offset(raw)
                if offset is not None:
                    return pack, offset
            if attempt or not self.rescan():
                return None
        return None

    def close(self) -> None:
        for pack in self._packs.values():
            pack.close()
        self._packs.clear()
        self._scanned = False


def has_alternates(common_dir: str) -> bool:
    """Whether the repository borrows objects from other object directories."""
    return os.path.exists(os.path.join(common_dir, "objects", "info", "alternates"))


def deflate(data: bytes) -> bytes:
    """DATA compressed for a loose object at git's default level (1), with a window no
    larger than DATA needs and a smaller hash table: the stream git reads (it inflates any
    window up to 32 KB), without setting up zlib's largest state for a small object."""
    window = max(9, min(15, (len(data) - 1).bit_length()))
    compressor = zlib.compressobj(1, zlib.DEFLATED, window, 4)
    return compressor.compress(data) + compressor.flush()


O_TMPFILE = getattr(os, "O_TMPFILE", 0)  # Linux: a file with no name until it is linked
# Errors of a link that this file system or kernel cannot make (not a failure of ours).
UNLINKABLE = (errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM)
WRITE_ATTEMPTS = 1000


class WriteGaveUp(Exception):
    """A loose object could not be written in WRITE_ATTEMPTS tries (concurrent prunes)."""


class LooseObjects:
    """The loose objects of a repository: their files, read and written as git reads
    and writes them."""

    def __init__(self, common_dir: str) -> None:
        self._root = os.path.join(common_dir, "objects", "")
        self._nonce = os.urandom(4).hex()
        self._written = 0
        # Whether new objects start as unnamed files (O_TMPFILE), until that fails once.
        self.unnamed = O_TMPFILE != 0

    def path(self, oid: str) -> str:
        return self._root + oid[:2] + os.sep + oid[2:]

    def exists(self, oid: str) -> bool:
        return os.path.exists(self.path(oid))

    def read(self, oid: str, limit: int) -> tuple[str, bytes] | None:
        """(type, content) of the loose object OID, or None when it is not loose."""
        return read_loose(self.path(oid), limit)

    def write(self, oid: str, compressed: bytes, fsync: bool) -> None:
        """Store the object OID, whose deflated file is COMPRESSED, whole or not at all.

        As git writes one: into a file with no name (O_TMPFILE; where the file system has
        none, a `tmp_obj_*` file, which `git prune` removes should the writer be killed)
        that is then linked at its name, never a lock. An object that is there already is
        found by that link failing, not by a look first, and freshened, as git does, so
        that a prune with an expiry keeps it. OSError, or WriteGaveUp."""
        directory = self._root + oid[:2]
        final = directory + os.sep + oid[2:]
        for _ in range(WRITE_ATTEMPTS):
            try:
                handle, temporary = self._create_temporary(directory)
            except FileNotFoundError:  # objects/xx/ is new, or a concurrent prune removed it
                os.makedirs(directory, exist_ok=True)
                continue
            except OSError:
                if os.path.exists(final):  # a read-only object store that holds it
                    return
                raise
            try:
                try:
                    write_all(handle, compressed)
                    if fsync:
                        os.fsync(handle)
                    if temporary is None and not self._link_unnamed(handle, final):
                        temporary = ""  # unnamed files cannot be linked here: named ones
                        continue
                finally:
                    os.close(handle)
                if temporary:
                    os.link(temporary, final)
            except FileExistsError:  # there already, or another writer stored it meanwhile
                try:
                    os.utime(final)
                except FileNotFoundError:  # pruned since
                    continue
                except OSError:  # a read-only object store: the object is there
                    pass
            except FileNotFoundError:  # the temporary file (or objects/xx/) pruned meanwhile
                continue
            finally:
                if temporary:
                    try:
                        os.unlink(temporary)
                    except OSError:
                        pass
            return
        raise WriteGaveUp(oid)

    def _temporary_name(self) -> str:
        """A name no other writer uses (its pid, a random part drawn once, a count): git
        and other processes pick their own, and O_EXCL catches the impossible clash."""
        self._written += 1
        return f"tmp_obj_{os.getpid()}_{self._nonce}_{self._written}"

    def _create_temporary(self, directory: str) -> tuple[int, str | None]:
        """An open file for a new object in DIRECTORY, and its name (None: it has none,
        `_link_unnamed` gives it its name)."""
        if self.unnamed:
            try:
                return os.open(directory, os.O_WRONLY | O_TMPFILE, 0o444), None
            except IsADirectoryError:
                self.unnamed = False  # a kernel without O_TMPFILE reads it as O_DIRECTORY
            except OSError as error:
                if error.errno == errno.EPERM:
                    # Linux says this of a directory a concurrent prune is removing: made
                    # again if it went, else this object alone gets a named file.
                    if not os.path.isdir(directory):
                        raise FileNotFoundError(errno.ENOENT, "pruned", directory) from error
                elif error.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                    self.unnamed = False  # a file system without unnamed files
                else:
                    raise
        temporary = directory + os.sep + self._temporary_name()
        return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444), temporary

    def _link_unnamed(self, handle: int, final: str) -> bool:
        """Give the unnamed file HANDLE the name FINAL (through /proc, as an unprivileged
        process can); False, and named files from now on, where that cannot be done."""
        try:
            os.link(f"/proc/self/fd/{handle}", final, src_dir_fd=handle, follow_symlinks=True)
        except FileNotFoundError:
            if not os.path.isdir(os.path.dirname(final)):
                raise  # objects/xx/ pruned meanwhile: made again, and tried again
        except OSError as error:
            if error.errno not in UNLINKABLE:
                raise
        else:
            return True
        self.unnamed = False  # no /proc, or a file system that refuses it
        return False
