"""A read-only Markdown corpus with passage search (SPEC.md §5).

`open_markdown_corpus(directory)` opens a directory of your own `.md` files;
`open_markdown_corpus(repository=..., rev="HEAD", directory="docs")` opens the same kind of
corpus straight from a Git tree, without a checkout. Either gives `.memory` (the port, `view`
only) and `.search(query, limit=20)`.

Visible names follow the memory path rules: a name that starts with `.` or does not match the
segment pattern is skipped, and so is everything below it. Symbolic links are never followed
(a view that would cross one is `UNSAFE_STORAGE`). Search splits each file into passages
(paragraphs, and headings on their own), scores each passage against the query's tokens and
orders hits exactly as the original does. With `index=True` (the default) an on-disk index
(`index/`) narrows the passages to score; the hits are the same as a full scan's.
"""

from __future__ import annotations

import gc
import hashlib
import os
import stat
from array import array
from collections.abc import Callable, Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any

from git_obversa.corpus.passages import CorpusFile, passages, rank, tokens
from git_obversa.memory import engine
from git_obversa.memory.paths import are_markdown_names, is_segment, validate_path
from git_obversa.memory.port import (
    COMMANDS,
    MAX_PATH_BYTES,
    MEMORY_ROOT,
    MemoryFailure,
    MemoryLimits,
    command_name,
    failure,
    is_safe_integer,
    normalize_command,
    success,
)

DEFAULT_LIMIT = 20
BY_NAME = attrgetter("name")
REGULAR_MODES = ("100644", "100755")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")  # as Node's readFile(path, "utf8") does


def visible(name: str) -> bool:
    return not name.startswith(".") and is_segment(name)


# Names already judged by `visible`: a warm indexed search lists every name of the corpus
# on each query. Bounded: cleared when full.
_judged: dict[str, bool] = {}
JUDGED_NAMES = 1 << 16


def _visible(name: str) -> bool:
    judged = _judged.get(name)
    if judged is None:
        if len(_judged) >= JUDGED_NAMES:
            _judged.clear()
        judged = _judged[name] = visible(name)
    return judged


def visible_markdown(names: list[str]) -> bool:
    """Whether every one of NAMES is `visible` and ends in ".md" (`paths.are_markdown_names`,
    remembered for the directories judged lately)."""
    joined = "/".join(names)
    judged = _judged_directories.get(joined)
    if judged is None:
        if len(_judged_directories) >= JUDGED_DIRECTORIES:
            _judged_directories.clear()
        judged = _judged_directories[joined] = are_markdown_names(names)
    return judged


# Directories' names (joined by "/") already judged by `visible_markdown`; bounded.
_judged_directories: dict[str, bool] = {}
JUDGED_DIRECTORIES = 1024


def corpus_path(segments: list[str]) -> str:
    path = MEMORY_ROOT + "/" + "/".join(segments)
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise TypeError(f"Corpus path exceeds {MAX_PATH_BYTES} bytes: {'/'.join(segments)}")
    return path


