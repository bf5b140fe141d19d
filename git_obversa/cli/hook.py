"""`git obversa hook prepare-commit-msg|commit-msg|post-commit`: what the shims run.

Fails open: any error is one warning line on stderr and exit 0, so a broken composer or
capture file never blocks a commit — unless `git config obversa.strict true`, where it
is one line and exit 1, and git stops the commit.
"""

from __future__ import annotations

import argparse
import os

EPILOG = """\
The shims that `git obversa install` writes call these. The pre-commit framework
(hook id obversa-reasoning) runs `commit-msg --alone`: one hook, so one line per
commit; it does the work of all three after the editor.

examples:
  git obversa hook prepare-commit-msg .git/COMMIT_EDITMSG message
  git obversa hook commit-msg .git/COMMIT_EDITMSG
  git obversa hook commit-msg --alone .git/COMMIT_EDITMSG
  git obversa hook post-commit
"""


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    hooks = parser.add_subparsers(dest="hook", metavar="HOOK", required=True)
    prepare = hooks.add_parser(
        "prepare-commit-msg",
        help="write this worktree's captured reasoning into the commit message",
        description="Compose this worktree's captured turns and write the Why: block "
        "into the commit message file; before the editor opens on an unwritten message, "
        "show it as comment lines instead (commit-msg writes it). Merge, squash, revert, "
        "cherry-pick and rebase messages are left alone.",
    )
    prepare.add_argument("message_file", help="the commit message file git passes")
    prepare.add_argument(
        "source",
        nargs="?",
        default=os.environ.get("PRE_COMMIT_COMMIT_MSG_SOURCE") or None,
        help="message, template, commit, merge or squash (absent: editor)",
    )
    prepare.add_argument("commit", nargs="?", help="the commit of an amend, -c or -C (unused)")
    prepare.set_defaults(run=run_prepare_commit_msg)
    edited = hooks.add_parser(
        "commit-msg",
        help="write the reasoning shown in the editor into the message you wrote",
        description="After the editor: if you wrote a message and kept the first line of "
        "the reasoning shown as comments, write it into the message as the Why: block. "
        "With --alone (the pre-commit framework's route, where no other hook runs): "
        "compose the pending reasoning and write it into the message you finished.",
    )
    edited.add_argument("message_file", help="the commit message file git passes")
    edited.add_argument(
        "--alone",
        action="store_true",
        help="the only hook installed (the pre-commit framework's route): compose the "
        "reasoning here and write it into the message as you finished it; the last "
        "commit's claim is settled here too, in place of post-commit",
    )
    edited.set_defaults(run=run_commit_msg)
    post = hooks.add_parser(
        "post-commit",
        help="clear the captured turns the new commit carries",
        description="Clear the captured turns the commit just made carries; turns "
        "captured since, or left out of the message, stay pending.",
    )
    post.set_defaults(run=run_post_commit)
    rewrite = hooks.add_parser(
        "post-rewrite",
        help="let commits rewritten by an amend or a rebase find their kept records",
        description="Read `old new` lines on stdin (as git gives them): each new commit "
        "inherits the kept records of its old ones that its message no longer names.",
    )
    rewrite.add_argument("kind", help="amend or rebase")
    rewrite.set_defaults(run=run_post_rewrite)


def run_prepare_commit_msg(args: argparse.Namespace) -> int:
    from git_obversa.hooks import commit as hook

    source = [args.source] if args.source else []
    return hook.run("prepare-commit-msg", [args.message_file, *source])


def run_commit_msg(args: argparse.Namespace) -> int:
    from git_obversa.hooks import commit as hook

    return hook.run("commit-msg", [args.message_file], alone=args.alone)


def run_post_commit(args: argparse.Namespace) -> int:
    from git_obversa.hooks import commit as hook

    return hook.run("post-commit", [])


def run_post_rewrite(args: argparse.Namespace) -> int:
    from git_obversa.hooks import commit as hook

    return hook.run("post-rewrite", [args.kind])
