"""`git obversa memory`: the memory port on the command line.

One verb per port command, plus `exec` (a JSON-lines bridge for agent harnesses and other
languages) and `scopes`. The repository is the current directory; the scope comes from
`--scope`, else `git config obversa.scope`, else `default`. The Git adapter
is imported only when a verb runs, so `git obversa memory -h` stays cheap.
"""

import os
import sys

from git_obversa.cli import Failure, UsageError, count, line_range, print_json, whole_number
from git_obversa.lean.grammar import Argument, Grammar
from git_obversa.memory import store_git
from git_obversa.memory.port import (
    MEMORY_ROOT,
    SCOPE_KEY,
    MemoryFailure,
    MemoryLimits,
    logical_lines,
)
from git_obversa.repo import git

TYPE_CHECKING = False  # typing costs a one-shot command its import
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

DEFAULT_SCOPE = "default"

GROUP_EPILOG = """\
examples:
  git obversa memory create /memories/decisions.md "Retry timeouts only."
  echo "- keep the API small" | git obversa memory insert decisions.md 1
  git obversa memory view /memories/decisions.md
  git obversa memory view                      list /memories
  git obversa memory exec < commands.jsonl     one JSON command per line

Memory files live in a private ref of this repository (refs/obversa/memory/v1/...),
one ref per scope: no commit, branch, index or worktree file is touched. Paths are
/memories/... (a path without a leading slash is taken relative to /memories).
Extensions: .md .txt .json .py .yaml .yml. Errors print the port's error code.
"""

VERB_HELP = {
    "view": "show a file with line numbers, or list a directory",
    "create": "create or overwrite a file",
    "str-replace": "replace the one occurrence of OLD with NEW in a file",
    "insert": "insert text at a zero-based line slot",
    "delete": "delete a file, or a directory and everything below it",
    "rename": "rename a file or directory (never overwrites)",
    "exec": "run JSON commands from stdin, one per line, one JSON result per line",
    "scopes": "list the memory scopes stored in this repository",
    "log": "list the states of a scope, newest first, with what changed",
    "restore": "make an earlier state of a scope current again (itself undoable)",
}

VERB_EPILOG = {
    "view": """\
examples:
  git obversa memory view                       the root directory
  git obversa memory view /memories/notes       a directory (subdirectories end in /)
  git obversa memory view notes/plan.md         a file, with line numbers
  git obversa memory view notes/plan.md -r 2 -1 from line 2 to the end
""",
    "create": """\
examples:
  git obversa memory create notes/plan.md "first step"
  git obversa memory create notes/plan.md - < plan.md
  printf 'a\\nb\\n' | git obversa memory create notes/plan.md

Overwrites an existing file. When the scope is full, the least recently written
files are evicted (the confirmation names them).
""",
    "str-replace": """\
examples:
  git obversa memory str-replace notes/plan.md "first step" "second step"

OLD must occur exactly once; it is matched literally.
""",
    "insert": """\
examples:
  git obversa memory insert notes/plan.md 0 "a new first line"
  echo "last line" | git obversa memory insert notes/plan.md 3

LINE is a slot between lines: 0 is before the first, the line count appends.
""",
    "delete": """\
examples:
  git obversa memory delete notes/plan.md
  git obversa memory delete /memories/notes     the directory and all files below it
""",
    "rename": """\
examples:
  git obversa memory rename notes/plan.md notes/done.md
  git obversa memory rename /memories/notes /memories/archive/notes
""",
    "exec": """\
examples:
  echo '{"command": "view", "path": "/memories"}' | git obversa memory exec
  git obversa memory exec --scope agent-1 --limits '{"max_files": 1024}'

Reads one JSON command per line on stdin and writes one JSON result per line on
stdout, flushed after each, until stdin closes. Commands use the fields of Anthropic's
memory tool (path, file_text, old_str, new_str, insert_line, insert_text, view_range,
old_path, new_path). A line that is not JSON gets an INVALID_COMMAND result; the
process keeps going. Exit status 0 when stdin ends or the reader closes stdout.
""",
    "scopes": """\
examples:
  git obversa memory scopes
  git obversa memory scopes --json

A scope is stored under the SHA-256 of its name and shown as "name (digest)"; the
current scope is marked with *. A scope written by another implementation has no name
here until a write names it (--scope NAME). Wherever --scope is taken, a name, a full
digest or a unique digest prefix (6 hex digits or more) is accepted.
""",
    "log": """\
examples:
  git obversa memory log                        the current scope
  git obversa memory log --scope team -n 5      the five newest states
  git obversa memory log --scope 37a8eec1 --json

Every change of a scope is kept: a command, an import, a sync or merge, a drop, a
restore; "unrecorded" marks a state written without history (another implementation).
Each line: state id, time (UTC), action, what changed (+added ~changed -removed).
The states live in refs/obversa/history/v1/<digest>: `git gc` keeps them.
""",
    "restore": """\
examples:
  git obversa memory log --scope team
  git obversa memory restore --scope team 1a2b3c4d

Brings the scope back to STATE as a new state, so a restore is undone the same way.
Works after `memory drop` too: the dropped scope's states are still listed by `log`.
""",
}