def _listing(directory: int) -> list[tuple[os.DirEntry, str]]:
    """The visible children of the open DIRECTORY that a corpus holds, by name, with their
    kind: directories and `.md` regular files; symbolic links are neither."""
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=BY_NAME)
    found = []
    for entry in entries:
        if not _visible(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            found.append((entry, "directory"))
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(".md"):
            found.append((entry, "file"))
    return found


def _open_below(root: int, segments: list[str], path: str) -> tuple[int, os.stat_result]:
    """SEGMENTS opened one name at a time from the directory ROOT, never through a symbolic
    link (not even one that replaces a name meanwhile): a descriptor and its status.

    A link is `UNSAFE_STORAGE`; a missing name, or one below a file, raises OSError.
    Only a directory or a regular file is opened (non-blocking: a FIFO swapped in cannot
    hang the read); anything else is `NOT_FOUND`.
    """
    current = os.dup(root)
    try:
        for index, segment in enumerate(segments):
            info = os.stat(segment, dir_fd=current, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise MemoryFailure(
                    "UNSAFE_STORAGE", "The corpus path crosses a symbolic link.", path
                )
            if stat.S_ISDIR(info.st_mode):
                flags = os.O_DIRECTORY
            elif stat.S_ISREG(info.st_mode) and index == len(segments) - 1:
                flags = os.O_NONBLOCK
            else:
                raise NotADirectoryError(path)
            inner = os.open(segment, os.O_RDONLY | os.O_NOFOLLOW | flags, dir_fd=current)
            os.close(current)
            current = inner
        return current, os.fstat(current)
    except BaseException:
        os.close(current)
        raise


def _read_all(descriptor: int) -> str:
    with open(descriptor, "rb") as handle:  # closes DESCRIPTOR
        return decode(handle.read())


class DirectorySource:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # What the last listing walked: its directories, in order, and how many files;
        # and what it found (runs of names, numbers) with the digest made of it.
        self._walked: list[str] = []
        self._files = 0
        self._last: tuple[list[tuple[str, list[str]]], array, str] | None = None

    def describe(self) -> str:
        return str(self.directory)

    def root(self) -> int:
        """The root directory, opened (the caller closes it); it may itself be a symlink."""
        root = os.path.realpath(self.directory)
        if not os.path.isdir(root):
            raise TypeError(f"{self.directory} is not a directory.")
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY)

    def files(self) -> list[CorpusFile]:
        return self.listing()[1]()

    def listing(self) -> tuple[str, Callable[[], list[CorpusFile]]]:
        """(a digest of every file's path and identity, a function giving the files). A
        warm indexed search is mostly this walk, and needs only the digest: it takes the
        `stat` numbers as they come, and the files are made only when asked for."""
        return self.listing_beside(None)[:2]

    def listing_beside(
        self, beside: Callable[[], Any] | None
    ) -> tuple[str, Callable[[], list[CorpusFile]], Any]:
        """`listing()`, and what BESIDE returns, called while the files are statted (by a
        helper process, `statwalk.py`, in a long-lived process walking a large corpus)."""
        from git_obversa.corpus import statwalk

        # Directories are walked by descriptor: each `stat` resolves one name, not a path.
        # The cyclic garbage collector waits meanwhile: BESIDE's query leaves large young
        # sets (its terms' passages, kept), which every collection in the walk would trace
        # again; after it, they are traced once.
        root = self.root()
        collecting = gc.isenabled()
        gc.disable()
        try:
            known = self._walked if self._files >= statwalk.SHARE_FROM else None
            runs, numbers, answer, self._walked = statwalk.walk(
                os.path.realpath(self.directory), root, _visible, visible_markdown, known, beside
            )
        finally:
            if collecting:
                gc.enable()
            os.close(root)
        self._files = len(numbers) // statwalk.FIELDS
        top = f"{MEMORY_ROOT}/"

        def files() -> list[CorpusFile]:
            paths = [top + prefix + name for prefix, names in runs for name in names]
            fields = statwalk.FIELDS
            sizes, mtimes, inodes = numbers[1::fields], numbers[2::fields], numbers[3::fields]
            return [
                CorpusFile(path, path, f"{size}:{mtime}:{inode}")
                for path, size, mtime, inode in zip(paths, sizes, mtimes, inodes, strict=True)
            ]

        last = self._last
        if last is not None and last[1] == numbers and last[0] == runs:
            # The walk found what the last one did, so its digest is the last one's.
            return last[2], files, answer
        for prefix, names in runs:
            # Visible names are ASCII, so characters are bytes here.
            if len(top) + len(prefix) + max(map(len, names)) > MAX_PATH_BYTES:
                for name in names:
                    corpus_path(f"{prefix}{name}".split("/"))  # raises for the first too long
        # The digest of every path (one per line) and the numbers, the paths joined a run
        # at a time: a warm search needs no string per file.
        lines = [top + prefix + f"\n{top}{prefix}".join(names) for prefix, names in runs]
        digest = hashlib.sha256("\n".join(lines).encode())
        digest.update(numbers)
        listing = f"stat:{digest.hexdigest()}"
        self._last = runs, numbers, listing
        return listing, files, answer

    def read(self, files: list[CorpusFile]) -> list[str]:
        """The texts of FILES. One that went away or stopped being a regular file since it
        was listed reads as empty (no passage), as a listing made now would leave it out."""
        root = self.root()
        texts = []
        try:
            for file in files:
                segments = file.key[len(MEMORY_ROOT) + 1 :].split("/")
                try:
                    descriptor, info = _open_below(root, segments, file.path)
                except (MemoryFailure, FileNotFoundError, NotADirectoryError):
                    texts.append("")
                    continue
                if not stat.S_ISREG(info.st_mode):
                    os.close(descriptor)
                    texts.append("")
                    continue
                texts.append(_read_all(descriptor))
        finally:
            os.close(root)
        return texts

    def lookup(self, path: str, segments: list[str]) -> tuple[str, Any]:
        """("directory", [(name, kind)]) or ("file", text) for a validated memory path."""
        root = self.root()
        try:
            descriptor, info = _open_below(root, segments, path)
        finally:
            os.close(root)
        if stat.S_ISDIR(info.st_mode):
            try:
                return "directory", [(entry.name, kind) for entry, kind in _listing(descriptor)]
            finally:
                os.close(descriptor)
        if not stat.S_ISREG(info.st_mode) or not path.endswith(".md"):
            os.close(descriptor)
            raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
        return "file", _read_all(descriptor)


class GitTreeSource:
    """A directory of a Git tree, read with git plumbing; no checkout, no index, no HEAD change."""

    def __init__(self, repository: Path, rev: str, directory: str) -> None:
        self.repository, self.rev, self.directory = repository, rev, directory
        self._entries: dict[str, tuple[str, str, str]] | None = None
        # The directory's tree id identifies the whole corpus: an index that holds it
        # answers without listing anything. Two processes side by side find it and
        # where the index lives; a failure is explained by the path below.
        if "\n" not in rev and "\n" not in directory:
            from git_obversa.repo.git import GitError, isolated_environment, start

            spec = f"{rev}^{{tree}}:{directory}" if directory else f"{rev}^{{tree}}"
            env = isolated_environment()
            try:
                common = start(
                    ["rev-parse", "--path-format=absolute", "--git-common-dir"], repository, env=env
                )
                check = start(["cat-file", "--batch-check"], repository, stdin=True, env=env)
            except GitError:
                pass
            else:
                answer = check.communicate((spec + "\n").encode())[0].decode().split()
                located = common.communicate()[0].decode("utf-8", "surrogateescape").strip()
                if common.returncode == 0 and len(answer) == 3 and answer[1] == "tree":
                    self.common_dir, self.tree = Path(located), answer[0]
                    return
        self._explain(repository, rev, directory)

    def _explain(self, repository: Path, rev: str, directory: str) -> None:
        """Find the tree one step at a time, so that a failure says which step failed."""
        from git_obversa.repo.git import GitError

        try:
            common = self._git(["rev-parse", "--path-format=absolute", "--git-common-dir"])
            root = self._git(["rev-parse", "--verify", "--end-of-options", f"{rev}^{{tree}}"])
        except GitError as error:
            raise ValueError(f"{rev!r} does not name a tree in {repository}: {error}") from None
        self.common_dir = Path(common.strip())
        root = root.strip()
        spec = f"{root}:{directory}" if directory else root
        answer = self._git(["cat-file", "--batch-check"], input=spec + "\n").split()
        if len(answer) < 2 or answer[1] != "tree":
            raise TypeError(f"{directory or '/'} is not a directory in {rev}.")
        self.tree = answer[0]

    def _git(self, args: list[str], input: Any = None) -> Any:
        from git_obversa.repo.git import run

        return run(args, self.repository, input=input, isolated=True).stdout

    def describe(self) -> str:
        return f"{self.repository}@{self.rev}:{self.directory}"

    def entries(self) -> dict[str, tuple[str, str, str]]:
        """relative path -> (mode, type, object id), every entry of the tree, cached."""
        if self._entries is None:
            listing = self._git(["ls-tree", "-r", "-t", "-z", self.tree], input=b"")
            entries = {}
            for record in listing.split(b"\0"):
                if record:
                    meta, _, name = record.partition(b"\t")
                    mode, kind, oid = meta.decode().split()
                    entries[name.decode("utf-8", "surrogateescape")] = (mode, kind, oid)
            self._entries = entries
        return self._entries

    def files(self) -> list[CorpusFile]:
        found = []
        for relative, (mode, _, oid) in sorted(self.entries().items()):
            segments = relative.split("/")
            if (
                mode in REGULAR_MODES
                and relative.endswith(".md")
                and all(visible(segment) for segment in segments)
            ):
                found.append(CorpusFile(corpus_path(segments), oid, oid))
        return found

    def listing(self) -> tuple[str, Callable[[], list[CorpusFile]]]:
        """(a digest of every file's path and blob id, a function giving the files)."""
        files = self.files()
        listing = "\n".join(f"{file.path}\0{file.identity}" for file in files)
        digest = hashlib.sha256(listing.encode("utf-8", "surrogateescape")).hexdigest()
        return f"git:{digest}", lambda: files

    def read(self, files: list[CorpusFile]) -> list[str]:
        if not files:
            return []
        request = "".join(f"{file.key}\n" for file in files).encode()
        from git_obversa.repo.git import batch_records

        data = self._git(["cat-file", "--batch"], input=request)
        texts = []
        for file, (header, content) in zip(files, batch_records(data), strict=True):
            if len(header) != 3:  # "<oid> missing": a partial clone, or a damaged repository
                raise OSError(
                    f"{file.path}: Git object {file.key} is missing from {self.repository}; "
                    "fetch it (or check out the files) and search again"
                )
            texts.append(decode(content))
        return texts

    def lookup(self, path: str, segments: list[str]) -> tuple[str, Any]:
        entries = self.entries()
        mode, kind, relative = "040000", "tree", ""
        for index, segment in enumerate(segments):
            relative = f"{relative}/{segment}" if relative else segment
            if relative not in entries:
                raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
            mode, kind, oid = entries[relative]
            if mode == "120000":
                raise MemoryFailure(
                    "UNSAFE_STORAGE", "The corpus path crosses a symbolic link.", path
                )
            if kind != "tree" and index < len(segments) - 1:
                raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
        if kind == "tree":
            prefix = f"{relative}/" if relative else ""
            children = []
            for name_path, (child_mode, child_kind, _) in sorted(entries.items()):
                name = name_path[len(prefix) :]
                if not name_path.startswith(prefix) or "/" in name or not visible(name):
                    continue
                if child_kind == "tree":
                    children.append((name, "directory"))
                elif child_mode in REGULAR_MODES and name.endswith(".md"):
                    children.append((name, "file"))
            return "directory", children
        if mode not in REGULAR_MODES or not relative.endswith(".md"):
            raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
        return "file", self.read([CorpusFile(path, oid, oid)])[0]


class _OneFile:
    """A snapshot holding one file, so the engine's view semantics apply unchanged."""

    clock = 0

    def __init__(self, path: str, text: str) -> None:
        self.text = text
        self.entries = {path: engine.Entry(len(text.encode("utf-8", "replace")), 0)}

    def read(self, path: str) -> str:
        return self.text


class CorpusMemory:
    """The port over a corpus: `view` works, every write is refused."""

    def __init__(self, source: DirectorySource | GitTreeSource) -> None:
        self.source = source
        self.scope = f"memory-markdown:{source.describe()}"

    def execute(self, command: Any) -> dict[str, Any]:
        name = command_name(command)
        if not isinstance(command, Mapping) or name not in COMMANDS:
            return failure(
                command, MemoryFailure("INVALID_COMMAND", "The memory command is not supported.")
            )
        if name != "view":
            return failure(
                command, MemoryFailure("INVALID_COMMAND", "The markdown corpus is read-only.")
            )
        path = command.get("path")
        try:
            validate_path(path)
            return self._view(normalize_command(command))
        except MemoryFailure as error:
            return failure(command, error)
        except (FileNotFoundError, NotADirectoryError):
            error = MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
            return failure(command, error)
        except Exception as error:
            message = str(error) or "The markdown corpus could not be read."
            return failure(command, MemoryFailure("STORAGE_ERROR", message, path))

    def _view(self, command: dict[str, Any]) -> dict[str, Any]:
        path = command["path"]
        segments = [] if path == MEMORY_ROOT else path[len(MEMORY_ROOT) + 1 :].split("/")
        kind, found = self.source.lookup(path, segments)
        if kind == "file":
            result, _ = engine.execute(_OneFile(path, found), command, MemoryLimits())
            return result
        if command.get("view_range") is not None:
            raise MemoryFailure("INVALID_RANGE", "A directory view cannot have a line range.", path)
        prefix = MEMORY_ROOT if path == MEMORY_ROOT else path
        entries = [{"name": n, "path": f"{prefix}/{n}", "kind": k} for n, k in found]
        return success("view", {"kind": "directory", "path": path, "entries": entries})


class MarkdownCorpus:
    def __init__(self, source: DirectorySource | GitTreeSource, index: bool) -> None:
        self.source = source
        self.memory = CorpusMemory(source)
        self.index = index

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[dict[str, Any]]:
        """The best passages for QUERY: `[{"path", "passage": {start_line, end_line, text},
        "score"}]`, exact phrase first, then more matched terms, more occurrences, path, line."""
        if not isinstance(query, str):
            raise TypeError("query must be a string.")
        query_tokens = tokens(query)
        if not query_tokens:
            return []
        if not is_safe_integer(limit, minimum=1):
            raise TypeError("limit must be a positive safe integer.")
        candidates = self._indexed(query_tokens, limit) if self.index else None
        if candidates is None:
            candidates = self._all_passages(self.source.files())
        ranked = []
        for path, start, end, text, words in candidates:
            scored = rank(query_tokens, words)
            if scored is not None:
                exact, matched, frequency = scored
                ranked.append(((-exact, -matched, -frequency, path, start), end, text))
        ranked.sort(key=lambda item: item[0])
        return [
            {
                "path": key[3],
                "passage": {"start_line": key[4], "end_line": end, "text": text},
                "score": -key[0] * 1_000_000_000 - key[1] * 1_000_000 - key[2],
            }
            for key, end, text in ranked[:limit]
        ]

    def _all_passages(self, files: list[CorpusFile]):
        for file, text in zip(files, self.source.read(files), strict=True):
            for start, end, passage in passages(text):
                yield file.path, start, end, passage, " ".join(tokens(passage))

    def _indexed(self, query_tokens: list[str], limit: int):
        from git_obversa.corpus import index

        return index.candidates(self.source, query_tokens, limit)


def open_markdown_corpus(
    directory: str | os.PathLike[str] | None = None,
    *,
    repository: str | os.PathLike[str] | None = None,
    rev: str = "HEAD",
    index: bool = True,
) -> MarkdownCorpus:
    """Open DIRECTORY as a read-only corpus, or DIRECTORY (default: the root) of REV's tree
    in REPOSITORY. `index=False` scans every file on each search instead of using the index."""
    if repository is not None:
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise TypeError("directory must be a string.")
        inner = str(directory or "").strip("/")
        source: DirectorySource | GitTreeSource = GitTreeSource(
            Path(repository).resolve(), rev, inner
        )
        return MarkdownCorpus(source, index)
    if not isinstance(directory, (str, os.PathLike)) or not str(directory).strip():
        raise TypeError("directory must be a non-empty string.")
    return MarkdownCorpus(DirectorySource(Path(os.path.abspath(directory))), index)
