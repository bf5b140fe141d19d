"""The commit hooks: the worktree's captured reasoning goes into the commit that carries it.

`prepare-commit-msg` composes this worktree's pending turns and moves the ones the
message carries to `claimed.jsonl` (see `git_obversa.record.turns`); turns it leaves out
(past the floor's bound) and turns captured meanwhile stay pending.

- With a message (`-m`, `-F`, `-C`, amend) it writes the `Why:` block into the message
  file (format: `git_obversa.record.message`) and leaves the marker file `claim`.
- When git is about to open the editor on a message the user has not written yet (plain
  `git commit`, a template), writing text would make git commit where it aborts today.
  So the reasoning is shown as comment lines, kept in the file `deferred`, and written
  into the message by `commit-msg`, after the editor, if the user wrote a message and
  kept the first of those lines. Quitting without typing aborts the commit as before.

`post-commit` sees the marker and, if the new commit carries the trailer (the user may
have deleted the block), removes `claimed.jsonl`. An aborted commit never reaches
`post-commit`, so its turns stay pending for the next try.

The pre-commit framework prints a line for every hook it runs, so its route is one hook:
`commit-msg --alone` (`commit_msg_alone`) writes the block after the editor, into the
message as git will commit it, and leaves a marker naming HEAD and the block; the next
hook run (or `record show`) settles it (`settle_claim`) in place of `post-commit`.

Left alone: merge and squash messages, and every commit git replays (cherry-pick, revert,
rebase, in any mode). The shims in `hooks/` start Python only when there is work, and do
`post-commit` in `sh`.

Composed ahead (issue 14): whatever captures turns composes them ahead of the commit
(`record.composition.compose_ahead`); `prepare-commit-msg` uses that composition when it
still holds, under the store's lock, and claims every turn; else it composes as before.
So the commit-time path imports no json, re, pathlib or subprocess and starts one `git
config`; for a plain `-m`/`-F` message the shim does not even start Python.
"""

from __future__ import annotations

import codecs
import os

from git_obversa.record.composition import (
    COMPOSED,
    Composition,
    StrictFailure,
    compose,
    composed_ahead,
    composition_for,
    pack,
    read_config,
    read_packed,
    strict,
    unpack,
    write_packed,
)
from git_obversa.record.message import (
    ID_TRAILER,
    comment_char,
    comment_chars,
    comment_lines,
    format_block,
    insert_reasoning,
    is_trailer_paragraph,
    remove_lines,
    split_message,
    subject_line,
)
from git_obversa.record.pending import (
    COMPOSED_PLAIN,
    STORE_PATH,
    StoreLock,
    claim_all,
    keep_claimed,
    remove,
)
from git_obversa.repo import git

# Left by prepare-commit-msg (or commit-msg) when the message carries the claimed turns:
# empty from the shims' route (post-commit settles it); from `commit_msg_alone`, the
# packed HEAD and block written (`settle_claim` settles it).
CLAIM_MARKER = "claim"
# Left with the claim when `obversa.attribution` is set: post-commit then writes who wrote
# the lines (the names are `git_obversa.attribution.emit`'s, not imported on this path).
ATTRIBUTE_MARKER = "attribute"
ATTRIBUTION_CONFIG = "obversa.attribution"
# What the post-commit shim runs, only when it finds ATTRIBUTE_MARKER (or, with the
# argument "picked", PICKED_MARKER and the setting).
ATTRIBUTE_HOOK = "post-commit-attribution"
# Left by the prepare-commit-msg shim during a cherry-pick: the picked commit's hash.
PICKED_MARKER = "picked"
# Left by prepare-commit-msg for commit-msg: the reasoning waiting for the edited message.
DEFERRED = "deferred"
# Messages git wrote for a merge or a squash describe other commits: left alone.
SKIPPED_SOURCES = ("merge", "squash")
# Sources where git opens the editor on a message the user has not written yet.
EDITOR_SOURCES = (None, "template")
# While git replays commits, the pending reasoning belongs to none of them. A single
# `git revert` or `cherry-pick` commits from MERGE_MSG, which only a replay (or a merge,
# skipped by its source) leaves while a commit is being made.
REPLAY_STATE = (
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "MERGE_MSG",
    "sequencer",
    "rebase-merge",
    "rebase-apply",
)
# Cleanup modes in which git drops comment lines (the reasoning may be shown as such).
STRIPPING_CLEANUP = ("", "default", "strip", "scissors")