def parse_limits(text: str) -> MemoryLimits:
    from git_obversa.lean import jsonscan

    try:
        return MemoryLimits.resolve(jsonscan.loads(text))
    except (ValueError, TypeError) as error:
        import argparse  # only to say what was wrong: argparse reads this line

        raise argparse.ArgumentTypeError(f"invalid limits {text!r}: {error}") from None


# --scope, --limits and --json, shared by every verb of this module, listed first.
COMMON = (
    Argument("--scope", help="memory scope (default: git config obversa.scope, else 'default')"),
    Argument(
        "--limits",
        type=parse_limits,
        metavar="JSON",
        help="limits, e.g. '{\"max_files\": 512}' (default: 65536 per file, 1 MiB, 256 files)",
    ),
    Argument("--json", action="store_true", help="print the result as JSON"),
)


def declared(name: str, words: list[str]) -> tuple[Grammar, list[str], dict] | None:
    """The grammar of the verb WORDS start with, the words it reads, and the verb; None
    for anything else (the sync verbs, help of the group)."""
    if not words or words[0] not in VERBS:
        return None
    return VERBS[words[0]], words[1:], {"verb": words[0]}


def add_arguments(parser: "argparse.ArgumentParser", name: str) -> None:
    add_arguments_for(parser, name, [])


def add_arguments_for(parser: "argparse.ArgumentParser", name: str, words: list[str]) -> None:
    """The verbs of `git obversa memory`; when WORDS (the command line after `memory`)
    start with one of this module's verbs, that verb alone: a one-shot command does not
    build the parsers of the fifteen others (milliseconds of its start)."""
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = GROUP_EPILOG
    parser.set_defaults(run=lambda args: _usage(parser))
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    only = words[0] if words and words[0] in VERBS else None
    for verb, grammar in VERBS.items():
        if only in (None, verb):
            grammar.add_to(
                verbs.add_parser(
                    verb,
                    help=VERB_HELP[verb],
                    description=VERB_HELP[verb],
                    epilog=VERB_EPILOG[verb],
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                )
            )
    if only is None:
        # Sharing verbs (push, pull, sync, export, import, drop) live in their own module.
        from git_obversa.cli import memory_sync

        memory_sync.add_verbs(verbs)


def _usage(parser: "argparse.ArgumentParser") -> int:
    parser.print_help(sys.stderr)
    return 2


def memory_path(path: str) -> str:
    """A path as given, or relative to /memories when it has no leading slash."""
    return path if path.startswith("/") else f"{MEMORY_ROOT}/{path}"


def current_scope(args: "argparse.Namespace") -> str:
    return scope_reader(args)()


def scope_reader(
    args: "argparse.Namespace", configured: "Callable[[], str] | None" = None
) -> "Callable[[], str]":
    """The scope the command line names, when called: --scope, else `git config
    obversa.scope` (CONFIGURED, when the caller has asked git for it already; else asked
    now, so that it runs while the caller imports what it needs), else "default"."""
    if args.scope is not None:
        return lambda: args.scope
    if configured is not None:
        return lambda: configured().strip() or DEFAULT_SCOPE
    # git.started, not git.run: a one-shot command need not import subprocess.
    answer = git.started([["config", "--get", SCOPE_KEY]])

    def scope() -> str:
        [(_, configured)] = answer()
        return configured.decode("utf-8", "replace").strip() or DEFAULT_SCOPE

    return scope


