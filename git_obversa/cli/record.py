"""`git obversa record`: capture reasoning for this worktree's next commit by hand or
from an agent transcript, look at what is pending, drop it."""

from __future__ import annotations

import argparse
import errno
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TypeVar

from git_obversa.cli import Failure, print_json
from git_obversa.hooks.capture import (
    DEFAULT_STAGE,
    after_capture,
    configured_stage,
    hooks_missing_line,
    malformed_line,
)
from git_obversa.record.turns import NOTE_KIND, CorruptTurns, TurnStore
from git_obversa.repo import git

T = TypeVar("T")

EPILOG = """\
examples:
  git obversa record note "Retries, because the upstream fails in bursts of two."
  git obversa record note --thinking - < notes.txt
  git obversa record ingest --claude-code ~/.claude/projects/-src-app/SESSION.jsonl
  git obversa record show
  git obversa record show HEAD --json      the whole record a commit keeps
  git obversa record drop HEAD~2           forget a commit's record for good
  git obversa record sync origin           records to and from a remote
  git obversa record clear

The turns wait under this worktree's git dir until a commit carries them (the
prepare-commit-msg hook writes them into the message; see `git obversa install`).
The message gets the concise why; every turn is kept in the commit's record, found
from the commit by the `Obversa-Record-Id` trailer of its message.
"""


