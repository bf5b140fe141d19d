"""Composing a worktree's pending turns into what a commit carries: now, at the commit,
or ahead of it, when they are captured (issue 14).

`compose` makes one message per stage (the built-in composer or a configured one, under
the rules of `record.rules`); `composition_for` turns them into the `Why:` lines, the
subject and the stages a commit carries.

Composed ahead: whatever captures turns (`git obversa record`, the agent hooks, the MCP
server, a Python `ReasoningRecord` with `repository=`) calls `compose_ahead`, which
composes, scrubs and wraps them as the commit would, into the file `composed` with what it
was computed from — the stamp of the pending turns' bytes (`record.pending.stamp`), the
settings composition reads (`obversa.*`, `core.commentChar`) and the code that composes
(COMPOSING_MODULES). The commit hook (`hooks.commit`) uses it when all three still match
(`composed_ahead`), under the store's lock, and claims every turn; else it composes as
before. Only the built-in composer is composed ahead (a configured one is told the user's
subject). For a plain `-m`/`-F` message `compose_ahead` also writes `composed.plain`
(`_plain_composition`), which the prepare-commit-msg shim writes in without starting
Python (hooks.install).

Imported by the commit-time path: only `os` and the byte-level modules at the top here.
"""

from __future__ import annotations

import os

from git_obversa.record.message import (
    ID_TRAILER,
    RECORD_TRAILER,
    WHY_HEADING,
    comment_chars,
    format_block,
)
from git_obversa.record.pending import COMPOSED_PLAIN, StoreLock, file_state, remove, stamp
from git_obversa.repo import git

# Written by compose_ahead: the pending turns composed before the commit (see above).
COMPOSED = "composed"


COMPOSED_FORMAT = "git-obversa composed 2"


# The modules whose code decides what a composition is: a change to any of them (an
# upgrade, an edit) makes a composition written before it stale. Every module the
# composing code imports, transitively (tests/test_composing_modules.py holds it so).
COMPOSING_MODULES = (
    "lean/secrets_library.py",
    "record/composer.py",
    "record/composition.py",
    "record/engine_rules.py",
    "record/kept.py",
    "record/message.py",
    "record/pending.py",
    "record/prepared.py",
    "record/rules.py",
    "record/scrub.py",
    "record/secret_rules.py",
    "record/secrets_engine.py",
    "record/turns.py",
    "repo/exchange.py",
    "repo/git.py",
)


TRUE_VALUES = ("", "true", "yes", "on", "1")


# The settings the hooks read (the prepare-commit-msg shim reads the same).
CONFIG_PATTERN = (
    r"^(core\.commentchar|i18n\.commitencoding|commit\.cleanup|obversa\..*|trailer\..*)$"
)


class StrictFailure(Exception):
    """Composition failed and `obversa.strict` asks for the commit to stop."""


