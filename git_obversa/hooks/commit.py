"""The commit hooks: the worktree's captured reasoning goes into the commit that carries it.

`prepare-commit-msg` claims this worktree's pending turns (they move to `claimed.jsonl`,
see `git_obversa.record.turns`), composes them, writes the `Why:` block into the message file
(format: `git_obversa.record.message`) and leaves the marker file `claim` beside them.
`post-commit` sees the marker and, if the new commit really carries the block (the user
may have deleted it in the editor), removes `claimed.jsonl`: exactly the turns the commit
carries; turns captured meanwhile stay. An aborted commit never reaches `post-commit`, so
its turns stay pending for the next try.

The shims in `hooks/` start Python for `prepare-commit-msg` only when there is work, and
do `post-commit` in `sh` (`post_commit` here is the same for the pre-commit framework).
Nothing heavy is imported: the standard library, the turn store, the record's compose
rules and the scrubber.
"""

from __future__ import annotations

import os
from pathlib import Path

from git_obversa import git
from git_obversa.record.message import (
    RECORD_TRAILER,
    comment_char,
    comment_chars,
    format_block,
    insert_reasoning,
    split_message,
    subject_line,
)
from git_obversa.record.turns import STORE_PATH, TurnStore

# Left by prepare-commit-msg when it wrote the claimed turns into this commit.
CLAIM_MARKER = "claim"
# Messages git wrote for a merge or a squash describe other commits: left alone.
SKIPPED_SOURCES = ("merge", "squash")
# While git replays commits, the pending reasoning belongs to none of them.
REPLAY_STATE = ("CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply")
TRUE_VALUES = ("", "true", "yes", "on", "1")


def read_config(cwd: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """`core.commentChar` and the `obversa.*` settings, in one git call (keys lowercased)."""
    completed = git.run(
        ["config", "-z", "--get-regexp", r"^(core\.commentchar|obversa\..*)$"], cwd, check=False
    )
    config = {}
    for entry in completed.stdout.split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            config[key.lower()] = value
    return config


def strict(config: dict[str, str]) -> bool:
    value = config.get("obversa.strict")
    return value is not None and value.strip().lower() in TRUE_VALUES


def add_reasoning(text: str, turns: list[dict], cwd: str | os.PathLike[str] | None = None) -> str:
    """TEXT (a commit message) with the reasoning composed from TURNS (pending turns of
    this worktree, any stages) written into it; one composition per stage."""
    from git_obversa.record.composer import DEFAULT_TIMEOUT, builtin_compose, run_composer
    from git_obversa.record.reasoning import compose_message

    config = read_config(cwd)
    chars = comment_chars(config.get("core.commentchar"))
    char = comment_char(text, chars)
    lines, _ = split_message(text, char)
    outcome = {"status": "pass", "summary": subject_line(lines, char)}

    command = config.get("obversa.composer", "").strip()
    if command:
        timeout = _seconds(config.get("obversa.composertimeout"), DEFAULT_TIMEOUT)

        def compose(request: dict) -> dict | None:
            return run_composer(command, request, timeout=timeout, cwd=cwd)
    else:
        compose = builtin_compose

    by_stage: dict[str, list[dict]] = {}
    for turn in turns:
        by_stage.setdefault(turn["stage"], []).append({"node": turn["node"], "text": turn["text"]})
    messages = [
        compose_message(stage, captured, outcome, compose) for stage, captured in by_stage.items()
    ]
    # Each body on its own, so a second stage's heading (`## Why` of the floor) goes too.
    blocks = ["\n".join(format_block(message["body"], chars)) for message in messages]
    return insert_reasoning(
        text,
        subject=messages[0]["subject"],
        reasoning="\n\n".join(blocks),
        stages=list(by_stage),
        chars=chars,
        is_trailer_block=lambda paragraph: _is_trailer_block(paragraph, cwd),
    )


def _seconds(setting: str | None, default: float) -> float:
    if not setting:
        return default
    try:
        return float(setting)
    except ValueError:
        raise ValueError(
            f"obversa.composerTimeout is {setting!r}, not a number of seconds; "
            "fix it with `git config obversa.composerTimeout 30`"
        ) from None


def _is_trailer_block(paragraph: list[str], cwd: str | os.PathLike[str] | None) -> bool:
    # Git's own rules (separators, known keys, the 25% rule) decide. The leading blank
    # line keeps git from taking the paragraph for a title, which never holds trailers.
    parsed = git.output(
        ["interpret-trailers", "--parse"], cwd, input="\n" + "\n".join(paragraph) + "\n"
    )
    return bool(parsed.strip())


def prepare_commit_msg(
    message_file: str | os.PathLike[str],
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> bool:
    """Write the pending reasoning into MESSAGE_FILE; True if it did.

    SOURCE is git's second hook argument (`message`, `template`, `commit`, `merge`,
    `squash`, or None for an editor with nothing given).
    """
    paths = git.output(
        ["rev-parse", "--path-format=absolute"]
        + [arg for name in (STORE_PATH, *REPLAY_STATE) for arg in ("--git-path", name)],
        cwd,
    ).splitlines()
    store = TurnStore(paths[0])
    marker = store.directory / CLAIM_MARKER
    marker.unlink(missing_ok=True)
    if source in SKIPPED_SOURCES or any(os.path.exists(path) for path in paths[1:]):
        return False
    path = Path(message_file)
    if cwd is not None and not path.is_absolute():
        path = Path(cwd) / path
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    turns = store.claim()
    if not turns:
        return False
    path.write_text(add_reasoning(text, turns, cwd), encoding="utf-8", errors="surrogateescape")
    marker.touch()
    return True


def post_commit(cwd: str | os.PathLike[str] | None = None) -> bool:
    """Drop the claimed turns if the new commit carries them; True if it did.

    The installed `post-commit` shim does the same in `sh`, without starting Python.
    """
    store = TurnStore.for_worktree(cwd)
    marker = store.directory / CLAIM_MARKER
    if not marker.exists():
        return False
    carried = git.output(
        ["log", "-1", f"--format=%(trailers:key={RECORD_TRAILER},valueonly)", "HEAD"], cwd
    )
    marker.unlink(missing_ok=True)
    if not carried.strip():
        return False  # the block was removed before the commit: its turns were not used
    store.claimed_file.unlink(missing_ok=True)
    return True
