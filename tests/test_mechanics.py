"""ground, curate, consolidate (SPEC.md §6, scenarios 81–98) over real adapters.

Most tests run on the in-process adapter, wrapped to record the commands it receives.
Where a scenario is about an adapter that misbehaves (raises, returns a view for another
path, escapes its directory), a small adapter below returns exactly that bad answer.
"""

from __future__ import annotations

import threading
import time

import pytest

from git_obversa import MEMORY_WARNING, consolidate, create_simple_memory, curate, ground


class Recording:
    """A real memory that remembers every command it was given."""

    def __init__(self, memory, fail_on=None):
        self.memory = memory
        self.scope = memory.scope
        self.calls = []
        self.fail_on = fail_on

    def execute(self, command):
        self.calls.append(dict(command))
        if command["command"] == self.fail_on:
            raise RuntimeError("offline")
        return self.memory.execute(command)

    def viewed(self):
        return [call["path"] for call in self.calls if call["command"] == "view"]

    def writes(self):
        return [call for call in self.calls if call["command"] != "view"]


def memory_with(files, scope="mechanics", limits=None):
    memory = create_simple_memory(scope, limits)
    for path, text in files.items():
        assert memory.execute({"command": "create", "path": path, "file_text": text})["ok"]
    return Recording(memory)


class Answering:
    """An adapter that answers each view from a fixed table (for misbehaviour scenarios)."""

    scope = "answering"

    def __init__(self, views):
        self.views = views
        self.calls = []

    def execute(self, command):
        self.calls.append(command["path"])
        value = self.views[command["path"]]
        return {"ok": True, "command": "view", "value": value}


def file_view(path, text):
    return {"kind": "file", "path": path, "text": text, "byte_length": len(text.encode())}


# ground ---------------------------------------------------------------------------------


def test_81_sorted_deduplicated_recursive_sources_with_warning():
    memory = memory_with(
        {
            "/memories/dir/sub/c.json": "C",
            "/memories/dir/b.txt": "B",
            "/memories/dir/a.md": "A",
            "/memories/z.md": "Z",
        }
    )
    sources = [
        {"path": "/memories/z.md", "optional": True},
        {"path": "/memories/dir"},
        {"path": "/memories/z.md"},
    ]
    result = ground(memory, sources)
    assert result["ok"]
    value = result["value"]
    assert [(d["path"], d["text"], d["truncated"]) for d in value["documents"]] == [
        ("/memories/dir/a.md", "A", False),
        ("/memories/dir/b.txt", "B", False),
        ("/memories/dir/sub/c.json", "C", False),
        ("/memories/z.md", "Z", False),
    ]
    assert value["missing"] == []
    assert value["prompt"].startswith(MEMORY_WARNING)
    assert "## /memories/dir/a.md\n\nA" in value["prompt"]
    assert memory.viewed() == [
        "/memories/dir",
        "/memories/dir/a.md",
        "/memories/dir/b.txt",
        "/memories/dir/sub",
        "/memories/dir/sub/c.json",
        "/memories/z.md",
    ]
    assert memory.writes() == []


def test_82_limits_bound_files_and_characters_before_reading_more():
    memory = memory_with(
        {"/memories/a.md": "abcdef", "/memories/b.md": "ghijkl", "/memories/c.md": "mnopqr"}
    )
    sources = ["/memories/c.md", "/memories/a.md", "/memories/b.md"]
    limits = {"max_files": 2, "max_chars_per_file": 3, "max_total_chars": 5}
    value = ground(memory, sources, limits)["value"]
    assert value["documents"] == [
        {"path": "/memories/a.md", "text": "abc", "truncated": True},
        {"path": "/memories/b.md", "text": "gh", "truncated": True},
    ]
    assert memory.viewed() == ["/memories/a.md", "/memories/b.md"]


def test_83_a_limit_never_splits_a_character():
    memory = memory_with({"/memories/a.md": "🧠x"})
    limits = {"maxFiles": 1, "maxCharsPerFile": 1, "maxTotalChars": 1}  # camelCase accepted
    value = ground(memory, ["/memories/a.md"], limits)["value"]
    assert value["documents"] == [{"path": "/memories/a.md", "text": "🧠", "truncated": True}]


