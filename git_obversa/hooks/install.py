"""Installing the commit hooks where this repository's hooks run.

`install` writes the three shims into `git rev-parse --git-path hooks` (which honours
`core.hooksPath`; hooks there run in every linked worktree too). A hook already in
place is moved aside to `<name>.pre-obversa`, and the shim runs it first with the same
arguments — a failing `prepare-commit-msg` still stops the commit. Installing again only
refreshes the shims. `uninstall` removes them and moves the kept hook back.

The shim text lives here, once; `hooks/` in the source tree holds the same scripts for
people who point `core.hooksPath` at it or copy them by hand.

`install(pre_push=True)` (what `install --sync` asks for) adds a `pre-push` shim: a push
to a remote marked `remote.<name>.obversaSync` first runs `git obversa memory sync` with
it, so memory is fetched, merged and pushed as that command does, and the shim always
exits 0 after that, so the user's push goes on (or fails) exactly as git decides.
"""

from __future__ import annotations

import os
from pathlib import Path

from git_obversa.hooks.commit import REPLAY_STATE
from git_obversa.record.composition import COMPOSING_MODULES, CONFIG_PATTERN
from git_obversa.record.pending import COMPOSED_PLAIN
from git_obversa.repo import git

MARKER = "# git-obversa hook shim"
KEPT_SUFFIX = ".pre-obversa"

_RUN_KEPT = f"""\
if [ -x "$0{KEPT_SUFFIX}" ]; then
\t"$0{KEPT_SUFFIX}" "$@"{{status}}
fi
# This worktree's own git dir, without starting git when possible: git exports GIT_DIR
# to the hooks of linked worktrees, and runs hooks at the top of the worktree.
if [ -n "$GIT_DIR" ]; then
\tgitdir=$GIT_DIR
elif [ -d .git ]; then
\tgitdir=.git
else
\tgitdir=$(git rev-parse --git-dir) || exit 0
fi
store=$gitdir/obversa/record
"""

# Written beside the shims by `install`: the interpreter and the directory that holds
# the git_obversa package, so a shim starts the hook as `python -I -S` — no `site`, no
# console script, no argparse: one small process start (docs/benchmarks.md).
RUNTIME_FILE = "obversa-runtime"
LEAN_ENTRY = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from git_obversa.hooks.commit import main; sys.exit(main(sys.argv[2:]))"
)

# Runs the hook (the lean way when the runtime file names a working interpreter, else
# `git-obversa hook NAME ARGS...`) and fails open: whatever keeps it from working
# (not on PATH, a stale virtual environment whose interpreter is gone) lets the commit
# proceed with one warning line, unless obversa.strict is set.
_RUN_OBVERSA = f"""\
python= package=
[ ! -r "${{0%/*}}/{RUNTIME_FILE}" ] || {{
\tIFS= read -r python
\tIFS= read -r package
}} < "${{0%/*}}/{RUNTIME_FILE}"
if [ -x "$python" ] && [ -d "$package/git_obversa" ]; then
\t"$python" -I -S -c '{LEAN_ENTRY}' "$package" "$gitdir" "$@"
\tstatus=$?
\t[ "$status" -ne 0 ] || exit 0
\twhat="git-obversa could not start (exit $status)"
elif obversa=$(command -v git-obversa); then
\tIFS= read -r shebang < "$obversa" || shebang=
\tcase $shebang in
\t"#!"*) interpreter=${{shebang#??}} interpreter=${{interpreter# }} ;;
\t*) interpreter=/bin/sh ;;
\tesac
\tinterpreter=${{interpreter%% *}}
\tif [ ! -x "$interpreter" ]; then
\t\tstatus=127
\t\twhat="git-obversa cannot start: its interpreter $interpreter is gone"
\telse
\t\t"$obversa" hook "$@"
\t\tstatus=$?
\t\t[ "$status" -ne 0 ] || exit 0
\t\twhat="git-obversa could not start (exit $status)"
\tfi
else
\tstatus=127
\twhat="git-obversa is not on PATH"
fi
if [ "$(git config --type=bool obversa.strict)" = true ]; then
\t# Exit 1 is git-obversa's own refusal, already said in one line.
\t[ "$status" -eq 1 ] || echo "git obversa hook $1: $what (obversa.strict is set)" >&2
\texit 1
fi
echo "warning: $what; the commit proceeds without reasoning" >&2
exit 0
"""