def _encoding(config: dict[str, str]) -> str:
    """The Python codec for `i18n.commitEncoding` (UTF-8 when unset or unknown)."""
    name = config.get("i18n.commitencoding", "").strip()
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"


def _is_trailer_block(
    paragraph: list[str], config: dict[str, str], cwd: str | os.PathLike[str] | None
) -> bool:
    if not any(key.startswith("trailer.") for key in config):
        return is_trailer_paragraph(paragraph)  # git's default rule, without starting git
    # Configured trailers (separators, known keys) are for git to judge. The leading
    # blank line keeps git from taking the paragraph for a title, which never holds them.
    parsed = git.output(
        ["interpret-trailers", "--parse"], cwd, input="\n" + "\n".join(paragraph) + "\n"
    )
    return bool(parsed.strip())


def _insert(
    text: str,
    reasoning: str,
    stages: list[str],
    chars: str,
    config: dict[str, str],
    cwd,
    editor: bool | None = None,
    record_id: str | None = None,
) -> str:
    """`insert_reasoning` under the repository's trailer rules (git's, when configured);
    EDITOR: whether git opened the editor (None: as git tells this hook)."""
    return insert_reasoning(
        text,
        reasoning=reasoning,
        stages=stages,
        chars=chars,
        is_trailer_block=lambda paragraph: _is_trailer_block(paragraph, config, cwd),
        editor=_git_opens_editor() if editor is None else editor,
        record_id=record_id,
    )


def _insert_composed(
    text: str,
    composition: Composition,
    chars: str,
    config: dict[str, str],
    cwd,
    editor: bool | None = None,
) -> str:
    """`_insert` of a composition's reasoning, stages and record id."""
    return _insert(
        text,
        composition.reasoning,
        composition.stages,
        chars,
        config,
        cwd,
        editor=editor,
        record_id=composition.record_id,
    )


def _git_opens_editor() -> bool:
    """Whether git opens the editor on this commit's message: it tells its hooks that it
    does not by GIT_EDITOR=: (which is also what an editor set to `:` reads)."""
    return os.environ.get("GIT_EDITOR") != ":"


def _store_and_replay(
    cwd: str | os.PathLike[str] | None, git_dir: str | None = None
) -> tuple[str, bool]:
    """This worktree's turn store directory, and whether git is replaying commits.
    GIT_DIR (the worktree's own git dir, which the shims know) saves asking git: the
    store and the replay state all live there."""
    if git_dir is not None:
        paths = [os.path.join(git_dir, name) for name in (STORE_PATH, *REPLAY_STATE)]
    else:
        paths = git.output(
            ["rev-parse", "--path-format=absolute"]
            + [arg for name in (STORE_PATH, *REPLAY_STATE) for arg in ("--git-path", name)],
            cwd,
        ).splitlines()
    return paths[0], any(os.path.exists(path) for path in paths[1:])


def _message_path(message_file: str | os.PathLike[str], cwd) -> str:
    path = os.fspath(message_file)
    if cwd is not None and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return path


def _read_text(path: str, encoding: str) -> str:
    with open(path, encoding=encoding, errors="surrogateescape") as handle:
        return handle.read()


def _write_text(path: str, text: str, encoding: str) -> None:
    with open(path, "w", encoding=encoding, errors="surrogateescape") as handle:
        handle.write(text)


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666))


def _mark_claim(directory: str, config: dict[str, str]) -> None:
    """The claim marker for post-commit; with `obversa.attribution` set, also the marker
    that has it write who wrote the commit's lines (`git_obversa.attribution.emit`)."""
    _touch(os.path.join(directory, CLAIM_MARKER))
    if config.get(ATTRIBUTION_CONFIG, "").strip():
        _touch(os.path.join(directory, ATTRIBUTE_MARKER))


