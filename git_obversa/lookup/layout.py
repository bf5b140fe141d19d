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

Imports only `os`: `bin/git-obversa` loads this before anything else of the package.
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