# A plain message (`-m`, `-F`) and turns composed ahead (`composed.plain`, written by
# `git_obversa.record.composition.compose_ahead`; whatever changes the turns removes it first):
# the Why: block and trailers go in right here, as `insert_reasoning` of
# record/message.py puts them into a message that has neither yet: after the user's
# text, above a closing trailer paragraph (git's rule). Anything else (a comment line,
# `Why:`, an `Obversa-Record` line, other line breaks, a changed setting or package, a
# replay) returns 1, and Python does it.
_WRITE_COMPOSED = """\
nl='
'
lines_into() { # COUNT NAME: that many lines of stdin, each with its newline, into NAME
	text= counted=0
	while [ "$counted" -lt "$1" ]; do
		IFS= read -r line || return 1
		text=$text$line$nl counted=$((counted + 1))
	done
	eval "$2=\\$text"
}
write_composed() {
	[ "$2" = message ] && [ -s "$store/turns.jsonl" ] && [ ! -e "$store/claimed.jsonl" ] &&
		[ -r "$store/@PLAIN@" ] && [ -r "${0%/*}/@RUNTIME@" ] || return 1
	for state in @REPLAY@; do
		[ ! -e "$gitdir/$state" ] || return 1
	done
	{ IFS= read -r python && IFS= read -r package; } < "${0%/*}/@RUNTIME@" || return 1
	{
		IFS= read -r id && IFS= read -r composed_package && IFS= read -r char &&
			IFS= read -r settings_count && IFS= read -r why_count && IFS= read -r added_count &&
			case $settings_count.$why_count.$added_count in
			*[!0123456789.]* | .* | *..* | *.) false ;;
			esac &&
			lines_into "$settings_count" settings && lines_into "$why_count" why &&
			lines_into "$added_count" added
	} < "$store/@PLAIN@" || return 1
	[ "$composed_package" = "$package" ] || return 1
	for module in @MODULES@; do
		[ ! "$package/git_obversa/$module" -nt "$store/@PLAIN@" ] || return 1
	done
	config=$(git config --get-regexp '@PATTERN@')
	[ "${config:+$config$nl}" = "$settings" ] || return 1
	breaks=$(printf '\\r\\013\\014\\034\\035\\036_\\302\\205_\\342\\200\\250_\\342\\200\\251')
	control=${breaks%%_*} breaks=${breaks#*_} nel=${breaks%%_*} breaks=${breaks#*_}
	ls=${breaks%_*} ps=${breaks#*_}
	count=0 last=0 start=1
	while IFS= read -r line || [ -n "$line" ]; do
		count=$((count + 1))
		case $line in
		"$char"* | *[$control]* | *"$nel"* | *"$ls"* | *"$ps"* | Why: | *Obversa-Record*)
			return 1 ;;
		*[!' \t']*)
			case $line in
			*[ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789]*) ;;
			*) return 1 ;; # blank or not, by Python's rule? Python decides
			esac
			[ "$last" -eq $((count - 1)) ] || start=$count
			last=$count kind=text ;;
		*) kind=blank ;;
		esac
		[ "$count" -le 200 ] || return 1
		eval "line$count=\\$line kind$count=\\$kind"
	done < "$1"
	[ "$last" -gt 0 ] || return 1
	end=$last trailers=0 others=0 generated= above=other number=$start
	while [ "$start" -gt 1 ] && [ "$number" -le "$last" ]; do
		eval "line=\\$line$number"
		case $line in
		"Signed-off-by: "* | "(cherry picked from commit "*)
			trailers=$((trailers + 1)) generated=1 above=trailer ;;
		[' \t']*) [ "$above" = trailer ] || others=$((others + 1)) ;;
		*:*)
			token=${line%%:*}
			while :; do case $token in *[' \t']) token=${token%?} ;; *) break ;; esac; done
			case $token in
			'' | *[!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-]*)
				others=$((others + 1)) above=other ;;
			*) trailers=$((trailers + 1)) above=trailer ;;
			esac ;;
		*) others=$((others + 1)) above=other ;;
		esac
		number=$((number + 1))
	done
	if [ "$trailers" -gt 0 ] && { [ "$others" -eq 0 ] ||
		{ [ -n "$generated" ] && [ $((trailers * 3)) -ge "$others" ]; }; }; then
		end=$((start - 1))
		while [ "$end" -gt 0 ] && eval "[ \\"\\$kind$end\\" = blank ]"; do end=$((end - 1)); done
	else
		start=$((last + 1))
	fi
	out= number=1
	while [ "$number" -le "$end" ]; do
		eval "out=\\$out\\$line$number\\$nl" number=$((number + 1))
	done
	out=$out$why number=$start
	while [ "$number" -le "$last" ]; do
		eval "out=\\$out\\$line$number\\$nl" number=$((number + 1))
	done
	# Claimed first, as in Python. A change of the turns since composed.plain was read
	# removed it first: then they stay claimed (still pending) and Python composes.
	mv -f "$store/turns.jsonl" "$store/claimed.jsonl" || return 1
	IFS= read -r now 2>/dev/null < "$store/@PLAIN@" && [ "$now" = "$id" ] || return 1
	printf '%s' "$out$added" > "$1" || return 1
	: > "$store/claim"
}
write_composed "$@" && exit 0
"""
_WRITE_COMPOSED = (
    _WRITE_COMPOSED.replace("@PLAIN@", COMPOSED_PLAIN)
    .replace("@RUNTIME@", RUNTIME_FILE)
    .replace("@PATTERN@", CONFIG_PATTERN)
    .replace("@MODULES@", " ".join(COMPOSING_MODULES))
    .replace("@REPLAY@", " ".join(REPLAY_STATE))
)