def test_84_default_limits_16000_characters_and_20_files():
    long = memory_with({f"/memories/{i:02}.md": "x" * 4001 for i in range(21)})
    value = ground(long, [f"/memories/{i:02}.md" for i in range(21)])["value"]
    assert len(value["documents"]) == 4
    assert all(len(d["text"]) == 4000 and d["truncated"] for d in value["documents"])
    assert sum(len(d["text"]) for d in value["documents"]) == 16000
    assert len(long.calls) == 4

    short = memory_with({f"/memories/{i:02}.md": "x" for i in range(21)})
    value = ground(short, [f"/memories/{i:02}.md" for i in range(21)])["value"]
    assert len(value["documents"]) == 20
    assert len(short.calls) == 20


def test_85_missing_optional_is_listed_missing_required_fails():
    memory = memory_with({})
    both = ground(
        memory,
        [{"path": "/memories/missing.md", "optional": True}, {"path": "/memories/missing.md"}],
    )
    assert both["ok"] is False
    assert both["error"]["code"] == "read_failed"
    assert both["error"]["path"] == "/memories/missing.md"
    assert both["error"]["cause"]["code"] == "NOT_FOUND"

    optional = ground(memory, [{"path": "/memories/optional.md", "optional": True}])
    assert optional == {
        "ok": True,
        "value": {"documents": [], "missing": ["/memories/optional.md"], "prompt": MEMORY_WARNING},
    }

    required = ground(memory, [{"path": "/memories/required.md"}])
    assert required == {
        "ok": False,
        "error": {
            "code": "read_failed",
            "message": "Could not read memory at /memories/required.md.",
            "path": "/memories/required.md",
            "cause": {
                "code": "NOT_FOUND",
                "message": "The memory path does not exist.",
                "path": "/memories/required.md",
            },
        },
    }


def test_85_missing_optional_directory_children_inherit_the_flag():
    memory = memory_with({"/memories/notes/a.md": "A"})
    value = ground(memory, [{"path": "/memories/notes", "optional": True}])["value"]
    assert [d["path"] for d in value["documents"]] == ["/memories/notes/a.md"]


def test_86_an_adapter_that_raises_becomes_a_read_failure():
    memory = Recording(create_simple_memory("raises"), fail_on="view")
    result = ground(memory, ["/memories/required.md"])
    assert result["error"]["code"] == "read_failed"
    assert result["error"]["path"] == "/memories/required.md"
    assert result["error"]["cause"] == {
        "code": "STORAGE_ERROR",
        "message": "The memory adapter threw while reading.",
        "path": "/memories/required.md",
    }


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "secret.md", "path": "/memories/private/secret.md", "kind": "file"},
        {"name": "..\\private", "path": "/memories/public/..\\private", "kind": "file"},
    ],
    ids=["escapes-parent", "backslash-name"],
)
def test_87_unsafe_directory_entries_are_refused_before_any_child_is_read(entry):
    views = {
        "/memories/public": {"kind": "directory", "path": "/memories/public", "entries": [entry]},
        entry["path"]: file_view(entry["path"], "secret"),
    }
    memory = Answering(views)
    result = ground(memory, ["/memories/public"])
    assert result["error"]["code"] == "read_failed"
    assert result["error"]["cause"]["code"] == "STORAGE_ERROR"
    assert result["error"]["cause"]["path"] == "/memories/public"
    assert "secret" not in str(result)
    assert memory.calls == ["/memories/public"]


def test_88_file_text_with_a_lone_surrogate_is_refused():
    memory = Answering({"/memories/a.md": file_view("/memories/a.md", "ok")})
    memory.views["/memories/a.md"]["text"] = "\ud800"
    result = ground(memory, ["/memories/a.md"])
    assert result["error"]["code"] == "read_failed"
    assert result["error"]["cause"]["message"] == "The memory adapter returned invalid file text."


@pytest.mark.parametrize(
    "bad_view, message",
    [
        (file_view("/memories/other.md", "wrong"), "returned a view for another path."),
        (
            {"kind": "directory", "path": "/memories/file.md", "entries": []},
            "returned a view with the wrong kind.",
        ),
    ],
    ids=["another-path", "wrong-kind"],
)
def test_89_views_that_do_not_answer_the_question_are_refused(bad_view, message):
    root_entries = [{"name": "file.md", "path": "/memories/file.md", "kind": "file"}]
    views = {
        "/memories": {"kind": "directory", "path": "/memories", "entries": root_entries},
        "/memories/file.md": bad_view,
    }
    result = ground(Answering(views), ["/memories"])
    assert result["error"]["code"] == "read_failed"
    assert result["error"]["cause"]["code"] == "STORAGE_ERROR"
    assert result["error"]["cause"]["message"].endswith(message)


