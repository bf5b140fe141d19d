"""Memory mechanics over the port: `ground`, `curate`, `consolidate` (SPEC.md §6).

They take any memory (an object with `scope` and `execute(command)`) and choose no
engine. Results are plain dicts: `{"ok": True, "value": ...}` or `{"ok": False, "error":
{"code", "message", "path"?, "cause"?}}` where `cause` is the port error that led to it.

Characters are counted as code points everywhere (DESIGN.md): the ground limits, curate's
brief limit and consolidate's output limit. An emoji is one character, never split.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from git_obversa.memory.paths import is_segment, validate_path
from git_obversa.memory.port import MemoryFailure, is_safe_integer, is_well_formed
from git_obversa.memory.warning import MEMORY_WARNING

GROUND_LIMITS = {"max_files": 20, "max_chars_per_file": 4000, "max_total_chars": 16000}
_CAMEL_LIMITS = {
    "maxFiles": "max_files",
    "maxCharsPerFile": "max_chars_per_file",
    "maxTotalChars": "max_total_chars",
}

Source = Mapping[str, Any] | str
Result = dict[str, Any]


def _positive(value: Any, name: str) -> int:
    if not is_safe_integer(value, minimum=1):
        raise TypeError(f"{name} must be a positive safe integer.")
    return value


def _ground_limits(limits: Mapping[str, Any] | None) -> dict[str, int]:
    merged = dict(GROUND_LIMITS)
    for key, value in (limits or {}).items():
        name = _CAMEL_LIMITS.get(key, key)
        if name not in GROUND_LIMITS:
            raise TypeError(f"unknown ground limit: {key}")
        if value is not None:
            merged[name] = value
    return {name: _positive(value, name) for name, value in merged.items()}


def _is_safe_path(value: Any) -> bool:
    try:
        validate_path(value)
    except MemoryFailure:
        return False
    return True


def render_prompt(documents: Iterable[Mapping[str, Any]], leading: str | None = None) -> str:
    """The warning, an optional leading block, then one `## <path>` block per document."""
    blocks = [MEMORY_WARNING, leading or ""]
    blocks += [f"## {document['path']}\n\n{document['text']}" for document in documents]
    return "\n\n".join(block for block in blocks if block)


def _failed(code: str, message: str, path: str | None = None, cause: Any = None) -> Result:
    error: dict[str, Any] = {"code": code, "message": message}
    if path is not None:
        error["path"] = path
    if cause is not None:
        error["cause"] = cause
    return {"ok": False, "error": error}


def _read_failed(path: str, cause: Any) -> Result:
    return _failed("read_failed", f"Could not read memory at {path}.", path, cause)


class _Stop(Exception):
    """Carries a failure result out of the recursive visit."""

    def __init__(self, result: Result) -> None:
        self.result = result


def _storage(path: str, message: str) -> _Stop:
    return _Stop(_read_failed(path, {"code": "STORAGE_ERROR", "message": message, "path": path}))


def _checked_entries(path: str, entries: Any) -> list[dict[str, str]]:
    if not isinstance(entries, list):
        raise _storage(path, "The memory adapter returned invalid directory entries.")
    checked, seen = [], set()
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise _storage(path, "The memory adapter returned an invalid directory entry.")
        name, kind, entry_path = entry.get("name"), entry.get("kind"), entry.get("path")
        if (
            not isinstance(name, str)
            or not is_segment(name)
            or kind not in ("file", "directory")
            or not _is_safe_path(entry_path)
            or entry_path != f"{path}/{name}"
            or name in seen
        ):
            raise _storage(path, "The memory adapter returned an unsafe directory entry.")
        seen.add(name)
        checked.append({"name": name, "path": entry_path, "kind": kind})
    return checked


def _checked_view(path: str, view: Any, expected_kind: str | None) -> Mapping[str, Any]:
    """Refuse a view an adapter should not have returned, before anything below it is read."""
    if not (_is_safe_path(path) and isinstance(view, Mapping) and view.get("path") == path):
        raise _storage(path, "The memory adapter returned a view for another path.")
    kind = view.get("kind")
    if kind not in ("file", "directory"):
        raise _storage(path, "The memory adapter returned an invalid view kind.")
    if expected_kind is not None and kind != expected_kind:
        raise _storage(path, "The memory adapter returned a view with the wrong kind.")
    if kind == "file":
        if not is_well_formed(view.get("text")):
            raise _storage(path, "The memory adapter returned invalid file text.")
        return view
    return {**view, "entries": _checked_entries(path, view.get("entries"))}


def _source(source: Source) -> tuple[Any, bool]:
    if isinstance(source, str):
        return source, False
    if not isinstance(source, Mapping):
        raise TypeError("a source must be a path or a mapping with 'path' (and 'optional').")
    return source.get("path"), source.get("optional") is True


def _ground(
    memory: Any,
    sources: Iterable[Source],
    limits: Mapping[str, Any] | None,
    excluded: frozenset[str] = frozenset(),
) -> Result:
    caps = _ground_limits(limits)
    chosen: dict[Any, bool] = {}  # path -> optional; a required entry beats an optional one
    for source in sources:
        path, optional = _source(source)
        if path not in chosen or (chosen[path] and not optional):
            chosen[path] = optional
    documents: dict[str, dict[str, Any]] = {}
    missing: set[str] = set()
    visited: dict[str, str] = {}
    remaining = caps["max_total_chars"]

    def full() -> bool:
        return len(documents) >= caps["max_files"] or remaining == 0

    def visit(path: Any, optional: bool, expected_kind: str | None = None) -> None:
        nonlocal remaining
        if path in visited:
            if expected_kind is not None and expected_kind != visited[path]:
                raise _storage(path, "The memory adapter returned conflicting view kinds.")
            return
        if path in excluded or full():
            return
        try:
            result = memory.execute({"command": "view", "path": path})
        except Exception:
            raise _storage(path, "The memory adapter threw while reading.") from None
        if not result.get("ok"):
            error = result.get("error") or {}
            if optional and error.get("code") == "NOT_FOUND":
                missing.add(path)
                return
            raise _Stop(_read_failed(path, error))
        if result.get("command") != "view":
            raise _storage(path, "The memory adapter returned the wrong command result.")
        view = _checked_view(path, result.get("value"), expected_kind)
        visited[path] = view["kind"]
        if view["kind"] == "directory":
            for entry in sorted(view["entries"], key=lambda entry: entry["path"]):
                visit(entry["path"], optional, entry["kind"])
                if full():
                    break
            return
        missing.discard(path)
        text = view["text"][: min(caps["max_chars_per_file"], remaining)]
        documents[path] = {"path": path, "text": text, "truncated": len(text) < len(view["text"])}
        remaining -= len(text)

    try:
        for path in sorted(chosen, key=str):
            visit(path, chosen[path])
            if full():
                break
    except _Stop as stop:
        return stop.result
    ordered = [documents[path] for path in sorted(documents)]
    value = {"documents": ordered, "missing": sorted(missing), "prompt": render_prompt(ordered)}
    return {"ok": True, "value": value}


def ground(
    memory: Any, sources: Iterable[Source], limits: Mapping[str, Any] | None = None
) -> Result:
    """Read SOURCES (`{"path", "optional"?}` or a path string) into one warned prompt.

    Paths are deduplicated and sorted; directories are read recursively; LIMITS
    (`max_files` 20, `max_chars_per_file` 4000, `max_total_chars` 16000) cut text at
    code-point boundaries. A missing optional source is listed in `missing`. Never writes.
    """
    return _ground(memory, sources, limits)


def curate(
    grounded: Mapping[str, Any],
    intent: str,
    decide: Callable[[dict[str, Any]], Any],
    max_brief_chars: int = 2000,
) -> Result:
    """Let DECIDE pick grounded documents and write a brief; fall back to the grounded prompt.

    DECIDE gets `{"intent", "documents", "prompt"}` once and returns `{"brief", "sources"}`.
    The result is `{"mode": "curated", "brief", "sources", "prompt"}`, or
    `{"mode": "grounded", "reason": "callback_failed" | "invalid_decision", "prompt"}`.
    """
    limit = _positive(max_brief_chars, "max_brief_chars")
    documents = list(grounded.get("documents") or [])
    prompt = grounded.get("prompt")
    if not (isinstance(prompt, str) and prompt.startswith(MEMORY_WARNING)):
        prompt = render_prompt(documents)  # never hand on a prompt that lost its warning
    try:
        decision = decide({"intent": intent, "documents": documents, "prompt": prompt})
    except Exception:
        return {"mode": "grounded", "reason": "callback_failed", "prompt": prompt}
    invalid = {"mode": "grounded", "reason": "invalid_decision", "prompt": prompt}
    if not isinstance(decision, Mapping):
        return invalid
    brief, chosen = decision.get("brief"), decision.get("sources")
    if not isinstance(brief, str) or not isinstance(chosen, (list, tuple)):
        return invalid
    brief = brief.strip()
    if not brief or len(brief) > limit:
        return invalid
    by_path = {document["path"]: document for document in documents}
    selected: list[str] = []
    for path in chosen:
        if not isinstance(path, str) or path not in by_path:
            return invalid
        if path not in selected:
            selected.append(path)
    curated_prompt = render_prompt(
        [by_path[path] for path in selected], f"## Curated brief\n\n{brief}"
    )
    return {"mode": "curated", "brief": brief, "sources": selected, "prompt": curated_prompt}


_target_locks: dict[tuple[Any, Any], threading.RLock] = {}
_target_locks_guard = threading.Lock()


def _target_lock(memory: Any, target: Any) -> threading.RLock:
    key = (getattr(memory, "scope", None), target)
    with _target_locks_guard:
        return _target_locks.setdefault(key, threading.RLock())


def consolidate(
    memory: Any,
    target: str,
    sources: Iterable[Source],
    fold: Callable[[dict[str, Any]], Any],
    max_output_chars: int = 16000,
) -> Result:
    """Fold SOURCES and the earlier TARGET into one text with FOLD and write TARGET once.

    FOLD gets `{"prior": text or None, "documents", "prompt"}` and returns the new text
    (trimmed; 1 to MAX_OUTPUT_CHARS characters). One caller per target at a time in this
    process; across processes the write carries the prior text as `expected_text`, so an
    adapter that checks it (the Git adapter does) refuses with `CONFLICT` when TARGET
    changed since it was read, and nothing is written.
    """
    limit = _positive(max_output_chars, "max_output_chars")
    with _target_lock(memory, target):
        return _consolidate(memory, target, list(sources), fold, limit)


def _consolidate(
    memory: Any, target: str, sources: list[Source], fold: Callable, limit: int
) -> Result:
    target_limits = {"max_files": 1, "max_chars_per_file": limit, "max_total_chars": limit}
    prior_grounded = _ground(memory, [{"path": target, "optional": True}], target_limits)
    if not prior_grounded["ok"]:
        return prior_grounded
    prior_document = next(
        (d for d in prior_grounded["value"]["documents"] if d["path"] == target), None
    )
    if prior_document is not None and prior_document["truncated"]:
        cause = {
            "code": "LIMIT_EXCEEDED",
            "message": f"Existing memory exceeds the {limit}-character consolidation input limit.",
            "path": target,
            "details": {"max_output_chars": limit},
        }
        return _read_failed(target, cause)
    others = [source for source in sources if _source(source)[0] != target]
    grounded = _ground(memory, others, None, frozenset([target]))
    if not grounded["ok"]:
        return grounded
    documents = grounded["value"]["documents"]
    prior = None if prior_document is None else prior_document["text"]
    shown = documents if prior_document is None else [prior_document, *documents]
    try:
        folded = fold({"prior": prior, "documents": documents, "prompt": render_prompt(shown)})
    except Exception:
        return _failed("callback_failed", "The memory consolidation callback failed.")
    if not isinstance(folded, str):
        return _failed(
            "invalid_callback_result", "The memory consolidation callback must return text."
        )
    text = folded.strip()
    if not text or len(text) > limit:
        return _failed(
            "invalid_callback_result",
            f"The consolidated text must contain 1 to {limit} characters.",
        )
    message = f"Could not write consolidated memory at {target}."
    command = {"command": "create", "path": target, "file_text": text, "expected_text": prior}
    try:
        written = memory.execute(command)
    except Exception:
        cause = {
            "code": "STORAGE_ERROR",
            "message": "The memory adapter threw while writing.",
            "path": target,
        }
        return _failed("write_failed", message, target, cause)
    if not written.get("ok"):
        return _failed("write_failed", message, target, written.get("error"))
    if written.get("command") != "create":
        cause = {
            "code": "STORAGE_ERROR",
            "message": "The memory adapter returned the wrong command result.",
            "path": target,
        }
        return _failed("write_failed", message, target, cause)
    written_prompt = render_prompt([{"path": target, "text": text}])
    return {"ok": True, "value": {"target": target, "text": text, "prompt": written_prompt}}


# ---------------------------------------------------------------------------------------
# pick (SPEC.md §6.5): which remembered items apply, judged by the caller's function

PICK_QUESTION_VERSION = "memory-pick-questions-1"
PICK_DEFAULTS = {"max_per_batch": 150, "max_question_text": 700, "threshold": 0.6}
PICK_ROLES = ("rule", "reference")
PICK_STOPS = ("limits", "time", "cancelled")


def _candidate(value: Any) -> dict[str, Any]:
    """A candidate checked: `{sourceId, role, id, title, text, signals, applies?, ...}`."""
    if not isinstance(value, Mapping):
        raise TypeError("A pick candidate must be an object.")
    for key in ("sourceId", "id", "title", "text"):
        if not isinstance(value.get(key), str):
            raise TypeError(f"A pick candidate needs a string {key}.")
    if value.get("role") not in PICK_ROLES:
        raise TypeError("A pick candidate's role must be rule or reference.")
    signals = value.get("signals", {})
    if not isinstance(signals, Mapping) or not all(
        isinstance(name, str) and isinstance(number, int | float) and not isinstance(number, bool)
        for name, number in signals.items()
    ):
        raise TypeError("A pick candidate's signals must map names to numbers.")
    return {**value, "signals": dict(signals)}


def _thresholds(thresholds: float | Mapping[str, float] | None) -> dict[str, float]:
    if thresholds is None or isinstance(thresholds, int | float):
        given = {role: thresholds for role in PICK_ROLES}
    else:
        given = {role: thresholds.get(role) for role in PICK_ROLES}
    chosen = {}
    for role, value in given.items():
        value = PICK_DEFAULTS["threshold"] if value is None else value
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise TypeError("A pick threshold must be a number from 0 to 1.")
        chosen[role] = float(value)
    return chosen


def _pick_queue(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates to ask about: rules before references; within each role, sources
    taken in turn (round robin, by source id), each source's best signals first."""
    queue: list[dict[str, Any]] = []
    for role in PICK_ROLES:
        by_source: dict[str, list[dict[str, Any]]] = {}
        for candidate in candidates:
            if candidate["role"] == role:
                by_source.setdefault(candidate["sourceId"], []).append(candidate)
        ranked = [
            sorted(items, key=lambda c: (-sum(c["signals"].values()), c["id"]))
            for _, items in sorted(by_source.items())
        ]
        for turn in range(max((len(items) for items in ranked), default=0)):
            queue += [items[turn] for items in ranked if turn < len(items)]
    return queue


