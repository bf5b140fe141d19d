"""Composers: turn a stage's captured turns into `{"subject", "body"}`.

A configured composer is a shell command (`git config obversa.composer CMD`): it gets the
compose input `{"stage", "captured": [{"node", "text"}], "outcome"}` as JSON on stdin and
prints `{"subject", "body"}` as JSON. A timeout, a crash or output that is not that gives
None, and the record's floor applies (`git_obversa.record.reasoning.compose_message`).

Without one, `builtin_compose` writes the captured turns themselves, whitespace-normalised,
under a subject taken from the first of them. Turns may be pieces of one stream (an
engine's deltas), so a turn that ends inside a word runs straight on into the next: a
token split across two turns is whole again, and the scrubber sees it. Other turns are
paragraphs of their own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

from git_obversa.record.reasoning import usable
from git_obversa.record.scrub import scrub_turns

DEFAULT_TIMEOUT = 30.0
SUBJECT_COLUMNS = 72
_WORD_END = re.compile(r"[\w-]\Z")
_WORD_START = re.compile(r"\A[\w-]")


def builtin_compose(request: dict) -> dict:
    """The captured turns as paragraphs (whitespace runs collapsed), and a subject: the
    first sentence of the first turn, cut at a word to fit one line. The turns are
    scrubbed together first, so a secret split between two of them goes, and the subject
    is cut from scrubbed text."""
    raw = [turn["text"] for turn in request["captured"]]
    text = ""
    for index, piece in enumerate(scrub_turns(raw)):
        # Whether a turn runs on into the previous one is decided on what was said.
        joined = index and _WORD_END.search(raw[index - 1]) and _WORD_START.match(raw[index])
        text += piece if joined or not text else "\n\n" + piece
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        normalised = " ".join(paragraph.split())
        if normalised:
            paragraphs.append(normalised)
    return {
        "subject": _subject(paragraphs[0] if paragraphs else ""),
        "body": "\n\n".join(paragraphs),
    }


def _subject(text: str) -> str:
    sentence = text
    for end in (". ", "? ", "! "):
        cut = sentence.find(end)
        if cut > 0:
            sentence = sentence[: cut + 1]
    sentence = sentence.rstrip(".")
    if len(sentence) <= SUBJECT_COLUMNS:
        return sentence
    cut = sentence.rfind(" ", 0, SUBJECT_COLUMNS - 1)
    return sentence[: cut if cut > 0 else SUBJECT_COLUMNS - 1] + "…"


def run_composer(
    command: str, request: dict, timeout: float = DEFAULT_TIMEOUT, cwd: str | None = None
) -> dict | None:
    """What COMMAND (run by the shell) printed for REQUEST, or None if it failed.

    Failure is said in one line on stderr, so the user knows why the floor was used.
    """
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            start_new_session=True,  # so a timeout can stop the command and its children
        )
    except OSError as error:
        return _failed(command, f"could not start: {error}")
    try:
        stdout, _ = process.communicate(json.dumps(request, ensure_ascii=False), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return _failed(command, f"gave no answer within {timeout:g} s")
    except (BrokenPipeError, UnicodeDecodeError) as error:
        process.kill()
        process.wait()
        return _failed(command, str(error))
    if process.returncode != 0:
        return _failed(command, f"exited {process.returncode}")
    try:
        result = json.loads(stdout)
    except json.JSONDecodeError:
        return _failed(command, "printed something that is not JSON")
    if not usable(result):
        return _failed(command, 'printed no one-line "subject" and non-blank "body"')
    return result


def _failed(command: str, why: str) -> None:
    print(
        f"warning: obversa.composer {command!r} {why}; the commit gets the floor message",
        file=sys.stderr,
    )
    return None