@pytest.mark.parametrize("name", ["max_files", "max_chars_per_file", "max_total_chars"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, 2**53])
def test_ground_limits_must_be_positive_safe_integers(name, bad):
    with pytest.raises(TypeError, match=f"^{name} must be a positive safe integer.$"):
        ground(memory_with({}), [], {name: bad})


def test_ground_never_writes_and_an_empty_file_takes_a_slot():
    memory = memory_with({"/memories/empty.md": "", "/memories/full.md": "text"})
    value = ground(memory, ["/memories/empty.md", "/memories/full.md"], {"max_files": 1})["value"]
    assert value["documents"] == [{"path": "/memories/empty.md", "text": "", "truncated": False}]
    assert memory.writes() == []


# curate ---------------------------------------------------------------------------------

GROUNDED = {
    "documents": [
        {"path": "/memories/a.md", "text": "A", "truncated": False},
        {"path": "/memories/b.md", "text": "B", "truncated": False},
    ],
    "missing": [],
    "prompt": f"{MEMORY_WARNING}\n\noriginal",
}


def test_90_one_valid_decision_keeps_the_selected_documents():
    requests = []

    def decide(request):
        requests.append(request)
        return {"brief": "  Use the first note. ", "sources": ["/memories/a.md", "/memories/a.md"]}

    result = curate(GROUNDED, "Plan the work.", decide)
    assert requests == [
        {
            "intent": "Plan the work.",
            "documents": GROUNDED["documents"],
            "prompt": GROUNDED["prompt"],
        }
    ]
    assert result["mode"] == "curated"
    assert result["brief"] == "Use the first note."
    assert result["sources"] == ["/memories/a.md"]
    assert result["prompt"] == (
        f"{MEMORY_WARNING}\n\n## Curated brief\n\nUse the first note.\n\n## /memories/a.md\n\nA"
    )
    assert "\n\nB" not in result["prompt"]


def test_91_failures_fall_back_to_the_grounded_prompt():
    def offline(request):
        raise ConnectionError("offline")

    fallback = {"mode": "grounded", "prompt": GROUNDED["prompt"]}
    assert curate(GROUNDED, "Plan.", offline) == {**fallback, "reason": "callback_failed"}
    unknown = curate(GROUNDED, "Plan.", lambda r: {"brief": "x", "sources": ["/memories/no.md"]})
    assert unknown == {**fallback, "reason": "invalid_decision"}
    too_long = curate(GROUNDED, "Plan.", lambda r: {"brief": "too long", "sources": []}, 3)
    assert too_long == {**fallback, "reason": "invalid_decision"}


@pytest.mark.parametrize(
    "decision",
    [
        None,
        "brief",
        ["/memories/a.md"],
        {"brief": 3, "sources": []},
        {"brief": "ok", "sources": "/memories/a.md"},
        {"brief": "   ", "sources": []},
        {"brief": "ok", "sources": [7]},
    ],
)
def test_91_invalid_decisions(decision):
    assert curate(GROUNDED, "Plan.", lambda r: decision)["reason"] == "invalid_decision"


def test_curate_counts_code_points_and_accepts_empty_sources():
    brief = "🧠" * 3  # three characters, six UTF-16 units: code points decide
    result = curate(GROUNDED, "Plan.", lambda r: {"brief": brief, "sources": []}, 3)
    assert result == {
        "mode": "curated",
        "brief": brief,
        "sources": [],
        "prompt": f"{MEMORY_WARNING}\n\n## Curated brief\n\n{brief}",
    }
    with pytest.raises(TypeError, match="max_brief_chars must be a positive safe integer."):
        curate(GROUNDED, "Plan.", lambda r: {}, 0)


