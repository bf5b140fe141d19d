"""Installing the commit hooks where this repository's hooks run.

`install` writes the shims into `git rev-parse --git-path hooks` (which honours
`core.hooksPath`; hooks there run in every linked worktree too). A hook already in
place is moved aside to `<name>.pre-obversa`, and the shim runs it first with the same
arguments — a failing `prepare-commit-msg` still stops the commit. Installing again only
refreshes the shims. `uninstall` removes them and moves the kept hook back.

The shims are shell files in `shims/` beside this module; `install` fills the marked
region of each with the names it shares with Python (`shim_text`).

`install(pre_push=True)` (what `install --sync` asks for) adds a `pre-push` shim: a push
to a remote marked `remote.<name>.obversaSync` first runs `git obversa memory sync` with
it, so memory is fetched, merged and pushed as that command does, and the shim always
exits 0 after that, so the user's push goes on (or fails) exactly as git decides.
"""

from __future__ import annotations

import os
from pathlib import Path

from git_obversa.attribution import AGENT_TRACE_REF, GIT_AI_REF
from git_obversa.hooks.commit import (
    ATTRIBUTE_HOOK,
    ATTRIBUTE_MARKER,
    ATTRIBUTION_CONFIG,
    PICKED_MARKER,
    REPLAY_STATE,
)
from git_obversa.record.composition import COMPOSING_MODULES, CONFIG_PATTERN
from git_obversa.record.kept import RECORDS_REF
from git_obversa.record.pending import COMPOSED_PLAIN
from git_obversa.repo import git

MARKER = "# git-obversa hook shim"
KEPT_SUFFIX = ".pre-obversa"

# Written beside the shims by `install`: the interpreter and the directory that holds
# the git_obversa package, so a shim starts the hook as `python -I -S`: no `site`, no
# console script, no argparse.
RUNTIME_FILE = "obversa-runtime"
LEAN_ENTRY = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from git_obversa.hooks.commit import main; sys.exit(main(sys.argv[2:]))"
)

# The shims are shell files beside this module (package data), in the manner of
# pre-commit's hook template: `install` fills the region between these two lines with
# the values below, so each name the shell uses has its one home in Python.
SHIM_DIRECTORY = Path(__file__).parent / "shims"
TEMPLATE_START = "# start templated\n"
TEMPLATE_END = "# end templated\n"
COMMIT_HOOKS = ("prepare-commit-msg", "commit-msg", "post-commit", "post-rewrite")
# Installed only when asked (`install --sync`), removed by every uninstall.
SYNC_HOOKS = ("pre-push",)


def shim_text(name: str) -> str:
    """The hook NAME as `install` writes it: its template with the region filled."""
    if name in COMMIT_HOOKS:
        template = "commit-hook.sh"
        values = {
            "hook": name,
            "kept_suffix": KEPT_SUFFIX,
            "runtime": RUNTIME_FILE,
            "lean_entry": LEAN_ENTRY,
            "composed_plain": COMPOSED_PLAIN,
            "composing_modules": " ".join(COMPOSING_MODULES),
            "replay_state": " ".join(REPLAY_STATE),
            "config_pattern": CONFIG_PATTERN,
            "records_ref": RECORDS_REF,
            "attribute_marker": ATTRIBUTE_MARKER,
            "attribute_hook": ATTRIBUTE_HOOK,
            "picked_marker": PICKED_MARKER,
            "attribution_config": ATTRIBUTION_CONFIG,
            "notes_refs": f"{GIT_AI_REF} {AGENT_TRACE_REF}",
        }
    elif name in SYNC_HOOKS:
        template, values = "pre-push.sh", {"kept_suffix": KEPT_SUFFIX}
    else:
        raise ValueError(f"no shim for the hook {name!r}")
    return fill_template((SHIM_DIRECTORY / template).read_text(encoding="utf-8"), values)


def fill_template(text: str, values: dict[str, str]) -> str:
    """TEXT with each `name=` line of its templated region set to VALUES[name], quoted
    for sh; the region must name exactly the keys of VALUES."""
    import shlex

    head, rest = text.split(TEMPLATE_START, 1)
    region, tail = rest.split(TEMPLATE_END, 1)
    names = [line.removesuffix("=") for line in region.splitlines()]
    if sorted(names) != sorted(values):
        raise ValueError(f"the template's region names {names}, not {sorted(values)}")
    filled = "".join(f"{name}={shlex.quote(values[name])}\n" for name in names)
    return head + TEMPLATE_START + filled + TEMPLATE_END + tail


