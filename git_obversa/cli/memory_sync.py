"""`git obversa memory push|pull|sync|export|import|drop`: scopes across machines.

`add_verbs(subparsers)` registers the verbs on the `memory` group. The sync machinery
(and the object store) is imported only when one of them runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from git_obversa.cli import Failure, print_json

SYNC_NOTE = """\
Memory refs (refs/obversa/memory/v1/*) travel with explicit refspecs. The remote's
scopes are fetched to refs/obversa-remote/<remote>/..., never over local memory, and
merged three-way against the last state both sides agreed on. A file changed on both
sides keeps the local text; the remote text lands beside it as <name>.from-<remote>.<ext>.
A push only replaces what was last agreed (--force-with-lease): if the remote moved in
between, its change is fetched and merged first. A scope missing on one side is deleted
on the other only if it was dropped there on purpose (`memory drop`); otherwise it is
sent back. Every deletion is listed with the command that undoes it. Details: docs/sync.md.
"""

VERBS: dict[str, tuple[str, str]] = {
    "push": (
        "send local memory changes to a remote (merging theirs first if needed)",
        """\
examples:
  git obversa memory push                   every changed scope, to origin
  git obversa memory push backup --scope team
  git obversa memory push --dry-run         what would be sent
""",
    ),
    "pull": (
        "fetch a remote's memory scopes and merge them into local memory",
        """\
examples:
  git obversa memory pull
  git obversa memory pull --json upstream
  git obversa memory pull --dry-run         what would be merged, without merging
""",
    ),
    "sync": (
        "pull, then push: both sides end with the same memory",
        """\
examples:
  git obversa memory sync
  git obversa memory sync origin --json
  git obversa memory sync --dry-run         what a sync would do, changing nothing
  git obversa memory sync --quiet           only problems (no report, no progress)

The commits' kept records (git obversa record sync) and the notes of who wrote
their lines (refs/notes/ai, refs/notes/agent-trace: docs/attribution.md) travel
too, merged with the remote's.
""",
    ),
    "export": (
        "print a scope as JSON (files, texts and write order)",
        """\
examples:
  git obversa memory export --scope team > team.json
""",
    ),
    "import": (
        "store a scope from an export file",
        """\
examples:
  git obversa memory import team.json
  git obversa memory import --replace team.json     overwrite an existing scope
  cat team.json | git obversa memory import -
""",
    ),
    "drop": (
        "delete a scope from this repository (and, at the next sync, from the remote)",
        """\
examples:
  git obversa memory drop --scope scratch
  git obversa memory drop --scope-digest 37a8eec1ce19     a scope known by its digest

The drop leaves a tombstone (refs/obversa/dropped/v1/<digest>), so the next sync deletes
the scope on the remote too, and every clone's sync after that deletes it there, unless
someone changed it meanwhile (their files come back). A scope that is merely missing
somewhere is never deleted. `git obversa memory log --scope S` lists its states and
`memory restore` brings one back, here or in any clone the drop reached.
""",
    ),
}


def add_verbs(subparsers: Any) -> None:
    """Register the sync verbs on the `memory` group's subparsers."""

    def verb(name: str) -> argparse.ArgumentParser:
        text, examples = VERBS[name]
        epilog = examples + ("\n" + SYNC_NOTE if name in ("push", "pull", "sync") else "")
        parser = subparsers.add_parser(
            name,
            help=text,
            description=text,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
        return parser

    for name in ("push", "pull", "sync"):
        parser = verb(name)
        parser.add_argument("remote", nargs="?", help="a configured remote (default: origin)")
        if name == "push":
            _scope_arguments(parser, "push only this scope", required=False)
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="say what would happen; change nothing here or there (the remote's refs "
            "are still fetched into refs/obversa-remote/)",
        )
        parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but problems")
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            help="show progress on stderr (default: on a terminal, for work that takes more "
            "than a second, unless --quiet)",
        )
        parser.add_argument(
            "--limits",
            type=_limits,
            metavar="JSON",
            help="limits a merged scope must hold and fetched scopes are checked against, "
            "e.g. '{\"max_files\": 512}'",
        )
        parser.set_defaults(run=run_exchange, exchange=name)

    export = verb("export")
    _scope_arguments(export, "the scope to export")
    export.set_defaults(run=run_export)

    load = verb("import")
    load.add_argument("file", help="an export file, or - for stdin")
    load.add_argument("--replace", action="store_true", help="overwrite an existing scope")
    load.set_defaults(run=run_import)

    drop = verb("drop")
    _scope_arguments(drop, "the scope to drop")
    drop.set_defaults(run=run_drop)


def _scope_arguments(parser: argparse.ArgumentParser, what: str, required: bool = True) -> None:
    """--scope NAME or --scope-digest HEX (a name never reads as a digest)."""
    given = parser.add_mutually_exclusive_group(required=required)
    given.add_argument("--scope", metavar="NAME", help=f"{what}, by name")
    given.add_argument(
        "--scope-digest",
        metavar="HEX",
        help=f"{what}, by its digest or a unique prefix of it (6 hex digits or more)",
    )


def _limits(text: str) -> Any:
    """--limits JSON as `MemoryLimits` (the rules are `MemoryLimits.resolve`'s)."""
    from git_obversa.memory.port import MemoryLimits

    try:
        return MemoryLimits.resolve(json.loads(text))
    except (ValueError, TypeError) as error:
        raise argparse.ArgumentTypeError(f"invalid limits {text!r}: {error}") from None


def run_exchange(args: argparse.Namespace) -> int:
    from git_obversa.cli.progress import TerminalProgress, wanted
    from git_obversa.sync import remote as sync

    kwargs: dict[str, Any] = {"limits": args.limits, "dry_run": args.dry_run}
    if wanted(args.progress, args.quiet, sys.stderr):
        # Asked for (--progress): shown from the start; on a terminal after a moment.
        kwargs["progress"] = TerminalProgress(sys.stderr, delay=0 if args.progress else None)
    if args.exchange == "push" and (args.scope, args.scope_digest) != (None, None):
        kwargs["scope"] = _checked_scope(args)
    try:
        report = getattr(sync, args.exchange)(os.getcwd(), args.remote, **kwargs)
    except sync.SyncError as error:
        raise Failure(str(error)) from None
    failed = [scope for scope in report.scopes if scope.error]
    if args.exchange == "sync" and not args.dry_run:  # commits' kept records travel too
        _sync_records(report.remote)
        _sync_notes(report.remote)
    if args.json:
        print_json(report.as_json())
    elif not args.quiet:
        _print_report(report)
    for scope in failed:
        print(f"git obversa memory: scope {scope.label}: {scope.error}", file=sys.stderr)
    return 1 if failed else 0


def _sync_records(remote: str) -> None:
    from git_obversa.record.kept import RecordError, sync

    try:
        sync(remote, os.getcwd())
    except Exception as error:  # memory synced; the records say why they did not
        detail = error if isinstance(error, RecordError) else type(error).__name__
        print(f"warning: kept records not synced with {remote}: {detail}", file=sys.stderr)


def _sync_notes(remote: str) -> None:
    """The notes of who wrote the lines (docs/attribution.md) travel with the records."""
    from git_obversa.attribution.travel import NotesError, sync
    from git_obversa.hooks.commit import settle_claim
    from git_obversa.record.turns import TurnStore

    try:
        # The pre-commit framework's route writes the last commit's notes when its claim
        # settles: before they are sent.
        settle_claim(str(TurnStore.for_worktree(os.getcwd()).directory), finished=False)
        sync(remote, os.getcwd())
    except Exception as error:  # memory synced; the notes say why they did not
        detail = error if isinstance(error, NotesError) else type(error).__name__
        print(f"warning: attribution notes not synced with {remote}: {detail}", file=sys.stderr)


def _checked_scope(args: argparse.Namespace) -> str:
    """The scope --scope names, or --scope-digest's prefix in the spelling that says so."""
    from git_obversa.memory.names import by_digest
    from git_obversa.memory.port import validate_scope

    if args.scope_digest is not None:
        return by_digest(args.scope_digest)
    try:
        return validate_scope(args.scope)
    except TypeError as error:
        raise Failure(f"--scope: {error}") from None


# What a scope report's words say, done and (dry run) to be done.
RECEIVED = {
    "pulled": ("pulled from {r}", "would pull from {r}"),
    "merged": ("merged with {r}", "would merge with {r}"),
    "deleted": ("dropped on {r}: deleted here", "dropped on {r}: would delete here"),
}
SENT = {
    "pushed": ("pushed to {r}", "would push to {r}"),
    "deleted": ("dropped here: deleted on {r}", "dropped here: would delete on {r}"),
}
SHOWN_PATHS = 5


def _print_report(report: Any) -> None:
    remote, tense = report.remote, 1 if report.dry_run else 0
    if not report.scopes:
        print(f"{remote}: memory already in sync")
        return
    for scope in report.scopes:
        done = []
        if scope.received:
            done.append(RECEIVED[scope.received][tense].format(r=remote))
            if scope.missing_here:
                done[-1] += " (this clone did not have it)"
        if scope.sent:
            done.append(SENT[scope.sent][tense].format(r=remote))
            if scope.missing_there:
                done[-1] += f" ({remote} did not have it)"
            if scope.repaired_there:
                done[-1] += f" (over {remote}'s damaged copy)"
        print(f"{scope.label}: {', '.join(done) or 'not synced'}")
        for conflict in scope.conflicts:
            print(f"  both changed {conflict.path}: theirs kept as {conflict.copy}")
        for path in scope.restored:
            print(f"  kept {path}: edited on one side, deleted on the other")
        if scope.removed:
            shown = ", ".join(scope.removed[:SHOWN_PATHS])
            more = len(scope.removed) - SHOWN_PATHS
            verb = "would remove" if report.dry_run else "removed"
            print(f"  {verb} here: {shown}" + (f" and {more} more" if more > 0 else ""))
        if scope.restore:
            print(f"  undo: {scope.restore}")
        for path in scope.evicted:
            print(f"  evicted {path} to stay within the memory limits")


def run_export(args: argparse.Namespace) -> int:
    from git_obversa.memory.scopes import ScopeIOError, export_scope

    try:
        exported = export_scope(os.getcwd(), _checked_scope(args))
    except ScopeIOError as error:
        raise Failure(str(error)) from None
    sys.stdout.write(json.dumps(exported, ensure_ascii=False, indent=1) + "\n")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from git_obversa.memory.scopes import ScopeIOError, import_scope, load_export

    try:
        imported = import_scope(os.getcwd(), load_export(args.file), replace=args.replace)
    except ScopeIOError as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json(imported)
    else:
        print(f"imported scope '{imported['scope']}': {imported['files']} files")
    return 0


def run_drop(args: argparse.Namespace) -> int:
    from git_obversa.memory.scopes import ScopeIOError, drop_scope

    try:
        dropped = drop_scope(os.getcwd(), _checked_scope(args))
    except ScopeIOError as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json(dropped)
        return 0
    from git_obversa.memory.names import display

    print(f"dropped scope {display(dropped['digest'], dropped['name'])}")
    if dropped["restore"]:
        print(f"  undo: {dropped['restore']}")
    return 0
