"""`git obversa ground|curate|consolidate`: the memory mechanics from the command line.

The callbacks of `curate` and `consolidate` are commands: each is run once through the
shell with its input as JSON on stdin, and prints the decision (JSON) or the text.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from git_obversa.cli import Failure, count, print_json

GROUND_EPILOG = """\
Sources are read in path order, directories recursively, and bounded (20 files, 4000
characters per file, 16000 in all by default). The prompt starts with a warning that the
text is untrusted data.

examples:
  git obversa ground --source /memories/project.md --optional /memories/local.md
  git obversa ground --source notes --scope agent-1 --json
  git obversa ground --corpus docs --source guide.md --max-total-chars 8000
"""

CURATE_EPILOG = """\
DECIDE_CMD runs once through the shell. It reads {"intent", "documents", "prompt"} as JSON
on stdin and prints {"brief": "...", "sources": ["/memories/..."]}. If it fails or prints
anything else, the full grounded prompt is printed instead (a warning says why).

example:
  git obversa curate --source notes --intent "Plan the release." \\
      --decide-cmd 'python3 pick.py'
"""

CONSOLIDATE_EPILOG = """\
FOLD_CMD runs once through the shell. It reads {"prior", "documents", "prompt"} as JSON
on stdin (prior: the target's text, or null) and prints the new text of TARGET, which is
written once. If TARGET changes while FOLD_CMD runs (another consolidate, another
process), nothing is written and the command fails with CONFLICT: run it again.

example:
  git obversa consolidate --target summary.md --source sessions \\
      --fold-cmd 'python3 summarise.py'
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = {
        "ground": GROUND_EPILOG,
        "curate": CURATE_EPILOG,
        "consolidate": CONSOLIDATE_EPILOG,
    }[name]
    if name == "consolidate":
        parser.add_argument("--target", required=True, help="the memory file to write")
        parser.add_argument("--fold-cmd", required=True, metavar="FOLD_CMD")
        parser.add_argument(
            "--max-output-chars", type=count, default=16000, metavar="N", help="default 16000"
        )
    if name == "curate":
        parser.add_argument("--decide-cmd", required=True, metavar="DECIDE_CMD")
        parser.add_argument("--intent", default="", help="what the brief is for")
        parser.add_argument(
            "--max-brief-chars", type=count, default=2000, metavar="N", help="default 2000"
        )
    parser.add_argument(
        "--source", action="append", default=[], metavar="PATH", help="a required source"
    )
    parser.add_argument(
        "--optional",
        action="append",
        default=[],
        metavar="PATH",
        help="a source that may be missing",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scope", help="memory scope (default: git config obversa.scope)")
    if name != "consolidate":
        where.add_argument("--corpus", metavar="DIR", help="read a Markdown directory instead")
        for limit in ("max-files", "max-chars-per-file", "max-total-chars"):
            parser.add_argument(f"--{limit}", type=count, metavar="N")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(run={"ground": run_ground, "curate": run_curate}.get(name, run_consolidate))


def _memory(args: argparse.Namespace) -> Any:
    if getattr(args, "corpus", None) is not None:
        from git_obversa.corpus.markdown import open_markdown_corpus

        try:
            return open_markdown_corpus(args.corpus, index=False).memory
        except TypeError as error:
            raise Failure(f"cannot open the corpus {args.corpus}: {error}") from None
    from git_obversa.cli.memory import open_memory

    args.limits = None
    return open_memory(args)


def _sources(args: argparse.Namespace) -> list[dict[str, Any]]:
    from git_obversa.cli.memory import memory_path

    sources = [{"path": memory_path(path)} for path in args.source]
    sources += [{"path": memory_path(path), "optional": True} for path in args.optional]
    if not sources:
        raise Failure("name at least one --source or --optional path")
    return sources


def _explain(error: dict[str, Any]) -> str:
    cause = error.get("cause")
    if not cause:
        return f"{error['code']}: {error['message']}"
    where = f" ({cause['path']})" if "path" in cause else ""
    return f"{error['code']}: {error['message']} {cause['code']}: {cause['message']}{where}"


def _grounded(args: argparse.Namespace) -> dict[str, Any]:
    from git_obversa.memory.mechanics import ground

    limits = {
        "max_files": args.max_files,
        "max_chars_per_file": args.max_chars_per_file,
        "max_total_chars": args.max_total_chars,
    }
    try:
        result = ground(_memory(args), _sources(args), limits)
    except TypeError as error:
        raise Failure(str(error)) from None
    if not result["ok"]:
        if args.json:
            print_json(result)
        raise Failure(_explain(result["error"]))
    return result["value"]


def run_ground(args: argparse.Namespace) -> int:
    grounded = _grounded(args)
    if args.json:
        print_json(grounded)
    else:
        print(grounded["prompt"])
    for path in grounded["missing"]:
        print(f"git obversa ground: optional source missing: {path}", file=sys.stderr)
    return 0


def callback(command: str, what: str) -> Callable[[dict[str, Any]], str]:
    """A function that runs COMMAND with its argument as JSON on stdin and returns stdout."""

    def call(request: dict[str, Any]) -> str:
        completed = subprocess.run(
            command,
            shell=True,
            input=json.dumps(request, ensure_ascii=False),
            capture_output=True,
            text=True,
            env=os.environ,
        )
        if completed.returncode != 0:
            detail = completed.stderr.strip().splitlines()
            reason = detail[-1] if detail else f"exit status {completed.returncode}"
            print(f"git obversa {what}: the command failed: {reason}", file=sys.stderr)
            raise RuntimeError(reason)
        return completed.stdout

    return call


def run_curate(args: argparse.Namespace) -> int:
    from git_obversa.memory.mechanics import curate

    grounded = _grounded(args)
    run = callback(args.decide_cmd, "curate")

    def decide(request: dict[str, Any]) -> Any:
        output = run(request)
        try:
            return json.loads(output)
        except json.JSONDecodeError:
            return output  # not a decision: curate falls back (invalid_decision)

    try:
        curated = curate(grounded, args.intent, decide, args.max_brief_chars)
    except TypeError as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json(curated)
    else:
        print(curated["prompt"])
    if curated["mode"] == "grounded":
        print(
            f"git obversa curate: {curated['reason']}: printed the whole grounded prompt",
            file=sys.stderr,
        )
    return 0


def run_consolidate(args: argparse.Namespace) -> int:
    from git_obversa.cli.memory import memory_path
    from git_obversa.memory.mechanics import consolidate

    target = memory_path(args.target)
    sources = _sources(args)
    fold = callback(args.fold_cmd, "consolidate")
    try:
        result = consolidate(_memory(args), target, sources, fold, args.max_output_chars)
    except TypeError as error:
        raise Failure(str(error)) from None
    if args.json:
        print_json(result)
    if not result["ok"]:
        message = _explain(result["error"])
        if result["error"].get("cause", {}).get("code") == "CONFLICT":
            message += " Run it again to fold in the newer text."
        raise Failure(message)
    if not args.json:
        print(f"wrote {target} ({len(result['value']['text'])} characters)")
    return 0