def prepare_commit_msg(
    message_file: str | os.PathLike[str],
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    git_dir: str | None = None,
) -> bool:
    """Write (or, before the editor, show) the pending reasoning in MESSAGE_FILE; True if
    it did. SOURCE is git's second hook argument (`message`, `template`, `commit`,
    `merge`, `squash`, or None for an editor with nothing given)."""
    directory, replaying = _store_and_replay(cwd, git_dir)
    settle_claim(directory, cwd)  # removes the marker; judges one `commit_msg_alone` left
    remove(os.path.join(directory, ATTRIBUTE_MARKER))
    remove(os.path.join(directory, DEFERRED))
    if source in SKIPPED_SOURCES or replaying:
        return False
    config, encoding, path, text, chars, char, lines = _read_message(message_file, cwd)
    subject = subject_line(lines, char)
    editing = source in EDITOR_SOURCES
    if subject is None and not editing:
        return False  # an empty message: git aborts it (or keeps it empty) as without us

    def write(composition: Composition, claim) -> bool:
        """Write COMPOSITION into the message (or show it, before the editor), calling
        CLAIM to move the turns it carries to claimed.jsonl."""
        if not composition.reasoning:
            claim()
            return False
        if editing:
            shown = comment_lines(char, composition.subject, composition.reasoning)
            untouched = [line.strip() for line in lines if line.strip()]
            if config.get("commit.cleanup", "").strip().lower() in STRIPPING_CLEANUP:
                user, tail = split_message(text, char)
                shown_text = (
                    "".join(line + "\n" for line in user)
                    + "\n"
                    + "".join(line + "\n" for line in shown)
                )
                shown_text += ("\n" + tail) if tail else ""
                _write_text(path, _encodable(shown_text, encoding), encoding)
            else:
                shown = []
            deferred = [composition.reasoning, char, pack(composition.stages)]
            deferred += [pack(shown), pack(untouched), composition.record_id]
            claim()
            write_packed(os.path.join(directory, DEFERRED), deferred)
            return True
        written = _insert_composed(text, composition, chars, config, cwd)
        # Claimed first: if writing the message fails, the turns are still pending, and
        # no marker lets post-commit drop them.
        claim()
        _write_text(path, _encodable(written, encoding), encoding)
        _mark_claim(directory, config)
        return True

    return _compose_and_write(directory, config, subject, chars, cwd, write)


def _read_message(message_file: str | os.PathLike[str], cwd) -> tuple:
    """The commit's settings and message as both commit hooks read them: (config,
    encoding, path, text, comment characters, the message's comment character, its
    lines above git's comment block)."""
    config = read_config(cwd)
    encoding = _encoding(config)
    path = _message_path(message_file, cwd)
    text = _read_text(path, encoding)
    chars = comment_chars(config.get("core.commentchar"))
    char = comment_char(text, chars, editor=_git_opens_editor())
    lines, _ = split_message(text, char)
    return config, encoding, path, text, chars, char, lines


def _compose_and_write(
    directory: str,
    config: dict[str, str],
    subject: str | None,
    chars: str,
    cwd: str | os.PathLike[str] | None,
    write,
) -> bool:
    """WRITE(composition, claim) with what the pending turns in DIRECTORY give: what
    `compose_ahead` left when it still holds, else a composition made now for SUBJECT;
    False when nothing is pending."""
    if os.path.exists(os.path.join(directory, COMPOSED)):
        # Held while the message is written, so no turn comes in between what the
        # composition was made from and the claim.
        with StoreLock(directory):
            ahead = composed_ahead(directory, config)
            if ahead is not None:
                return write(ahead, lambda: claim_all(directory))
    from git_obversa.record.turns import TurnStore

    store = TurnStore(directory)
    turns = store.read()
    if not turns:
        return False
    messages, carried = compose(turns, {"status": "pass", "summary": subject}, config, cwd)
    # Every turn goes with the commit: what the message has no room for is in its record.
    return write(composition_for(messages, turns, carried, chars), lambda: store.claim(None))


def add_reasoning(text: str, turns: list[dict], cwd: str | os.PathLike[str] | None = None) -> str:
    """TEXT (a message) with the reasoning composed from TURNS written in, as the hook
    writes it into a message given with `-m` (no editor); a TEXT without a subject (an
    isolated stage commits from nothing) gets the composed one. The turns' kept record is
    written at once, under the id the message names."""
    config = read_config(cwd)
    chars = comment_chars(config.get("core.commentchar"))
    char = comment_char(text, chars, editor=False)
    lines, _ = split_message(text, char)
    subject = subject_line(lines, char)
    messages, carried = compose(turns, {"status": "pass", "summary": subject}, config, cwd)
    if not messages:
        return text
    if subject is None:
        text = messages[0]["subject"] + "\n" + text
    composition = composition_for(messages, turns, carried, chars)
    # Nothing claims these turns from the store: their record is written here, now.
    from git_obversa.record.kept import keep_now

    keep_now(composition.record_id, turns, cwd)
    return _insert_composed(text, composition, chars, config, cwd, editor=False)


