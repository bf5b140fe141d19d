"""Where a repository is, read from the file system as git finds it.

`located` reads the plain layouts only: a working tree with a `.git` directory, or a
`.git` file naming its git directory (a linked worktree, a submodule). Anything else
(variables that move the repository, a bare or unowned repository, a file system
boundary on the way up) gives None, and the caller asks git. What it cannot see is the
configuration (`core.worktree`, `core.bare`, `extensions.refStorage` relocate or replace
what is read): the caller checks those in the `git config` output it reads anyway
(`moved_by`).
"""

import os

from git_obversa.repo.refs import read_text

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
            pointer = read_text(git_dir)
            if pointer is None or not pointer.startswith("gitdir: "):
                return None
            git_dir = os.path.normpath(os.path.join(top, pointer[8:].strip()))
        common = read_text(os.path.join(git_dir, "commondir"))
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