SHIMS = {
    "prepare-commit-msg": f"""\
#!/bin/sh
{MARKER}: writes this worktree's captured reasoning into the commit message.
# Python starts only when `git obversa record` left turns waiting for this worktree.
# A hook that was here before `git obversa install` runs first; uninstall restores it.
{_RUN_KEPT.format(status=" || exit $?")}\
[ ! -e "$store/claim" ] || rm -f "$store/claim"
[ ! -e "$store/deferred" ] || rm -f "$store/deferred"
# Aider has no hooks: its chat history, written before it commits, is read when it changed.
history=.aider.chat.history.md read=$store/agents/aider/read
if [ -f "$history" ] && {{ [ ! -e "$read" ] || [ "$history" -nt "$read" ]; }}; then
	git obversa record ingest --aider "$history" >/dev/null 2>&1 || :
fi
[ -s "$store/turns.jsonl" ] || [ -s "$store/claimed.jsonl" ] || exit 0
{_WRITE_COMPOSED}\
set -- prepare-commit-msg "$@"
{_RUN_OBVERSA}""",
    "commit-msg": f"""\
#!/bin/sh
{MARKER}: writes the reasoning shown in the editor into the message written there.
# Python starts only when prepare-commit-msg left reasoning waiting for the editor.
# A hook that was here before `git obversa install` runs first; uninstall restores it.
{_RUN_KEPT.format(status=" || exit $?")}\
[ -e "$store/deferred" ] || exit 0
set -- commit-msg "$@"
{_RUN_OBVERSA}""",
    "post-commit": f"""\
#!/bin/sh
{MARKER}: drops the captured turns the new commit carries, without Python.
# prepare-commit-msg moved them to claimed.jsonl and left the file `claim`; they go if
# the commit kept its Obversa-Record trailer (the block may be deleted in the editor).
# A hook that was here before `git obversa install` runs first; uninstall restores it.
{_RUN_KEPT.format(status="")}\
[ -e "$store/claim" ] || exit 0
carried=$(git log -1 --format='%(trailers:key=Obversa-Record,valueonly)' HEAD) || exit 0
if [ -n "$carried" ]; then
\trm -f "$store/claim" "$store/claimed.jsonl" "$store/{COMPOSED_PLAIN}"
else
\trm -f "$store/claim"
fi
""",
}


# Not in SHIMS: installed only when asked (`install --sync`), removed by every uninstall.
SYNC_SHIMS = {
    "pre-push": f"""\
#!/bin/sh
{MARKER}: a push to a remote set up by `git obversa install --sync`
# also syncs memory (fetch, three-way merge, leased push: never forced). Whatever happens
# to memory, this shim exits 0: the push itself goes on exactly as git decides.
# A hook that was here before `git obversa install` runs first; uninstall restores it.
if [ -x "$0{KEPT_SUFFIX}" ]; then
	"$0{KEPT_SUFFIX}" "$@" || exit $?
fi
[ "$(git config --type=bool "remote.$1.obversasync" 2>/dev/null)" = true ] || exit 0
if ! command -v git-obversa >/dev/null 2>&1; then
	echo "warning: git-obversa is not on PATH; memory was not synced with $1" >&2
	exit 0
fi
git-obversa memory sync -- "$1" </dev/null >&2 ||
	echo "warning: memory was not synced with $1 (the push goes on);" \
		"run: git obversa memory sync $1" >&2
exit 0
""",
}


class InstallError(Exception):
    """The hooks cannot be (un)installed as asked; the message says what to do."""


def hooks_dir(cwd: str | os.PathLike[str] | None = None) -> Path:
    """Where git runs this repository's hooks from (`core.hooksPath` if set)."""
    # A relative core.hooksPath is relative to the top of the worktree, where hooks run.
    top = git.run(["rev-parse", "--show-toplevel"], cwd, check=False).stdout.strip()
    return git.git_path("hooks", top or cwd)


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
    shims = {**SHIMS, **(SYNC_SHIMS if pre_push else {})}
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
    for name in {**SHIMS, **SYNC_SHIMS}:
        hook, kept = directory / name, directory / (name + KEPT_SUFFIX)
        if name in SYNC_SHIMS and not is_shim(hook):
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
    if not any(is_shim(directory / name) for name in SHIMS):
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
