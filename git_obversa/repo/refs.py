"""Git's refs in the files backend: loose ref files, `packed-refs`, and HEAD.

`packed-refs` is a header line ("# pack-refs with: ..."), then "<id> <name>" lines, each
perhaps followed by "^<id>" (what an annotated tag peels to); `parse_packed_refs` is the
one reader of it. `head_commit` reads HEAD as git does for the plain layouts only, and
gives None for anything else (an unborn branch, a symbolic ref below HEAD, another ref
backend): the caller then asks git.
"""

import os

# Refs kept per worktree (in its own git directory) rather than in the common one.
_PER_WORKTREE = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")
_HEX = frozenset("0123456789abcdef")


def parse_packed_refs(content: bytes) -> dict[str, str]:
    """Ref name -> id, for every ref of the `packed-refs` text CONTENT."""
    refs = {}
    for line in content.split(b"\n"):
        if not line or line[:1] in (b"#", b"^"):
            continue
        value, _, name = line.partition(b" ")
        refs[name.decode("utf-8", "replace")] = value.decode("ascii", "replace")
    return refs


class PackedRefs:
    """The `packed-refs` file, parsed again only when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._refs: dict[str, str] = {}

    def refs(self) -> dict[str, str]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._refs = None, {}
            return self._refs
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if stamp != self._stamp:
            try:
                with open(self.path, "rb") as handle:
                    content = handle.read()
            except FileNotFoundError:
                content = b""
            self._stamp, self._refs = stamp, parse_packed_refs(content)
        return self._refs


class RefFiles:
    """The refs of one repository in the files backend: a loose file per ref under the
    common directory, then `packed-refs`. Ref names are checked by the caller."""

    def __init__(self, common_dir: str) -> None:
        self.common_dir = common_dir
        self._root = os.path.join(common_dir, "")
        self.packed = PackedRefs(os.path.join(common_dir, "packed-refs"))

    def path(self, ref: str) -> str:
        """Where the loose file of REF is."""
        return self._root + ref.replace("/", os.sep)

    def lock_path(self, ref: str) -> str:
        """Where git takes the lock for REF."""
        return self.path(ref) + ".lock"

    def read(self, ref: str) -> str | None:
        """What REF holds (an id, or "ref: <target>" for a symbolic ref), or None."""
        try:
            handle = os.open(self.path(ref), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return self.packed.refs().get(ref)
        try:
            value = os.read(handle, 4096)
        except IsADirectoryError:  # refs/a names a directory of refs: no ref a
            return self.packed.refs().get(ref)
        finally:
            os.close(handle)
        return value.split(b"\n", 1)[0].strip().decode("utf-8", "replace")

    def names(self, prefix: str) -> set[str]:
        """The names of the refs under PREFIX (ending in "/"), loose or packed."""
        found = {name for name in self.packed.refs() if name.startswith(prefix)}
        top = os.path.join(self.common_dir, *prefix.rstrip("/").split("/"))
        for directory, _, files in os.walk(top):
            relative = os.path.relpath(directory, self.common_dir).replace(os.sep, "/")
            found.update(f"{relative}/{name}" for name in files if is_ref_file_name(name))
        return found


# Characters git refuses in ref names: these, and every control character.
REFUSED_IN_REF_NAMES = frozenset(" ~^:?*[\\\x7f" + "".join(map(chr, range(32))))


def is_ref_file_name(name: str) -> bool:
    """Whether a file name under refs/ can be (the last part of) a ref: not a lock, not
    hidden, none of the characters git refuses in ref names."""
    return not (
        name.startswith(".")
        or name.endswith((".lock", "."))
        or not REFUSED_IN_REF_NAMES.isdisjoint(name)
    )


def merging(git_dir: str) -> bool:
    """Whether a merge is under way in the worktree of GIT_DIR (MERGE_HEAD exists)."""
    return os.path.exists(os.path.join(git_dir, "MERGE_HEAD"))


def head_commit(git_dir: str, common_dir: str) -> str | None:
    """The commit id HEAD names (a branch's, or the detached one), read as git reads it:
    the loose ref first, then `packed-refs`; None for anything else (an unborn branch, a
    symbolic ref below HEAD, a ref store other than files)."""
    try:
        head = read_text(os.path.join(git_dir, "HEAD"))
        if head is None:
            return None
        if head.startswith("ref: "):
            name = head[5:].strip()
            if not name.startswith("refs/") or ".." in name.split("/"):
                return None
            base = git_dir if name.startswith(_PER_WORKTREE) else common_dir
            head = read_text(os.path.join(base, name))
            if head is None:
                head = _packed(common_dir, name)
                if head is None:
                    return None
    except OSError:
        return None  # a ref that is a directory, or unreadable: git's to say
    sha = head.strip()
    return sha if len(sha) in (40, 64) and _HEX.issuperset(sha) else None


def read_text(location: str) -> str | None:
    """The text of the file at LOCATION, or None when there is no such file."""
    try:
        with open(location, "rb") as file:
            return file.read().decode("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError):
        return None


def ref_id(common_dir: str, name: str) -> str | None:
    """The id a shared ref NAME ("refs/notes/ai") holds, read as git reads it: the loose
    ref first, then `packed-refs`; None when there is none (or no files ref store)."""
    try:
        loose = read_text(os.path.join(common_dir, name))
        return loose.strip() if loose is not None else _packed(common_dir, name)
    except OSError:
        return None


def _packed(common_dir: str, name: str) -> str | None:
    """The id `packed-refs` gives the ref NAME, or None."""
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as file:
            data = file.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return parse_packed_refs(data).get(name)