def open_memory(args: "argparse.Namespace", *, one_shot: bool = True) -> "Any":
    """The scope the command line names. ONE_SHOT: this process runs one command and
    exits, so it asks git where the store is (and the configured scope, in the same
    `git config` where it can) before it imports the adapter, and hashes what it writes
    without loading OpenSSL (`use_builtin_digests`)."""
    configured = None
    if one_shot:
        from git_obversa.memory import gitstore

        # git answers while the adapter's modules load.
        asked = SCOPE_KEY if args.scope is None else None
        configured = store_git.start_locating(os.getcwd(), asked)
        gitstore.use_builtin_digests()
    scope = scope_reader(args, configured)
    from git_obversa.memory.git_memory import open_scope

    try:
        return open_scope(os.getcwd(), scope(), args.limits)
    except TypeError as error:  # a scope the port refuses
        raise Failure(f"--scope: {error}") from None
    except MemoryFailure as error:
        raise Failure(f"{error.code}: {error.message}") from None


def read_text(text: str | None, what: str, limits: MemoryLimits | None = None) -> str:
    """TEXT itself, or stdin when TEXT is '-' or omitted with stdin not a terminal."""
    if text is not None and text != "-":
        return text
    if text is None and sys.stdin.isatty():
        raise UsageError(f"give {what} as an argument, or '-' to read it from stdin")
    cap = 4 * (limits or MemoryLimits()).max_file_bytes  # what any file could hold, and more
    data = sys.stdin.buffer.read(cap + 1)
    if len(data) > cap:
        raise Failure(f"{what} on stdin is over {cap} bytes, more than a memory file can hold")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Failure(f"{what} on stdin is not valid UTF-8") from None


def checked(result: "dict[str, Any]", as_json: bool) -> "dict[str, Any]":
    """Print a port RESULT as JSON when asked; a failed one becomes a Failure (printed as
    that result under --json)."""
    if not result["ok"]:
        error = result["error"]
        where = f" ({error['path']})" if "path" in error else ""
        raise Failure(f"{error['code']}: {error['message']}{where}", error["code"], result)
    if as_json:
        print_json(result)
    return result


def execute(args: "argparse.Namespace", command: "dict[str, Any]") -> "dict[str, Any]":
    """Run COMMAND; print the result as JSON or hand back its value for text output."""
    return checked(open_memory(args).execute(command), args.json)


def run_view(args: "argparse.Namespace") -> int:
    command: dict[str, Any] = {"command": "view", "path": memory_path(args.path)}
    if args.range is not None:
        command["view_range"] = list(args.range)
    result = execute(args, command)
    if args.json:
        return 0
    value = result["value"]
    if value["kind"] == "directory":
        for entry in value["entries"]:
            suffix = "/" if entry["kind"] == "directory" else ""
            sys.stdout.write(entry["path"] + suffix + "\n")
        return 0
    first = value["lines"]["start"]
    for number, line in enumerate(logical_lines(value["text"]), start=first):
        sys.stdout.write(f"{number:6}\t{line}\n")
    return 0


def _evictions(value: "dict[str, Any]") -> str:
    evicted = value["evicted"]
    return f"; evicted {', '.join(evicted)}" if evicted else ""


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def run_create(args: "argparse.Namespace") -> int:
    text = read_text(args.text, "the file's text", args.limits)
    result = execute(args, {"command": "create", "path": memory_path(args.path), "file_text": text})
    if not args.json:
        value = result["value"]
        verb = "Overwrote" if value["overwritten"] else "Created"
        size = _counted(value["byte_length"], "byte")
        print(f"{verb} {value['path']} ({size}){_evictions(value)}")
    return 0


def run_str_replace(args: "argparse.Namespace") -> int:
    command = {
        "command": "str_replace",
        "path": memory_path(args.path),
        "old_str": args.old,
        "new_str": args.new,
    }
    result = execute(args, command)
    if not args.json:
        value = result["value"]
        size = _counted(value["byte_length"], "byte")
        print(f"Edited {value['path']} ({size}){_evictions(value)}")
    return 0