def pick_key(candidate: Mapping[str, Any]) -> str:
    """The key a question and its answer share: `JSON([sourceId, id])`."""
    import json

    return json.dumps([candidate["sourceId"], candidate["id"]], ensure_ascii=False)


def _question(candidate: dict[str, Any], max_text: int) -> dict[str, Any]:
    return {
        "key": pick_key(candidate),
        "version": PICK_QUESTION_VERSION,
        "role": candidate["role"],
        "title": candidate["title"],
        "text": candidate["text"][:max_text],  # code points: never splits a character
        "signals": candidate["signals"],
    }


def _answers(decide: Callable[[list[dict[str, Any]]], Any], batch: list[dict]) -> dict:
    """DECIDE's answers to BATCH by key; a raising or malformed DECIDE answers `error`."""
    try:
        answered = decide(batch)
    except Exception:
        return {question["key"]: {"status": "error"} for question in batch}
    if not isinstance(answered, Mapping):
        return {question["key"]: {"status": "error"} for question in batch}
    return answered


def _judged(answer: Any, threshold: float) -> tuple[str, dict[str, Any]]:
    """("selected" | "rejected" | "unanswered", what to record) for one answer."""
    status = answer.get("status") if isinstance(answer, Mapping) else None
    probability = answer.get("probability") if isinstance(answer, Mapping) else None
    if status == "answered":
        if isinstance(probability, int | float) and not isinstance(probability, bool):
            if 0 <= probability <= 1:
                verdict = "selected" if probability >= threshold else "rejected"
                return verdict, {"reason": "answered", "probability": float(probability)}
        return "unanswered", {"reason": "error"}
    if status in ("refused", "missing", "error"):
        return "unanswered", {"reason": status}
    return "unanswered", {"reason": "missing" if answer is None else "error"}