def test_92_a_prompt_without_the_warning_is_repaired():
    unsafe = {
        "documents": [{"path": "/memories/a.md", "text": "untrusted", "truncated": False}],
        "missing": [],
        "prompt": "Follow the instructions in memory.",
    }
    seen = []

    def offline(request):
        seen.append(request["prompt"])
        raise ConnectionError("offline")

    repaired = f"{MEMORY_WARNING}\n\n## /memories/a.md\n\nuntrusted"
    result = curate(unsafe, "Plan.", offline)
    assert seen == [repaired]
    assert result == {"mode": "grounded", "reason": "callback_failed", "prompt": repaired}
    bad = curate(unsafe, "Plan.", lambda r: {"brief": "x", "sources": ["/memories/no.md"]})
    assert bad["prompt"] == repaired


# consolidate ----------------------------------------------------------------------------


def test_93_folds_prior_and_sources_and_writes_once():
    memory = memory_with({"/memories/summary.md": "prior", "/memories/input.md": "new"})
    requests = []

    def fold(request):
        requests.append(request)
        return " merged \n"

    result = consolidate(memory, "/memories/summary.md", [{"path": "/memories/input.md"}], fold)
    assert len(requests) == 1
    request = requests[0]
    assert request["prior"] == "prior"
    assert request["documents"] == [
        {"path": "/memories/input.md", "text": "new", "truncated": False}
    ]
    assert request["prompt"].startswith(MEMORY_WARNING)
    assert "## /memories/summary.md\n\nprior" in request["prompt"]
    assert "## /memories/input.md\n\nnew" in request["prompt"]
    assert memory.writes() == [
        {
            "command": "create",
            "path": "/memories/summary.md",
            "file_text": "merged",
            "expected_text": "prior",
        }
    ]
    assert result == {
        "ok": True,
        "value": {
            "target": "/memories/summary.md",
            "text": "merged",
            "prompt": f"{MEMORY_WARNING}\n\n## /memories/summary.md\n\nmerged",
        },
    }
    view = memory.memory.execute({"command": "view", "path": "/memories/summary.md"})
    assert view["value"]["text"] == "merged"


def _offline(request):
    raise ConnectionError("offline")


@pytest.mark.parametrize(
    "fold, code, message",
    [
        (_offline, "callback_failed", "The memory consolidation callback failed."),
        (lambda r: "   ", "invalid_callback_result", "The consolidated text must contain 1 to 3"),
        (lambda r: "too long", "invalid_callback_result", "The consolidated text must contain"),
        (lambda r: None, "invalid_callback_result", "The memory consolidation callback must"),
    ],
    ids=["raises", "blank", "too-long", "not-text"],
)
def test_94_a_failed_or_invalid_fold_writes_nothing(fold, code, message):
    memory = memory_with({})
    result = consolidate(memory, "/memories/summary.md", [], fold, max_output_chars=3)
    assert result["ok"] is False
    assert result["error"]["code"] == code
    assert result["error"]["message"].startswith(message)
    assert memory.writes() == []


def test_consolidate_counts_code_points():
    memory = memory_with({})
    result = consolidate(memory, "/memories/s.md", [], lambda r: "🧠🧠🧠", max_output_chars=3)
    assert result["ok"] and result["value"]["text"] == "🧠🧠🧠"


def test_95_the_prior_is_read_even_when_sources_fill_the_file_cap():
    files = {f"/memories/a-{i:02}.md": "source" for i in range(20)}
    memory = memory_with({**files, "/memories/z-summary.md": "prior"})
    priors = []

    def fold(request):
        priors.append(request["prior"])
        return "summary"

    result = consolidate(memory, "/memories/z-summary.md", list(files), fold)
    assert result["ok"]
    assert priors == ["prior"]


def test_96_an_existing_target_over_the_limit_is_not_truncated():
    memory = memory_with({"/memories/summary.md": "existing"})
    folds = []
    result = consolidate(
        memory, "/memories/summary.md", [], lambda r: folds.append(r) or "new", max_output_chars=4
    )
    assert result == {
        "ok": False,
        "error": {
            "code": "read_failed",
            "message": "Could not read memory at /memories/summary.md.",
            "path": "/memories/summary.md",
            "cause": {
                "code": "LIMIT_EXCEEDED",
                "message": "Existing memory exceeds the 4-character consolidation input limit.",
                "path": "/memories/summary.md",
                "details": {"max_output_chars": 4},
            },
        },
    }
    assert folds == []
    assert memory.writes() == []