class InstallError(Exception):
    """The hooks cannot be (un)installed as asked; the message says what to do."""


def hooks_dir(cwd: str | os.PathLike[str] | None = None) -> Path:
    """Where git runs this repository's hooks from (`core.hooksPath` if set)."""
    # A relative core.hooksPath is relative to the top of the worktree, where hooks run:
    # asked with --show-toplevel, rev-parse resolves it from there (a bare repository
    # has no top: asked alone).
    args = ["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-path", "hooks"]
    found = git.run(args, cwd, check=False)
    lines = found.stdout.splitlines()
    if found.returncode == 0 and len(lines) == 2:
        return Path(lines[1])
    return git.git_path("hooks", cwd)


def is_shim(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return False


def installed(cwd: str | os.PathLike[str] | None = None) -> bool:
    """Whether a commit here runs the reasoning hook: the shim, or the pre-commit
    framework's commit-msg hook with the obversa-reasoning hook id configured."""
    if is_shim(hooks_dir(cwd) / "prepare-commit-msg"):
        return True
    hook = hooks_dir(cwd) / "commit-msg"
    try:
        if "pre-commit" not in hook.read_text(encoding="utf-8", errors="replace"):
            return False
        top = git.output(["rev-parse", "--show-toplevel"], cwd).strip()
        config = Path(top, ".pre-commit-config.yaml").read_text(encoding="utf-8", errors="replace")
    except (OSError, git.GitError):
        return False
    return "obversa-reasoning" in config


def install(cwd: str | os.PathLike[str] | None = None, *, pre_push: bool = False) -> dict:
    """Install the shims (and with PRE_PUSH the memory-sync `pre-push` shim); returns
    {"hooks_dir", "hooks": [{"name", "action", "kept"}]}."""
    directory = hooks_dir(cwd)
    shims = {name: shim_text(name) for name in COMMIT_HOOKS + (SYNC_HOOKS if pre_push else ())}
    for name in shims:
        hook, kept = directory / name, directory / (name + KEPT_SUFFIX)
        # lexists: a symlink counts even when it points nowhere; it is never overwritten.
        if os.path.lexists(hook) and not is_shim(hook) and os.path.lexists(kept):
            raise InstallError(
                f"{hook} is not git-obversa's and {kept.name} is taken by an earlier hook; "
                "move one of them away and run install again"
            )
    directory.mkdir(parents=True, exist_ok=True)
    report = []
    for name, text in shims.items():
        hook, kept = directory / name, directory / (name + KEPT_SUFFIX)
        if not is_shim(hook):
            action = "installed"
            if os.path.lexists(hook):
                os.replace(hook, kept)
        elif hook.read_text(encoding="utf-8") == text and os.access(hook, os.X_OK):
            action = "unchanged"
        else:
            action = "updated"
        if action != "unchanged":
            _write_executable(hook, text)
        report.append({"name": name, "action": action, "kept": os.path.lexists(kept)})
    _write_runtime(directory / RUNTIME_FILE)
    return {"hooks_dir": str(directory), "hooks": report}


def uninstall(cwd: str | os.PathLike[str] | None = None) -> dict:
    """Remove the shims and restore kept hooks; same report shape as `install`."""
    directory = hooks_dir(cwd)
    report = []
    for name in COMMIT_HOOKS + SYNC_HOOKS:
        hook, kept = directory / name, directory / (name + KEPT_SUFFIX)
        if name in SYNC_HOOKS and not is_shim(hook):
            continue  # only ever installed with --sync: nothing to say about it
        if not is_shim(hook):
            action = "not git-obversa's, left alone" if os.path.lexists(hook) else "not installed"
        elif os.path.lexists(kept):
            os.replace(kept, hook)
            action = "restored"
        else:
            hook.unlink()
            action = "removed"
        report.append({"name": name, "action": action, "kept": False})
    if not any(is_shim(directory / name) for name in COMMIT_HOOKS):
        (directory / RUNTIME_FILE).unlink(missing_ok=True)
    return {"hooks_dir": str(directory), "hooks": report}


def _write_runtime(path: Path) -> None:
    """The interpreter running this install and the directory its git_obversa comes
    from: what the shims start. Rewritten by every install (an upgrade, a new venv)."""
    import sys

    import git_obversa

    package = Path(git_obversa.__file__).resolve().parent.parent
    text = f"{sys.executable}\n{package}\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _write_executable(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(0o755)
    os.replace(temporary, path)