def read_config(cwd: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The settings the hook reads, in one git call (keys lowercased). Spawned without
    `subprocess` (see `git.outputs`): the commit-time path does not import it."""
    return parse_config(config_output(cwd))


def config_output(cwd: str | os.PathLike[str] | None = None) -> bytes:
    """What `git config -z --get-regexp CONFIG_PATTERN` prints in CWD."""
    [(_, stdout)] = git.outputs([["config", "-z", "--get-regexp", CONFIG_PATTERN]], cwd)
    return stdout


def parse_config(stdout: bytes) -> dict[str, str]:
    """`config_output`'s STDOUT as settings (keys lowercased)."""
    config = {}
    for entry in stdout.decode("utf-8", "replace").replace("\r\n", "\n").split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            config[key.lower()] = value
    return config


def plain_config(stdout: bytes) -> bytes:
    """What `git config --get-regexp` (without -z) prints of `config_output`'s STDOUT:
    each key, a space and its value on a line, a key without a value alone."""
    entries = (entry.partition(b"\n") for entry in stdout.split(b"\0") if entry)
    return b"".join(
        key + (b" " + value if newline else b"") + b"\n" for key, newline, value in entries
    )


# What a capture of thinking tells its writer when the message will leave it out.
THINKING_LEFT_OUT = (
    "note: thinking stays out of the commit message (it is kept in the commit's record: "
    "`git obversa why --full`); `git config obversa.thinking include` puts it in, or "
    "record it without --thinking"
)


def thinking_included(config: dict[str, str]) -> bool:
    """Whether the message takes in the writer's thinking (`obversa.thinking include`)."""
    return config.get("obversa.thinking", "").strip().lower() == "include"


def strict(config: dict[str, str]) -> bool:
    value = config.get("obversa.strict")
    return value is not None and value.strip().lower() in TRUE_VALUES


def compose(
    turns: list[dict],
    outcome: dict,
    config: dict[str, str],
    cwd: str | os.PathLike[str] | None,
    directory: str | None = None,
) -> tuple[list[dict], set[int]]:
    """One message per stage for TURNS (pending turns of this worktree), and the seqs of
    the turns the commit carries: every one (what a message has no room for is in the
    commit's kept record, record/kept.py). Raises StrictFailure when a configured composer fails
    under `obversa.strict`; otherwise a failure costs one warning line and the stage gets
    the floor: its captured text, scrubbed and bounded. With the store DIRECTORY, what an
    earlier capture prepared of the same turns is reused (`record.prepared`)."""
    from git_obversa.record.composer import (
        DEFAULT_MAX_WHY,
        DEFAULT_TIMEOUT,
        ComposerFailed,
        compose_units,
        run_composer,
        unit_candidates,
    )
    from git_obversa.record.prepared import Prepared
    from git_obversa.record.rules import (
        bound_turn,
        captured_floor,
        finish,
        join_turns,
    )

    command = config.get("obversa.composer", "").strip()
    timeout = _number(config, "obversa.composerTimeout", DEFAULT_TIMEOUT, "seconds", "30")
    max_why = int(_number(config, "obversa.maxWhy", DEFAULT_MAX_WHY, "characters", "1200"))
    thinking = thinking_included(config)

    prepared = Prepared(directory, _code_stamp())
    by_stage: dict[str, list[dict]] = {}
    for turn in turns:
        by_stage.setdefault(turn["stage"], []).append(turn)
    messages = []
    carried: set[int] = set()
    for stage, stage_turns in by_stage.items():
        units = join_turns(stage_turns)
        # Scrubbed and bounded before thinking is left out: a secret split between a
        # thought and what was said is only seen with both.
        safe = prepared.texts(stage, units)
        # Thinking left out is still carried: it was considered, and would otherwise
        # wait for every later commit.
        for unit in units:
            if unit["kind"] == "engine:thinking" and not thinking:
                carried.update(unit["seqs"])
        kept = [n for n, unit in enumerate(units) if thinking or unit["kind"] != "engine:thinking"]
        units, safe = [units[n] for n in kept], [safe[n] for n in kept]
        if not units:
            continue
        request = {"stage": stage, "outcome": dict(outcome)}
        if not command:
            ready = [{**unit, "text": text} for unit, text in zip(units, safe, strict=True)]
            where = {id(unit): n for n, unit in enumerate(ready)}

            def candidates_of(unit: dict, stage=stage, units=units, where=where) -> list:
                original = units[where[id(unit)]]
                return prepared.candidates(stage, original, unit_candidates, unit)

            messages.append(finish(compose_units(ready, max_why, candidates_of)))
            for unit in units:
                carried.update(unit["seqs"])
            continue
        request["captured"] = [
            {"node": unit["node"], "kind": unit["kind"], "text": bound_turn(unit["text"], False)}
            for unit in units
        ]
        try:
            messages.append(finish(run_composer(command, request, timeout=timeout, cwd=cwd)))
            for unit in units:
                carried.update(unit["seqs"])
        except ComposerFailed as error:
            if strict(config):
                raise StrictFailure(f"{error} (obversa.strict is set)") from None
            git_warning(f"{error}; the commit gets the captured text")
            scrubbed = [{**unit, "text": text} for unit, text in zip(units, safe, strict=True)]
            messages.append(captured_floor(stage, scrubbed, outcome))
            # What the floor had no room for is in the commit's kept record.
            for unit in units:
                carried.update(unit["seqs"])
    prepared.save()
    return [message for message in messages if message["body"].strip()], carried


def git_warning(text: str) -> None:
    import sys

    print(f"warning: {text}", file=sys.stderr)


def _number(config: dict[str, str], name: str, default: float, unit: str, example: str) -> float:
    setting = config.get(name.lower(), "").strip()
    if not setting:
        return default
    try:
        value = float(setting)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(
            f"{name} is {setting!r}, not a number of {unit}; "
            f"fix it with `git config {name} {example}`"
        )
    return value


class Composition:
    """What a commit carries from the pending turns: REASONING (the `Why:` lines, ""
    when composing left nothing), the first message's SUBJECT (suggested in the editor),
    the STAGES whose turns it carries, in order, and RECORD_ID, the id of the record
    that keeps all of them (record/kept.py)."""

    __slots__ = ("reasoning", "record_id", "stages", "subject")

    def __init__(self, reasoning: str, subject: str, stages: list[str], record_id: str) -> None:
        self.reasoning, self.subject, self.stages = reasoning, subject, stages
        self.record_id = record_id


def new_record_id() -> str:
    """A fresh id for a commit's kept record: 16 random hex digits (record/kept.py)."""
    return os.urandom(8).hex()


def composition_for(
    messages: list[dict], turns: list[dict], carried: set[int], chars: str
) -> Composition:
    """The Composition of `compose`'s MESSAGES for TURNS, lines safe under CHARS."""
    if not messages:
        return Composition("", "", [], new_record_id())
    # Each body on its own, so a second stage's heading goes too.
    reasoning = "\n\n".join("\n".join(format_block(m["body"], chars)) for m in messages)
    stages = list(dict.fromkeys(turn["stage"] for turn in turns if turn["seq"] in carried))
    return Composition(reasoning, messages[0]["subject"], stages, new_record_id())


def compose_ahead(
    directory: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
    settings: bytes | None = None,
) -> bool:
    """Compose the turns pending in the store DIRECTORY now, as the next commit would,
    into the file `composed` (see the module docstring); True if it did. Called by
    whatever captures turns, after it did (with SETTINGS, `config_output(cwd)`, when it
    read them). Never fails: a composition it cannot make (a configured composer, a bad
    setting, a damaged store) is left to the commit."""
    from git_obversa.record.turns import TurnStore

    directory = os.fspath(directory)
    target = os.path.join(directory, COMPOSED)
    _settle_kept(directory, cwd)
    try:
        if settings is None:
            settings = config_output(cwd)
        config = parse_config(settings)
        chars = comment_chars(config.get("core.commentchar"))
        composition, stamped, seen = _compose_tail(directory, config, chars)
        if composition is None:
            turns, stamped = TurnStore(directory).read_stamped()
            if turns and not config.get("obversa.composer", "").strip():
                outcome = {"status": "pass", "summary": None}
                messages, carried = compose(turns, outcome, config, cwd, directory)
                # The built-in composer carries every turn; claim_all relies on it.
                if carried == {turn["seq"] for turn in turns}:
                    composition = composition_for(messages, turns, carried, chars)
        if composition is not None:
            fields = [COMPOSED_FORMAT, stamped, _code_stamp(), pack(_composing_config(config))]
            fields += [composition.reasoning, composition.subject, pack(composition.stages)]
            fields.append(composition.record_id)
            plain = _plain_composition(composition, config, chars, plain_config(settings))
            with StoreLock(directory):
                # Else a capture since: its own call composes.
                if file_state(directory) == seen if seen else stamp(directory) == stamped:
                    write_packed(target, fields)
                    if plain is not None:
                        _write_bytes(os.path.join(directory, COMPOSED_PLAIN), plain)
                    else:
                        remove(os.path.join(directory, COMPOSED_PLAIN))
                    return True
            return False
        with StoreLock(directory):
            remove(target)
    except Exception:
        try:
            remove(target)
        except OSError:
            pass
    return False


def _compose_tail(directory: str, config: dict[str, str], chars: str):
    """(Composition, stamp, files as read) of the pending turns by `record.prepared.
    compose_tail`, which reads only what was captured since the last capture; (None, "",
    None) where it does not apply."""
    from git_obversa.record.composer import DEFAULT_MAX_WHY
    from git_obversa.record.prepared import compose_tail
    from git_obversa.record.rules import finish

    if config.get("obversa.composer", "").strip():
        return None, "", None
    max_why = int(_number(config, "obversa.maxWhy", DEFAULT_MAX_WHY, "characters", "1200"))
    tail = compose_tail(
        directory, _composing_config(config), _code_stamp(), max_why, thinking_included(config)
    )
    if tail is None:
        return None, "", None
    if tail.message["body"].strip():
        message = finish(tail.message)
        reasoning = "\n".join(format_block(message["body"], chars))
        composition = Composition(reasoning, message["subject"], [tail.stage], new_record_id())
    else:
        composition = Composition("", "", [], new_record_id())
    return composition, tail.stamped, tail.seen


def _settle_kept(directory: str, cwd) -> None:
    """Records of commits made since the last capture (`kept-<id>.jsonl`, left by
    post-commit) written into the records ref (record/kept.py): a capture runs after most
    commits, so records settle before they are pushed or looked for."""
    try:
        waiting = any(name.startswith("kept-") for name in os.listdir(directory))
    except OSError:
        return
    if waiting:
        from git_obversa.record.kept import settle

        try:
            settle(cwd)
        except Exception as error:  # the capture itself must not fail: settled next time
            git_warning(f"the kept records were not written yet ({error})")


def _plain_composition(
    composition: Composition, config: dict[str, str], chars: str, settings: bytes
) -> bytes | None:
    """COMPOSITION for the prepare-commit-msg shim, which writes it into a plain message
    without Python (`write_composed` in hooks/shims/commit-hook.sh): lines of an id, the package
    directory, the comment character, three counts, then that many lines each of the
    SETTINGS it holds for (`git config --get-regexp` as the shim runs it), of what
    `insert_reasoning` puts between a message that has no `Why:` block yet and its
    trailers, and of the trailers it adds. None where the shim would need more than its
    plain case: other comment characters, an encoding, trailer settings."""
    setting = config.get("core.commentchar", "")
    char = setting[:1] or "#"
    if (
        not composition.reasoning
        or setting == "auto"
        or not (char.isascii() and char.isprintable())
        or any(key.startswith("trailer.") or key == "i18n.commitencoding" for key in config)
    ):
        return None
    settings = settings.rstrip(b"\n")  # as the shim's `$(...)` keeps it
    block = format_block(composition.reasoning, chars)
    records = dict.fromkeys(f"{RECORD_TRAILER}: {stage}" for stage in composition.stages)
    records[f"{ID_TRAILER}: {composition.record_id}"] = None
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    try:
        why = "".join(f"{line}\n" for line in ["", WHY_HEADING, *block, ""])
        added = "".join(f"{line}\n" for line in records)
        parts = [
            f"{composition.record_id}\n{package}\n{char}\n".encode(),
            settings + b"\n" if settings else b"",
            why.encode("utf-8", "surrogateescape"),
            added.encode("utf-8", "surrogateescape"),
        ]
    except UnicodeEncodeError:
        return None
    counts = [part.count(b"\n") for part in parts[1:]]
    data = parts[0] + "".join(f"{count}\n" for count in counts).encode() + b"".join(parts[1:])
    return None if b"\0" in data or "\n" in package else data


def _write_bytes(path: str, data: bytes) -> None:
    """DATA into PATH, replaced whole (a reader never sees half of it)."""
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def composed_ahead(directory: str, config: dict[str, str]) -> Composition | None:
    """The composition `compose_ahead` left, if it is still the one the pending turns
    give under CONFIG; call it under the store's lock."""
    try:
        fields = unpack(read_packed(os.path.join(directory, COMPOSED)))
    except (OSError, UnicodeDecodeError):
        return None
    if fields is None or len(fields) != 8 or fields[0] != COMPOSED_FORMAT:
        return None
    _, stamped, code, settings, reasoning, subject, stages, record_id = fields
    if (
        stamped != stamp(directory)
        or code != _code_stamp()
        or unpack(settings) != _composing_config(config)
    ):
        return None
    stage_list = unpack(stages)
    if stage_list is None or not record_id.isalnum():
        return None
    return Composition(reasoning, subject, stage_list, record_id)


def _composing_config(config: dict[str, str]) -> list[str]:
    """The settings a composition depends on, flattened (key, value, ...) in key order."""
    keys = sorted(key for key in config if key.startswith("obversa.") or key == "core.commentchar")
    return [item for key in keys for item in (key, config[key])]


def _code_stamp() -> str:
    """Where the composing modules are and their size and modification time."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [package]
    for name in COMPOSING_MODULES:
        try:
            status = os.stat(os.path.join(package, name))
            parts.append(f"{status.st_size}:{status.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return " ".join(parts)


def pack(fields: list[str]) -> str:
    """FIELDS as one string `unpack` reads back: each field is its length in
    characters, a newline, the field, a newline (any character may be in a field)."""
    return "".join(f"{len(field)}\n{field}\n" for field in fields)


def unpack(text: str) -> list[str] | None:
    """The fields `pack` wrote into TEXT, or None when TEXT is not that."""
    fields = []
    position = 0
    while position < len(text):
        newline = text.find("\n", position)
        length = text[position:newline]
        if newline < 0 or not length.isdigit() or not length.isascii():
            return None
        start = newline + 1
        end = start + int(length)
        if text[end : end + 1] != "\n":
            return None
        fields.append(text[start:end])
        position = end + 1
    return fields


def read_packed(path: str) -> str:
    """What `write_packed` wrote into PATH, as it was given (lone surrogates too)."""
    with open(path, encoding="utf-8", errors="surrogatepass", newline="") as handle:
        return handle.read()


def write_packed(path: str, fields: list[str]) -> None:
    """FIELDS packed into PATH, replaced whole (a reader never sees half of it)."""
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8", errors="surrogatepass", newline="") as handle:
        handle.write(pack(fields))
    os.replace(temporary, path)