def _encodable(text: str, encoding: str) -> str:
    """TEXT with what ENCODING cannot hold replaced by `?` (the user's own bytes, kept as
    surrogate escapes, pass through)."""
    if encoding == "utf-8":
        return text
    return "".join(
        char if "\udc80" <= char <= "\udcff" or char.encode(encoding, "ignore") else "?"
        for char in text
    )


def commit_msg(
    message_file: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    git_dir: str | None = None,
) -> bool:
    """After the editor: write the reasoning `prepare-commit-msg` showed into the message
    the user wrote; True if it did. Nothing when the user wrote nothing (git aborts), left
    a template untouched, or deleted the first line of the shown reasoning."""
    if git_dir is not None:
        directory = _store_and_replay(cwd, git_dir)[0]
    else:
        directory = os.fspath(git.git_path(STORE_PATH, cwd))
    deferred_file = os.path.join(directory, DEFERRED)
    try:
        fields = unpack(read_packed(deferred_file))
    except FileNotFoundError:
        return False
    remove(deferred_file)
    if fields is None or len(fields) != 6:
        raise ValueError(f"{deferred_file} is damaged; the reasoning shown was not kept")
    reasoning, char, record_id = fields[0], fields[1], fields[5]
    stages, shown, untouched = map(unpack, fields[2:5])
    if stages is None or shown is None or untouched is None:
        raise ValueError(f"{deferred_file} is damaged; the reasoning shown was not kept")
    config = read_config(cwd)
    encoding = _encoding(config)
    path = _message_path(message_file, cwd)
    text = _read_text(path, encoding)
    kept = not shown or shown[0] in text.splitlines()
    text = remove_lines(text, shown)
    lines, _ = split_message(text, char)
    written = [line.strip() for line in lines if line.strip() and not line.startswith(char)]
    untouched = [line for line in untouched if not line.startswith(char)]
    if not kept or not written or written == untouched:
        _write_text(path, text, encoding)
        return False
    # Git picked its comment character before the editor; the shown lines name it.
    written_text = _insert(text, reasoning, stages, char, config, cwd, record_id=record_id)
    _write_text(path, _encodable(written_text, encoding), encoding)
    _mark_claim(directory, config)
    return True


def commit_msg_alone(
    message_file: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    git_dir: str | None = None,
) -> bool:
    """The pre-commit framework's route, where this is the only hook: write the pending
    reasoning into MESSAGE_FILE, the message as the user finished it; True if it did.
    git may still abort after commit-msg (an empty message, an untouched template, a
    later hook), so this writes nothing then, and leaves the turns it wrote claimed under
    a marker naming HEAD and the block, for `settle_claim`.

    Without prepare-commit-msg the message source is unknown: merges and replays are told
    by the state git keeps for them, a squash by its SQUASH_MSG in the message."""
    directory, replaying = _store_and_replay(cwd, git_dir)
    settle_claim(directory, cwd)
    if replaying:
        return False
    config, encoding, path, text, chars, char, lines = _read_message(message_file, cwd)
    written = [line.strip() for line in lines if line.strip() and not line.startswith(char)]
    if all(line.startswith("Signed-off-by: ") for line in written):
        return False  # git aborts it as empty (a sign-off alone counts as nothing)
    if _squash_message(directory, written, encoding):
        return False

    def write(composition: Composition, claim) -> bool:
        if not composition.reasoning:
            claim()
            return False
        if _untouched_template(written, char, cwd):
            return False  # git aborts it: "you did not edit the message"
        finished = _insert_composed(text, composition, chars, config, cwd)
        block = _encodable("\n".join(format_block(composition.reasoning, chars)), encoding)
        # Claimed and marked before the message is written: if writing fails, the commit
        # goes ahead without the block, and `settle_claim` gives the turns back.
        claim()
        marker = [_head(cwd), block, composition.record_id]
        write_packed(os.path.join(directory, CLAIM_MARKER), marker)
        _write_text(path, _encodable(finished, encoding), encoding)
        return True

    return _compose_and_write(directory, config, written[0], chars, cwd, write)


def _untouched_template(written: list[str], char: str, cwd: str | os.PathLike[str] | None) -> bool:
    """Whether WRITTEN (the message's lines) is `commit.template` as it was: git aborts
    that commit ("you did not edit the message"), unless the hook adds to it."""
    [(status, found)] = git.outputs([["config", "--path", "--get", "commit.template"]], cwd)
    name = found.decode("utf-8", "surrogateescape").strip()
    if status != 0 or not name:
        return False
    try:
        template = _read_text(os.path.join(os.fspath(cwd or "."), name), "utf-8")
    except OSError:
        return False
    lines = template.splitlines()
    return written == [line.strip() for line in lines if line.strip() and not line.startswith(char)]