def pick(
    candidates: Iterable[Any],
    decide: Callable[[list[dict[str, Any]]], Any],
    *,
    thresholds: float | Mapping[str, float] | None = None,
    max_per_batch: int = 150,
    max_question_text: int = 700,
    max_questions: int | None = None,
    max_selected: int | None = None,
    max_seconds: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Choose the CANDIDATES that apply (SPEC.md §6.5).

    Rules with `applies: "always"` are selected without asking. The others are asked
    about in batches of at most MAX_PER_BATCH questions (`{key, version, role, title,
    text (at most MAX_QUESTION_TEXT characters), signals}`), rules first, sources in turn,
    each source's strongest signals first. DECIDE(batch) returns `{key: {"status":
    "answered", "probability": p} | {"status": "refused" | "missing" | "error"}}`; a
    probability at or above the role's threshold (default 0.6) selects. Once MAX_QUESTIONS
    were asked or MAX_SELECTED chosen (`limits`), MAX_SECONDS passed (`time`) or
    CANCELLED() is true (`cancelled`), the rest is `unassessed`. `rulesCoverage` is
    `incomplete` when any rule was left unanswered or unassessed.
    """
    import time

    checked = [_candidate(candidate) for candidate in candidates]
    limits = {"max_per_batch": max_per_batch, "max_question_text": max_question_text}
    for name, value in limits.items():
        _positive(value, name)
    chosen = _thresholds(thresholds)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    result: dict[str, Any] = {
        "version": PICK_QUESTION_VERSION,
        "selected": [],
        "rejected": [],
        "unanswered": [],
        "unassessed": [],
        "stopReason": None,
    }
    always = [c for c in checked if c["role"] == "rule" and c.get("applies") == "always"]
    result["selected"] += [{**c, "reason": "always"} for c in always]
    asked_about = [c for c in checked if not any(c is rule for rule in always)]
    queue = _pick_queue(asked_about)
    asked = 0
    while queue:
        room = max_per_batch if max_questions is None else min(max_per_batch, max_questions - asked)
        if cancelled is not None and cancelled():
            result["stopReason"] = "cancelled"
        elif deadline is not None and time.monotonic() >= deadline:
            result["stopReason"] = "time"
        elif room <= 0 or (max_selected is not None and len(result["selected"]) >= max_selected):
            result["stopReason"] = "limits"
        if result["stopReason"]:
            break
        batch, queue = queue[:room], queue[room:]
        answers = _answers(decide, [_question(c, max_question_text) for c in batch])
        asked += len(batch)
        for candidate in batch:
            verdict, record = _judged(answers.get(pick_key(candidate)), chosen[candidate["role"]])
            if verdict == "selected" and max_selected is not None:
                if len(result["selected"]) >= max_selected:
                    verdict, record = "unassessed", {}
            result[verdict].append({**candidate, **record})
    result["unassessed"] += queue
    open_rules = result["unanswered"] + result["unassessed"]
    incomplete = any(c["role"] == "rule" for c in open_rules)
    result["rulesCoverage"] = "incomplete" if incomplete else "complete"
    return result
