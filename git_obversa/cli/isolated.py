"""`git obversa isolated [--label L] -- CMD ...`: a command in its own worktree."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Mapping

from git_obversa.cli import Failure, print_json

EPILOG = """\
CMD runs in a fresh worktree on a new branch lines/<label>-<n>. It may capture its
reasoning with `git obversa record note` (only that worktree's turns are used; their
stage defaults to the label, so the commit's trailer reads Obversa-Record: <label>). When
CMD exits 0, its changes are committed there with the captured reasoning in the
message, merged into the current branch with --no-ff, and the worktree and branch are
removed. When it fails, nothing lands. When the merge cannot happen (local changes in
the way, a conflict), the branch stays and the error names it with its commit. Outside a
Git work tree it refuses to run.

examples:
  git obversa isolated --label docs -- sh -c 'echo "## Retries" >> README.md &&
      git obversa record note "Document retries: users asked twice."'
  git obversa isolated -- make format
  git blame README.md   # the new line names the fork commit, whose body is the why
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--label", default="isolated", help="names the stage and its branch")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command")
    parser.set_defaults(run=run, usage_error=parser.error)


def run(args: argparse.Namespace) -> int:
    from git_obversa.repo.git import GitError
    from git_obversa.stages.isolated import isolated

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        args.usage_error("no command given: git obversa isolated [--label L] -- CMD ...")

    env = with_stage_config(os.environ, args.label)

    def job(workspace: dict) -> dict:
        try:
            exited = subprocess.run(command, cwd=workspace["dir"], env=env).returncode
        except OSError as error:
            return {"status": "fail", "summary": f"{command[0]} could not start: {error}"}
        if exited != 0:
            return {"status": "fail", "summary": f"{command[0]} exited {exited}; nothing landed"}
        return {"status": "pass", "summary": f"{command[0]} exited 0"}

    try:
        outcome = isolated(".", job, label=args.label, require_repository=True)
    except RuntimeError as error:
        raise Failure(str(error)) from error
    except GitError as error:  # git failed while committing or landing
        raise Failure(f"git {error.args_[0]} failed: {error}") from error
    if args.json:
        print_json(outcome)
    elif outcome["status"] == "pass":
        landed = outcome.get("commit")
        print(f"landed {landed[:12]}" if landed else "nothing changed; nothing to land")
    if outcome["status"] != "pass":
        raise Failure(outcome.get("summary") or "the command failed")
    return 0


def with_stage_config(environ: Mapping[str, str], label: str) -> dict[str, str]:
    """ENVIRON plus `obversa.stage=LABEL` in Git's own config-from-environment slots, so
    `git obversa record note` in CMD files its turns under the stage's label."""
    env = dict(environ)
    count = int(env.get("GIT_CONFIG_COUNT") or 0)
    env[f"GIT_CONFIG_KEY_{count}"] = "obversa.stage"
    env[f"GIT_CONFIG_VALUE_{count}"] = label
    env["GIT_CONFIG_COUNT"] = str(count + 1)
    return env