def _squash_message(directory: str, written: list[str], encoding: str) -> bool:
    """Whether the message is the one `git merge --squash` prepared (it describes the
    squashed commits), not one given with -m or -F."""
    git_dir = os.path.dirname(os.path.dirname(directory))  # the store is STORE_PATH in it
    try:
        prepared = _read_text(os.path.join(git_dir, "SQUASH_MSG"), encoding)
    except OSError:
        return False
    first = next((line.strip() for line in prepared.splitlines() if line.strip()), None)
    return first is not None and first in written


def settle_claim(
    directory: str, cwd: str | os.PathLike[str] | None = None, *, finished: bool = True
) -> None:
    """Settle the claim `commit_msg_alone` left in the store DIRECTORY (its route has no
    post-commit): if a commit made since the marker's HEAD holds the block it wrote, the
    claimed turns go; otherwise (git aborted the commit after commit-msg, or HEAD moved by
    commits without the block: a pull, --no-verify) they stay pending. FINISHED: no
    commit is in progress (a hook is starting), so a HEAD that has not moved means the
    commit aborted; else (`record show`) that marker stays for the commit that may still
    land. The shims' empty marker is only removed, and only when FINISHED."""
    marker = os.path.join(directory, CLAIM_MARKER)
    try:
        claim = read_packed(marker)
    except FileNotFoundError:
        return
    if not claim:
        if finished:
            remove(marker)
        return
    fields = unpack(claim)
    before, block, record_id = fields if fields is not None and len(fields) == 3 else (None, "", "")
    head = _head(cwd)
    if head == before and not finished:
        return
    if before is not None and block.strip() and head and head != before:
        # Newest first, a bounded number: a pull may have brought many, with others'
        # trailers, so the block itself is looked for (compared as insert_reasoning does).
        span = f"{before}..{head}" if before else head
        [(status, found)] = git.outputs(
            [["log", "-z", "-n", "64", "--encoding=UTF-8", "--format=%H%n%B", span, "--"]], cwd
        )
        wanted = " ".join(block.split())
        for entry in found.decode("utf-8", "replace").split("\0") if status == 0 else []:
            commit, _, message = entry.partition("\n")
            if wanted in " ".join(message.split()):
                _attribute_settled(directory, commit, cwd)
                keep_claimed(directory, record_id)
                remove(os.path.join(directory, COMPOSED_PLAIN))
                break
    remove(marker)


def _attribute_settled(directory: str, commit: str, cwd) -> None:
    """The pre-commit framework's route has no post-commit: when its claim settles, the
    notes of who wrote COMMIT's lines are written (with `obversa.attribution` set), from
    the turns still claimed in DIRECTORY. Fails open, as post-commit does."""
    if not read_config(cwd).get(ATTRIBUTION_CONFIG, "").strip():
        return
    from git_obversa.attribution import emit
    from git_obversa.record.turns import TurnStore

    try:
        emit.attribute(
            TurnStore(directory).read_claimed(), emit.configured(cwd), cwd, commit=commit
        )
    except Exception as error:  # a broken note never costs the commit
        import sys

        print(f"warning: git-obversa wrote no attribution notes: {error}", file=sys.stderr)


def _head(cwd: str | os.PathLike[str] | None) -> str:
    """HEAD's commit, or "" on an unborn branch."""
    [(status, found)] = git.outputs([["rev-parse", "-q", "--verify", "HEAD^{commit}"]], cwd)
    return found.decode("ascii", "replace").strip() if status == 0 else ""


def post_commit(cwd: str | os.PathLike[str] | None = None) -> bool:
    """Drop the claimed turns if the new commit carries them; True if it did.

    The installed `post-commit` shim does the same in `sh`, without starting Python.
    """
    from git_obversa.record.turns import TurnStore

    store = TurnStore.for_worktree(cwd)
    marker = store.directory / CLAIM_MARKER
    if not marker.exists():
        return False
    if marker.stat().st_size:  # `commit_msg_alone`'s (the pre-commit framework's post-commit)
        settle_claim(str(store.directory), cwd)
        return True
    carried = git.output(
        ["log", "-1", f"--format=%(trailers:key={ID_TRAILER},valueonly)", "HEAD"], cwd
    ).split()
    marker.unlink(missing_ok=True)
    attribution = store.directory / ATTRIBUTE_MARKER
    if not carried:
        attribution.unlink(missing_ok=True)
        return False  # the block was removed before the commit: its turns were not used
    if attribution.exists():  # reads claimed.jsonl, so before the turns are kept
        from git_obversa.attribution import emit

        emit.run(store.directory, cwd)
    keep_claimed(str(store.directory), carried[-1])
    (store.directory / COMPOSED_PLAIN).unlink(missing_ok=True)
    return True