def _add_note(verbs: argparse._SubParsersAction) -> None:
    note = verbs.add_parser(
        "note",
        help="capture one turn of reasoning",
        description="Capture TEXT (or stdin with '-') as one turn of reasoning.",
        epilog='example:\n  git obversa record note "Chose a queue: bursts overflow the pool."',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stage(note)
    note.add_argument(
        "--thinking", action="store_true", help="record it as thinking rather than text"
    )
    note.add_argument("--agent", help="the agent that said it (e.g. claude-code)")
    note.add_argument("--session", help="the agent's own id of the conversation")
    note.add_argument("--model", help="the model that said it (e.g. claude-sonnet-4-5)")
    note.add_argument("text", nargs="*", metavar="TEXT | -", help="the reasoning; '-' reads stdin")
    note.set_defaults(run=run_note)


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.description = (
        "Capture the reasoning that goes into this worktree's next commit. Turns are kept "
        "per worktree until a commit carries them."
    )
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    _add_note(verbs)

    show = verbs.add_parser(
        "show",
        help="show the turns waiting for the next commit, or a commit's whole record",
        description=(
            "Show this worktree's pending turns, oldest first, each as a commit would carry "
            "it: secrets scrubbed, a long turn cut to its head and tail. With COMMIT, the "
            "whole record that commit keeps: every turn captured for it."
        ),
        epilog=(
            "examples:\n  git obversa record show\n  git obversa record show --raw --json\n"
            "  git obversa record show HEAD --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("commit", nargs="?", metavar="COMMIT", help="a commit (default: pending)")
    show.add_argument("--json", action="store_true", help="print the turns as JSON")
    show.add_argument(
        "--raw",
        action="store_true",
        help="the turns as stored: not cut (secrets went when captured)",
    )
    show.set_defaults(run=run_show)

    drop = verbs.add_parser(
        "drop",
        help="forget the kept record of a commit, for good",
        description=(
            "Remove the kept record of COMMIT (or the record --id names) from this "
            "repository. A tombstone stays so that no sync brings it back; the text leaves "
            "the object database at the next `git gc --prune=now`, and a remote's after "
            "`git obversa record sync` and its own gc. The commit message is not touched."
        ),
        epilog=(
            "examples:\n  git obversa record drop HEAD\n"
            "  git obversa record drop --id 0a1b2c3d4e5f6a7b"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = drop.add_mutually_exclusive_group(required=True)
    which.add_argument("commit", nargs="?", metavar="COMMIT", help="the commit whose record goes")
    which.add_argument("--id", dest="record_id", metavar="ID", help="a record id")
    drop.add_argument("--json", action="store_true", help="print what was dropped as JSON")
    drop.set_defaults(run=run_drop)

    sync = verbs.add_parser(
        "sync",
        help="fetch a remote's kept records, merge, and push ours",
        description=(
            "Fetch REMOTE's kept records, add the ones missing here (a record dropped on "
            "either side stays dropped), and push the result (leased: never over records "
            "we have not seen). `git obversa memory sync` does this too."
        ),
        epilog="examples:\n  git obversa record sync\n  git obversa record sync upstream --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sync.add_argument("remote", nargs="?", default="origin", help="the remote (default: origin)")
    sync.add_argument("--json", action="store_true", help="print the result as JSON")
    sync.set_defaults(run=run_sync)

    clear = verbs.add_parser(
        "clear",
        help="drop the pending turns",
        description="Drop this worktree's pending turns (all stages unless --stage).",
    )
    clear.add_argument("--stage", help="drop only this stage's turns")
    clear.set_defaults(run=run_clear)

    ingest = verbs.add_parser(
        "ingest",
        help="capture an agent's reasoning from its transcript",
        description=(
            "Take the assistant's text and thinking from an agent transcript. Only entries "
            "newer than the last ingest of the same transcript are taken, so it can run "
            "after every agent turn."
        ),
        epilog=(
            "example:\n  git obversa record ingest --claude-code "
            "~/.claude/projects/-src-app/0b7e….jsonl\n"
            "  git obversa record ingest --aider .aider.chat.history.md\n\n"
            "To run it after every Claude Code turn, see `git obversa agent-hook -h`."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stage(ingest)
    sources = ingest.add_mutually_exclusive_group(required=True)
    sources.add_argument(
        "--aider",
        metavar="CHAT.md",
        help="Aider's chat history (.aider.chat.history.md): its replies, without the edits",
    )
    sources.add_argument(
        "--claude-code",
        metavar="TRANSCRIPT.jsonl",
        help="a Claude Code session transcript (JSON lines)",
    )
    ingest.add_argument("--json", action="store_true", help="print the captured turns as JSON")
    ingest.set_defaults(run=run_ingest)


def add_stage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stage",
        help="the stage the turns belong to "
        f"(default: git config obversa.stage, else {DEFAULT_STAGE})",
    )


def worktree_store() -> TurnStore:
    try:
        return TurnStore.for_worktree()
    except git.GitError as error:
        raise Failure(
            f"not in a Git worktree ({error}); run it inside the repository whose next "
            "commit should carry the reasoning"
        ) from error


def run_note(args: argparse.Namespace) -> int:
    if args.text in ([], ["-"]):
        if not args.text and sys.stdin.isatty():
            raise Failure("no text given; pass it as an argument or pipe it in with '-'")
        text = sys.stdin.read().rstrip("\n")  # the newline that ends piped input
    else:
        text = " ".join(args.text)
    if not text.strip():
        raise Failure("the text is empty; nothing to record")
    store = worktree_store()
    stage = args.stage or configured_stage()
    kind = "engine:thinking" if args.thinking else NOTE_KIND
    if (args.session or args.model) and not args.agent:
        raise Failure("--session and --model describe an agent; name it with --agent")
    who = {"agent": args.agent, "session": args.session, "model": args.model}
    turn = {"stage": stage, "node": stage, "kind": kind, "text": text, **who}
    with_store(store.append, [turn])
    lines = after_capture(store)
    if args.thinking:
        from git_obversa.record.composition import THINKING_LEFT_OUT, read_config, thinking_included

        if not thinking_included(read_config()):
            lines.append(THINKING_LEFT_OUT)
    for line in lines:
        print(line, file=sys.stderr)
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.commit is not None:
        return run_show_kept(args)
    turns = with_store(_pending, worktree_store())
    if not args.raw:  # as a commit would carry each of them: scrubbed, bounded
        from git_obversa.record.rules import bound_turns

        texts = bound_turns([turn["text"] for turn in turns])
        turns = [{**turn, "text": text} for turn, text in zip(turns, texts, strict=True)]
    if args.json:
        print_json(turns)
        return 0
    if not turns:
        print("No pending turns: the next commit gets no recorded reasoning.")
        return 0
    for turn in turns:
        kind = turn["kind"].removeprefix("engine:")
        print(f"#{turn['seq']} {turn['stage']} ({kind})")
        print(textwrap.indent(turn["text"].rstrip("\n"), "    ", lambda line: True))
    count = len(turns)
    print(f"{count} pending turn{'' if count == 1 else 's'}.")
    return 0


def run_clear(args: argparse.Namespace) -> int:
    store = worktree_store()

    def clear() -> str:
        try:
            dropped = store.clear(stage=args.stage)
        except CorruptTurns as error:
            if args.stage:
                message = f"{error}; run `git obversa record clear` to drop all turns"
                raise Failure(message) from error
            store.discard()  # the way out of a damaged store: drop it whole
            return f"Dropped the damaged turns ({error})."
        return f"Dropped {dropped} pending turn{'' if dropped == 1 else 's'}."

    print(with_store(clear))
    return 0


def run_ingest(args: argparse.Namespace) -> int:
    from git_obversa.agents.claude_code import UnreadableTranscript, ingest_claude_code

    store = worktree_store()
    stage = args.stage or configured_stage()
    if args.aider is not None:
        from git_obversa.agents.aider import ingest_aider

        ingest, source = ingest_aider, args.aider
    else:
        ingest, source = ingest_claude_code, args.claude_code
    try:
        ingested = with_store(ingest, source, store, stage)
    except UnreadableTranscript as error:
        raise Failure(str(error)) from error
    added = ingested.turns
    captured = after_capture(store) if added else hooks_missing_line()
    for line in ([malformed_line(ingested)] if ingested.malformed else []) + captured:
        print(line, file=sys.stderr)
    if args.json:
        print_json(added)
    else:
        count = len(added)
        print(f"Captured {count} new turn{'' if count == 1 else 's'} for stage {stage}.")
    return 0


def _pending(store: TurnStore) -> list[dict]:
    """The pending turns. On the pre-commit route no post-commit drops what a commit
    carried, so the claim is settled first; in a git dir this process may only read,
    nothing can be settled or locked, and the turns are read as they are."""
    from git_obversa.hooks.commit import settle_claim

    try:
        settle_claim(str(store.directory), finished=False)
        return store.read()
    except OSError as error:
        if error.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        return store.read_unlocked()


def with_store(operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a turn-store OPERATION, turning a damaged or unusable store into a handled
    failure."""
    try:
        return operation(*args, **kwargs)
    except CorruptTurns as error:
        raise Failure(f"{error}; inspect it or run `git obversa record clear`") from error
    except OSError as error:
        raise Failure(
            f"cannot use the captured turns: {error.filename}: {error.strerror or error}; "
            "check that this worktree's git dir is writable"
        ) from error


def commit_records(commit: str) -> tuple[str, list[str]]:
    """COMMIT's full hash and its record ids: those its message names, then those it
    inherited from the commits it was rewritten from."""
    from git_obversa.record.kept import commit_ids

    found = git.run(["rev-parse", "-q", "--verify", f"{commit}^{{commit}}"], check=False)
    sha = found.stdout.strip()
    if not sha:
        raise Failure(f"{commit!r} is not a commit here; name one as `git log` shows them")
    return sha, commit_ids(sha, git.output(["log", "-1", "--format=%B", sha]))


def kept_records(ids: list[str]) -> dict[str, dict]:
    from git_obversa.record.kept import RecordError, read_records

    try:
        return read_records(ids)
    except (RecordError, git.GitError) as error:
        raise Failure(str(error)) from error


def run_show_kept(args: argparse.Namespace) -> int:
    sha, ids = commit_records(args.commit)
    records = kept_records(ids)
    turns = [turn for record_id in ids for turn in records.get(record_id, {}).get("turns", [])]
    missing = [record_id for record_id in ids if record_id not in records]
    if args.json:
        print_json({"commit": sha, "ids": ids, "missing": missing, "turns": turns})
        return 0
    if not ids:
        print(f"Commit {sha[:12]} keeps no record: its message names none.")
        return 0
    print(format_record(turns), end="")
    for record_id in missing:
        print(f"Record {record_id} is not here: `git obversa record sync` fetches it.")
    return 0


def format_record(turns: list[dict]) -> str:
    """TURNS of a kept record as text: a heading line per turn, its text indented."""
    out = []
    for turn in turns:
        kind = turn["kind"].removeprefix("engine:")
        about = ", ".join(
            str(turn[key]) for key in ("agent", "model", "session", "time") if turn.get(key)
        )
        out.append(f"#{turn['seq']} {turn['stage']} ({kind}{'; ' + about if about else ''})\n")
        out.append(textwrap.indent(turn["text"].rstrip("\n"), "    ", lambda line: True) + "\n")
    count = len(turns)
    out.append(f"{count} kept turn{'' if count == 1 else 's'}.\n")
    return "".join(out)


def run_drop(args: argparse.Namespace) -> int:
    from git_obversa.record.kept import RecordError, drop_records, is_id

    if args.record_id is not None:
        if not is_id(args.record_id):
            raise Failure(f"{args.record_id!r} is not a record id (16 hex digits)")
        sha, ids = None, [args.record_id]
    else:
        sha, ids = commit_records(args.commit)
        if not ids:
            raise Failure(f"commit {sha[:12]} keeps no record: its message names none")
    try:
        dropped = drop_records(ids)
    except (RecordError, git.GitError) as error:
        raise Failure(str(error)) from error
    if args.json:
        print_json({"commit": sha, "ids": ids, "dropped": dropped})
    else:
        for record_id in ids:
            state = "dropped" if record_id in dropped else "was not kept here; stays dropped"
            print(f"Record {record_id} {state}.")
    return 0


def run_sync(args: argparse.Namespace) -> int:
    from git_obversa.record.kept import RecordError, sync

    try:
        report = sync(args.remote)
    except (RecordError, git.GitError) as error:
        raise Failure(str(error)) from error
    if args.json:
        print_json(report)
    else:
        print(
            f"Records with {report['remote']}: {report['received']} received, "
            f"{report['sent']} sent, {report['records']} kept here."
        )
    return 0