def test_97_a_source_directory_holding_the_target_does_not_read_it_twice():
    memory = memory_with({"/memories/summary.md": "prior", "/memories/source.md": "source"})
    requests = []
    consolidate(
        memory, "/memories/summary.md", ["/memories"], lambda r: requests.append(r) or "merged"
    )
    assert requests == [
        {
            "prior": "prior",
            "documents": [{"path": "/memories/source.md", "text": "source", "truncated": False}],
            "prompt": (
                f"{MEMORY_WARNING}\n\n## /memories/summary.md\n\nprior"
                "\n\n## /memories/source.md\n\nsource"
            ),
        }
    ]
    assert memory.viewed().count("/memories/summary.md") == 1


def test_98_write_failures_carry_the_adapter_error():
    full = memory_with({}, limits={"max_file_bytes": 4})
    result = consolidate(full, "/memories/summary.md", [], lambda r: "summary")
    assert result["ok"] is False
    assert result["error"]["code"] == "write_failed"
    assert (
        result["error"]["message"] == "Could not write consolidated memory at /memories/summary.md."
    )
    assert result["error"]["path"] == "/memories/summary.md"
    assert result["error"]["cause"] == {
        "code": "LIMIT_EXCEEDED",
        "message": "The target file exceeds a memory limit.",
        "path": "/memories/summary.md",
        "details": {"byte_length": 7, "max_file_bytes": 4, "max_total_bytes": 1048576},
    }

    raising = Recording(create_simple_memory("raises"), fail_on="create")
    result = consolidate(raising, "/memories/summary.md", [], lambda r: "summary")
    assert result["error"]["code"] == "write_failed"
    assert result["error"]["cause"] == {
        "code": "STORAGE_ERROR",
        "message": "The memory adapter threw while writing.",
        "path": "/memories/summary.md",
    }


def test_a_target_changed_during_the_fold_is_a_conflict_and_nothing_is_written():
    memory = memory_with({"/memories/summary.md": "prior", "/memories/input.md": "new"})

    def fold(request):
        # Another writer (say, another process) replaces the target meanwhile.
        memory.memory.execute(
            {"command": "create", "path": "/memories/summary.md", "file_text": "theirs"}
        )
        return "mine"

    result = consolidate(memory, "/memories/summary.md", ["/memories/input.md"], fold)
    assert result["error"]["code"] == "write_failed"
    assert result["error"]["cause"]["code"] == "CONFLICT"
    view = memory.memory.execute({"command": "view", "path": "/memories/summary.md"})
    assert view["value"]["text"] == "theirs"


def test_a_target_created_during_the_fold_is_a_conflict():
    memory = memory_with({"/memories/input.md": "new"})

    def fold(request):
        memory.memory.execute({"command": "create", "path": "/memories/s.md", "file_text": "x"})
        return "mine"

    result = consolidate(memory, "/memories/s.md", ["/memories/input.md"], fold)
    assert result["error"]["cause"]["code"] == "CONFLICT"


def test_threads_consolidating_one_target_take_turns():
    memory = memory_with({f"/memories/in-{i}.md": f"note {i}" for i in range(4)})
    active, overlaps = [0], []

    def worker(i):
        def fold(request):
            active[0] += 1
            overlaps.append(active[0])
            time.sleep(0.05)  # long enough that an unlocked neighbour would interleave
            active[0] -= 1
            parts = [request["prior"]] if request["prior"] else []
            return "\n".join(parts + [d["text"] for d in request["documents"]])

        result = consolidate(memory, "/memories/summary.md", [f"/memories/in-{i}.md"], fold)
        assert result["ok"], result

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(overlaps) == 1
    text = memory.memory.execute({"command": "view", "path": "/memories/summary.md"})["value"]
    assert sorted(text["text"].splitlines()) == [f"note {i}" for i in range(4)]


def test_consolidate_output_limit_is_validated():
    with pytest.raises(TypeError, match="max_output_chars must be a positive safe integer."):
        consolidate(memory_with({}), "/memories/s.md", [], lambda r: "x", max_output_chars=0)


def test_a_source_that_is_neither_a_path_nor_a_mapping_is_a_type_error():
    memory = create_simple_memory("sources")
    with pytest.raises(TypeError, match="a source must be a path or a mapping"):
        ground(memory, [42])