def run_insert(args: "argparse.Namespace") -> int:
    text = read_text(args.text, "the text to insert", args.limits)
    command = {
        "command": "insert",
        "path": memory_path(args.path),
        "insert_line": args.line,
        "insert_text": text,
    }
    result = execute(args, command)
    if not args.json:
        value = result["value"]
        size = _counted(value["byte_length"], "byte")
        print(f"Inserted at line {args.line} of {value['path']} ({size}){_evictions(value)}")
    return 0


def run_delete(args: "argparse.Namespace") -> int:
    result = execute(args, {"command": "delete", "path": memory_path(args.path)})
    if not args.json:
        value = result["value"]
        files = _counted(value["deleted_files"], "file")
        print(f"Deleted {value['path']} ({files}, {_counted(value['freed_bytes'], 'byte')})")
    return 0


def run_rename(args: "argparse.Namespace") -> int:
    command = {
        "command": "rename",
        "old_path": memory_path(args.old_path),
        "new_path": memory_path(args.new_path),
    }
    result = execute(args, command)
    if not args.json:
        value = result["value"]
        files = _counted(value["moved_files"], "file")
        print(f"Renamed {value['old_path']} to {value['new_path']} ({files})")
    return 0


def _invalid_line(message: str) -> "dict[str, Any]":
    error = {"code": "INVALID_COMMAND", "message": message}
    return {"ok": False, "command": "unknown", "error": error}


def line_cap(limits: MemoryLimits | None) -> int:
    """The longest command line `exec` reads whole: two texts of the largest file,
    every character JSON-escaped (6 bytes), plus room for paths and field names."""
    return 12 * (limits or MemoryLimits()).max_file_bytes + 65536


def command_lines(stream: "Any", cap: int) -> "Any":
    """Lines of STREAM, each read only up to CAP bytes: a longer line yields None (it is
    read on in pieces and dropped, so memory stays within a small multiple of CAP)."""
    while True:
        raw = stream.readline(cap + 1)  # readline, not iteration: answer as lines arrive
        if not raw:
            return
        if len(raw) <= cap or raw.endswith(b"\n"):
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):
            raw = stream.readline(cap + 1)
        yield None


def run_exec(args: "argparse.Namespace") -> int:
    from json import dumps, loads

    memory = open_memory(args, one_shot=False)
    stdin, stdout = sys.stdin.buffer, sys.stdout
    cap = line_cap(args.limits)
    for raw in command_lines(stdin, cap):
        if raw is None:
            result = _invalid_line(f"The command line exceeds {cap} bytes.")
        elif not raw.strip():
            continue
        else:
            result = None
        try:
            command = loads(raw.decode("utf-8")) if result is None else None
        except UnicodeDecodeError:
            result = _invalid_line("The command line is not valid UTF-8.")
        except (ValueError, RecursionError) as error:
            result = _invalid_line(f"The command line is not valid JSON: {error}.")
        else:
            result = result or memory.execute(command)
        try:
            # ASCII JSON: every consumer can read it, whatever the text holds.
            stdout.write(dumps(result) + "\n")
            stdout.flush()
        except BrokenPipeError:
            # The reader went away: the session is over, as when stdin closes. Point
            # stdout at /dev/null so that Python's final flush stays quiet too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
            break
    return 0


def run_scopes(args: "argparse.Namespace") -> int:
    from git_obversa.memory.git_memory import list_scopes
    from git_obversa.memory.names import display

    try:
        scopes = list_scopes(os.getcwd())
    except MemoryFailure as error:
        raise Failure(f"{error.code}: {error.message}") from None
    if args.json:
        print_json(scopes)
        return 0
    current = _current_digest(args)
    labels = [display(scope["digest"], scope["name"]) for scope in scopes]
    width = max((len(label) for label in labels), default=0)
    for scope, label in zip(scopes, labels, strict=True):
        mark = "*" if scope["digest"] == current else " "
        if scope["files"] is None:  # stored data that failed validation
            print(f"{mark} {label:<{width}}  UNSAFE_STORAGE: {scope.get('error')}")
            continue
        files = _counted(scope["files"], "file")
        print(f"{mark} {label:<{width}}  {files:>10}  {_counted(scope['bytes'], 'byte'):>14}")
    return 0