def post_rewrite(pairs: str, cwd: str | os.PathLike[str] | None = None) -> int:
    """After `commit --amend` or `rebase`: PAIRS is what git gives this hook on stdin
    (`old new` a line); each new commit inherits the kept records of its old ones that
    its message no longer names (record/kept.py, `link`), and with `obversa.attribution`
    set, notes of who wrote the lines it adds (`git_obversa.attribution.emit.carry`).
    Returns how many records were linked."""
    from git_obversa.record.kept import link

    found = [tuple(line.split()[:2]) for line in pairs.splitlines() if len(line.split()) >= 2]
    linked = link(found, cwd)
    if read_config(cwd).get(ATTRIBUTION_CONFIG, "").strip():
        from git_obversa.attribution import emit

        emit.carry(found, emit.configured(cwd), cwd)
    return linked


def post_commit_attribution(directory: str, picked: bool, cwd=None) -> None:
    """Write the notes of who wrote HEAD's lines (the post-commit shim starts this): from
    the turns claimed in the store DIRECTORY, or, PICKED, from the notes of the commit
    the store's PICKED_MARKER names (HEAD was cherry-picked from it)."""
    from git_obversa.attribution import emit

    if not picked:
        emit.run(directory, cwd)
        return
    marker = os.path.join(directory, PICKED_MARKER)
    try:
        with open(marker, encoding="ascii", errors="replace") as handle:
            source = handle.read().strip()
    except FileNotFoundError:
        return
    try:
        emit.attribute([], emit.configured(cwd), cwd, picked=source)
    finally:
        remove(marker)


# What a failure costs, by hook, when it does not stop the commit.
CONSEQUENCES = {
    "prepare-commit-msg": "the commit proceeds without reasoning",
    "commit-msg": "the commit proceeds without reasoning",
    "post-commit": "the captured turns stay pending",
    "post-rewrite": "the rewritten commits may not find their kept records",
    ATTRIBUTE_HOOK: "the commit has no attribution notes",
}


def run(name: str, args: list[str], git_dir: str | None = None, *, alone: bool = False) -> int:
    """Run hook NAME with git's ARGS; the exit status for git. Fails open: an error is one
    warning line and 0, unless `obversa.strict` is set (one line and 1). ALONE: commit-msg
    is the only hook (the pre-commit framework's route)."""
    try:
        if name == "prepare-commit-msg":
            prepare_commit_msg(args[0], args[1] if len(args) > 1 else None, git_dir=git_dir)
        elif name == "commit-msg" and alone:
            commit_msg_alone(args[0], git_dir=git_dir)
        elif name == "commit-msg":
            commit_msg(args[0], git_dir=git_dir)
        elif name == "post-commit":
            post_commit()
        elif name == "post-rewrite":
            import sys

            post_rewrite(sys.stdin.read())
        elif name == ATTRIBUTE_HOOK:
            directory = os.path.join(git_dir or git.git_path("."), STORE_PATH)
            post_commit_attribution(directory, args[:1] == ["picked"])
        else:
            raise ValueError(f"no hook {name!r}")
    except Exception as error:
        return failed(name, error)
    return 0


def failed(name: str, error: Exception) -> int:
    """Say ERROR of hook NAME in one line; 1 when the commit must stop, else 0."""
    import sys

    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, StrictFailure):
        print(f"git obversa hook {name}: {detail}", file=sys.stderr)
        return 1
    try:
        stop = strict(read_config())
    except Exception:
        stop = False
    if stop:
        print(f"git obversa hook {name}: {detail} (obversa.strict is set)", file=sys.stderr)
        return 1
    print(
        f"warning: git obversa hook {name}: {detail}; {CONSEQUENCES.get(name, '')}".rstrip("; "),
        file=sys.stderr,
    )
    return 0


def main(argv: list[str]) -> int:
    """The shims' lean entry (`python -I -S`, no argparse, no site): GIT_DIR NAME ARGS..."""
    return run(argv[1], argv[2:], git_dir=argv[0] or None)
