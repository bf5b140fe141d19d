"""Git's terminal conventions for `git obversa`: the pager and colour.

A command that can print pages declares `paged=True` (`parser.set_defaults`); `start`
then pipes its output through a pager when, and only when, Git would: stdout is a
terminal, no `--no-pager`, and `pager.obversa.<command>` / `pager.obversa` do not say
false. The pager is Git's: `GIT_PAGER`, else `core.pager`, else `PAGER`, else `less`
(with `LESS=FRX`, so a short output stays on the screen); "" or `cat` means none.

Colour follows `--color[=WHEN]` / `--no-color`, else `color.obversa`, else `color.ui`
(`auto` by default): in `auto` only a terminal, or a pager Git or we started (unless
`color.pager` is false), gets colour. A pipe gets colour only from `--color=always` on
the command line (where Git would also honour `color.ui=always`): the configuration is
read only for a terminal or a pager, so a script piping `why` pays no extra process.
"""

import os
import sys

from git_obversa.lean.grammar import Argument

# subprocess costs milliseconds to import: only a pager or a config read needs it, and a
# `why` answered from the blame cache spawns its git processes without it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    import subprocess

# Git's default colours: a commit line is yellow (color.diff.commit), headings bold.
STYLES = {"commit": "\033[33m", "heading": "\033[1m", "reason": "\033[36m"}
RESET = "\033[m"

_colour = False
_pager: "subprocess.Popen[bytes] | None" = None
_paged_descriptors: list[int] = []  # our stdout (and stderr) while they feed the pager


# `--color[=WHEN]` and `--no-color`, Git's spelling, for a command that colours.
COLOR_OPTIONS = (
    Argument(
        "--color",
        nargs="?",
        const="always",
        choices=("always", "never", "auto"),
        metavar="WHEN",
        help="colour the output: always, never or auto (default: color.ui, else auto)",
    ),
    Argument("--no-color", dest="color", action="store_const", const="never"),
)


def paint(text: str, style: str) -> str:
    """TEXT in STYLE when this run prints colour, else TEXT unchanged."""
    return f"{STYLES[style]}{text}{RESET}" if _colour and text else text


def start(args: "argparse.Namespace", command: str) -> None:
    """Decide colour and start the pager for this run, as Git would for COMMAND."""
    global _colour
    if getattr(args, "json", False):
        return  # JSON is for programs: never paged, never coloured
    asked = getattr(args, "color", None)
    terminal = _is_terminal(sys.stdout)
    git_pager = os.environ.get("GIT_PAGER_IN_USE", "").lower() in ("1", "true", "yes")
    if not (terminal or git_pager or asked not in (None, "never")):
        return
    config = _read_config()
    paging = terminal and getattr(args, "paged", False) and not args.no_pager
    pager = _pager_command(config, command) if paging else None
    when = asked or _colour_setting(config)
    if when == "always":
        _colour = True
    elif when == "auto" and os.environ.get("TERM", "dumb") != "dumb":  # Git's test
        colour_in_pager = config.get("color.pager", "true").lower() not in ("false", "no", "0")
        _colour = terminal if not (pager or git_pager) else colour_in_pager
    if pager:
        _start_pager(pager)


def finish() -> None:
    """Hand the pager the end of the output and wait until the user quits it."""
    global _pager
    if _pager is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass  # the user quit the pager early: nothing more to show
    # Every copy of the pipe's write end must close for the pager to see end of file.
    devnull = os.open(os.devnull, os.O_WRONLY)
    for descriptor in _paged_descriptors:
        os.dup2(devnull, descriptor)
    os.close(devnull)
    assert _pager.stdin is not None
    _pager.stdin.close()
    _pager.wait()
    _pager = None


def _start_pager(command: str) -> None:
    global _pager
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # Git's defaults: quit if one screen, keep colour
    env.setdefault("LV", "-c")
    import subprocess

    try:
        _pager = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        return  # no pager to be had: print straight to the terminal, as Git does
    sys.stdout.flush()
    assert _pager.stdin is not None
    descriptors = [1, 2] if _is_terminal(sys.stderr) else [1]
    for descriptor in descriptors:
        os.dup2(_pager.stdin.fileno(), descriptor)
        _paged_descriptors.append(descriptor)
    os.environ["GIT_PAGER_IN_USE"] = "true"  # as Git does: children see it


def _pager_command(config: dict[str, str], command: str) -> str | None:
    """The pager for COMMAND by Git's rules, or None for no pager."""
    chosen = config.get(f"pager.obversa.{command}", config.get("pager.obversa"))
    setting = _boolean(chosen) if chosen is not None else True
    if setting is False:
        return None
    if setting is None:  # a command, not a boolean: the pager for this command
        pager = chosen
    else:
        pager = os.environ.get("GIT_PAGER")
        if pager is None:
            pager = config.get("core.pager")
        if pager is None:
            pager = os.environ.get("PAGER", "less")
    if pager is None or pager.strip() in ("", "cat"):
        return None
    if _git_said_no_pager():
        return None
    return pager


def _colour_setting(config: dict[str, str]) -> str:
    value = config.get("color.obversa", config.get("color.ui", "auto")).lower()
    if value == "always":
        return "always"
    if value in ("never", "false", "no", "off", "0"):
        return "never"
    return "auto"  # auto, true (Git's meaning since 1.8.4) and anything unknown


def _boolean(value: str) -> bool | None:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "on", "1", ""):
        return True
    if lowered in ("false", "no", "off", "0"):
        return False
    return None


def _read_config() -> dict[str, str]:
    """The pager and colour settings, in one `git config` call (later values win)."""
    pattern = r"^(core\.pager|pager\.obversa(\..*)?|color\.(ui|pager|obversa))$"
    import subprocess

    try:
        found = subprocess.run(
            ["git", "config", "-z", "--get-regexp", pattern],
            capture_output=True,
            text=True,
        )
    except OSError:
        return {}
    config = {}
    for entry in found.stdout.split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            config[key] = value
    return config


def _git_said_no_pager() -> bool:
    """Whether `git --no-pager obversa ...` (or `git -P`) started us. Git tells an
    external command nothing about that option, so look at the parent's command line
    (Linux /proc; elsewhere the answer is no)."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            words = handle.read().decode(errors="replace").split("\0")
    except OSError:
        return False
    if not words or os.path.basename(words[0]) != "git" or "obversa" not in words:
        return False
    return bool({"--no-pager", "-P"} & set(words[1 : words.index("obversa")]))


def _is_terminal(stream: object) -> bool:
    try:
        return stream.isatty()  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False
