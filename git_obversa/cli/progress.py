"""Progress of long work on a terminal, the way git shows it.

`TerminalProgress(stream)` is called with (what, done, total). It writes one line per
kind of work to STREAM (stderr), rewritten in place: `Merging scopes:  45% (450/1000),
112/s`, ending with `, done.`. Work that finishes within DELAY seconds shows nothing, as
git's delayed progress does; `wanted` says whether to show it at all (a terminal, unless
the user asked otherwise).
"""

from __future__ import annotations

import time
from typing import TextIO

DELAY_SECONDS = 1.0
REFRESH_SECONDS = 0.1


def wanted(choice: bool | None, quiet: bool, stream: TextIO) -> bool:
    """Show progress? CHOICE (--progress / --no-progress) decides when given; otherwise
    only on a terminal, and never with --quiet."""
    if choice is not None:
        return choice
    return not quiet and stream.isatty()


class TerminalProgress:
    def __init__(self, stream: TextIO, delay: float | None = None) -> None:
        self.stream = stream
        self.delay = DELAY_SECONDS if delay is None else delay
        self.what: str | None = None
        self.started = self.shown_at = 0.0
        self.shown = False

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if what != self.what:
            self.what, self.started, self.shown = what, now, False
        finished = done >= total
        if not self.shown and now - self.started < self.delay:
            if finished:
                self.what = None  # quick work stays silent
            return
        if not finished and now - self.shown_at < REFRESH_SECONDS:
            return
        rate = done / max(now - self.started, 1e-6)
        line = f"{what}: {100 * done // total:3d}% ({done}/{total}), {rate:.0f}/s"
        self.stream.write(f"\r{line}, done.\n" if finished else f"\r{line}")
        self.stream.flush()
        self.shown, self.shown_at = not finished, now
        if finished:
            self.what = None