def _current_digest(args: "argparse.Namespace") -> str | None:
    from git_obversa.memory.gitstore import open_store
    from git_obversa.memory.names import resolve_scope

    try:
        with open_store(os.getcwd()) as store:
            return resolve_scope(store, current_scope(args), existing=False).digest
    except MemoryFailure:
        return None


def _failure(error: MemoryFailure) -> Failure:
    return Failure(f"{error.code}: {error.message}")


def run_log(args: "argparse.Namespace") -> int:
    from git_obversa.memory.history import scope_log

    try:
        log = scope_log(os.getcwd(), current_scope(args), limit=args.max_count)
    except MemoryFailure as error:
        raise _failure(error) from None
    if args.json:
        print_json(log)
        return 0
    if not log:
        print("no states recorded for this scope yet")
    for entry in log:
        when = entry["time"].replace("T", " ").replace("Z", "")
        if "error" in entry:
            changes = f"UNSAFE_STORAGE: {entry['error']}"
        elif not entry["present"]:
            changes = "scope dropped"
        else:
            changes = (
                " ".join(
                    [f"+{p}" for p in entry["added"]]
                    + [f"~{p}" for p in entry["changed"]]
                    + [f"-{p}" for p in entry["removed"]]
                )
                or "no file changed"
            )
        print(f"{entry['state'][:12]}  {when}  {entry['summary']}  [{changes}]")
    return 0


def run_restore(args: "argparse.Namespace") -> int:
    from git_obversa.memory.history import restore_scope
    from git_obversa.memory.names import display

    try:
        restored = restore_scope(os.getcwd(), current_scope(args), args.state, args.limits)
    except MemoryFailure as error:
        raise _failure(error) from None
    if args.json:
        print_json(restored)
        return 0
    label = display(restored["digest"], restored["scope"])
    files = _counted(restored["files"], "file")
    if restored["unchanged"]:
        print(f"{label} already holds state {restored['restored'][:12]} ({files})")
    else:
        print(
            f"restored {label} to state {restored['restored'][:12]} ({files}); "
            f"new state {restored['state'][:12]} (undo: restore the state before it)"
        )
    return 0


# A port verb's process ends as soon as its output is flushed, skipping the interpreter's
# teardown (`cli._exit_at_once`): when `execute` returns, its writes are in place, and no
# thread, lock or child process outlives it.
ONCE = {"exit_at_once": True}

# Each verb's grammar, in the order `git obversa memory -h` lists them.
VERBS = {
    "view": Grammar(
        [
            *COMMON,
            Argument("path", nargs="?", default=MEMORY_ROOT, help="default: /memories"),
            line_range("-r", "--range"),
        ],
        run=run_view,
        **ONCE,
    ),
    "create": Grammar(
        [
            *COMMON,
            Argument("path"),
            Argument("text", nargs="?", help="the file's text; '-' or omitted: read stdin"),
        ],
        run=run_create,
        **ONCE,
    ),
    "str-replace": Grammar(
        [
            *COMMON,
            Argument("path"),
            Argument("old", help="the text to find (exactly once)"),
            Argument("new", help="its replacement"),
        ],
        run=run_str_replace,
        **ONCE,
    ),
    "insert": Grammar(
        [
            *COMMON,
            Argument("path"),
            Argument("line", type=whole_number(0), help="zero-based slot: 0 inserts before line 1"),
            Argument("text", nargs="?", help="the lines to insert; '-' or omitted: stdin"),
        ],
        run=run_insert,
        **ONCE,
    ),
    "delete": Grammar([*COMMON, Argument("path")], run=run_delete, **ONCE),
    "rename": Grammar(
        [*COMMON, Argument("old_path"), Argument("new_path")], run=run_rename, **ONCE
    ),
    "exec": Grammar(COMMON, run=run_exec),
    "scopes": Grammar(COMMON, run=run_scopes),
    "log": Grammar(
        [
            *COMMON,
            Argument("-n", "--max-count", type=count, metavar="N", help="only the N newest"),
        ],
        run=run_log,
    ),
    "restore": Grammar(
        [
            *COMMON,
            Argument("state", help="a state id from `memory log` (or a unique prefix)"),
        ],
        run=run_restore,
    ),
}
