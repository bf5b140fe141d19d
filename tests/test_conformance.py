"""The conformance kit (SPEC.md §2; scenarios 36–38 and 74) run against real adapters."""

from __future__ import annotations

import asyncio

import pytest

from git_obversa import assert_memory_conformance, create_simple_memory, run_memory_conformance
from git_obversa.memory.conformance import CASES
from tests.gitutil import git, make_repo

CASE_NAMES = [
    "empty root view",
    "create, overwrite, and ranged view",
    "sorted immediate directory entries",
    "unique string replacement",
    "consistent ranged view and zero-based insertion lines",
    "recursive delete and protected root",
    "file and directory rename without overwrite",
    "path and extension safety",
    "path conflict safety",
    "invalid line ranges",
    "deterministic least-recently-written eviction",
    "total-byte eviction",
    "limit failure is atomic and never evicts the target",
    "scope isolation",
    "rename validates every moved path atomically",
    "UTF-8 byte limits",
    "invalid command and argument errors",
]


class BrokenMemory:
    """An adapter whose storage always fails."""

    def __init__(self, scope):
        self.scope = scope

    async def execute(self, command):
        error = {"code": "STORAGE_ERROR", "message": "The disk is gone."}
        return {"ok": False, "command": command.get("command", "unknown"), "error": error}


class ReorderedMemory:
    """A correct adapter whose results list their keys in reverse order."""

    def __init__(self, scope, limits):
        self.inner = create_simple_memory(scope, limits)
        self.scope = scope

    def execute(self, command):
        return reverse_keys(self.inner.execute(command))


def reverse_keys(value):
    if isinstance(value, dict):
        return {key: reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(item) for item in value]
    return value


class AsyncMemory:
    """A correct adapter with an async execute."""

    def __init__(self, scope, limits):
        self.inner = create_simple_memory(scope, limits)
        self.scope = scope

    async def execute(self, command):
        await asyncio.sleep(0)
        return self.inner.execute(command)


def simple_factory(scope, limits):
    return create_simple_memory(scope, limits)


def test_the_kit_has_the_seventeen_named_cases():
    assert [name for name, _ in CASES] == CASE_NAMES


def test_s36_a_failing_adapter_is_reported_case_by_case():
    async def factory(scope, limits):
        return BrokenMemory(scope)

    report = run_memory_conformance(factory)
    assert report["ok"] is False
    assert report["cases"] == 17
    assert len(report["failures"]) == 17
    assert [failure["case"] for failure in report["failures"]] == CASE_NAMES
    for failure in report["failures"]:
        assert isinstance(failure["case"], str)
        assert isinstance(failure["message"], str)
    first = report["failures"][0]["message"]
    assert "STORAGE_ERROR" in first
    assert first == "Expected view to succeed, received STORAGE_ERROR."


def test_s37_key_order_does_not_matter():
    report = run_memory_conformance(lambda scope, limits: ReorderedMemory(scope, limits))
    assert "empty root view" not in [failure["case"] for failure in report["failures"]]
    assert report == {"ok": True, "cases": 17, "failures": []}


def test_s38_the_in_process_adapter_passes_all_cases():
    assert run_memory_conformance(simple_factory) == {"ok": True, "cases": 17, "failures": []}
    assert assert_memory_conformance(simple_factory) is None


def test_async_factory_and_async_execute_pass():
    async def factory(scope, limits):
        return AsyncMemory(scope, limits)

    assert run_memory_conformance(factory) == {"ok": True, "cases": 17, "failures": []}


def test_the_kit_runs_from_inside_an_event_loop():
    async def main():
        return run_memory_conformance(lambda scope, limits: AsyncMemory(scope, limits))

    assert asyncio.run(main())["ok"] is True


def test_scopes_follow_the_case_numbers():
    opened = []

    def factory(scope, limits):
        opened.append(scope)
        return create_simple_memory(scope, limits)

    run_memory_conformance(factory)
    assert opened[0] == "memory-conformance-1"
    assert opened[-1] == "memory-conformance-17"
    assert "memory-conformance-11-overwrite" in opened
    assert "memory-conformance-11-rename" in opened
    assert {"memory-conformance-14-first", "memory-conformance-14-second"} <= set(opened)


def test_a_raising_factory_is_one_failure_per_case_and_the_loop_goes_on():
    calls = []

    def factory(scope, limits):
        calls.append(scope)
        raise RuntimeError("cannot open")

    report = run_memory_conformance(factory)
    assert len(calls) == 17
    assert report["failures"][0] == {"case": "empty root view", "message": "cannot open"}


def test_deep_compare_failure_message():
    class ExtraEntry(ReorderedMemory):
        def execute(self, command):
            result = self.inner.execute(command)
            if result["ok"] and result["value"].get("kind") == "directory":
                result["value"]["entries"] = [{"name": "x"}]
            return result

    report = run_memory_conformance(lambda scope, limits: ExtraEntry(scope, limits))
    first = report["failures"][0]
    assert first["case"] == "empty root view"
    assert first["message"].startswith("The empty root view was not stable. Expected {")
    assert '"entries": [{"name": "x"}]' in first["message"]


def test_assert_raises_with_one_line_per_failure():
    class NoEviction(ReorderedMemory):
        def execute(self, command):
            result = self.inner.execute(command)
            if result["ok"] and "evicted" in result["value"]:
                result["value"]["evicted"] = []
            return result

    with pytest.raises(AssertionError) as raised:
        assert_memory_conformance(lambda scope, limits: NoEviction(scope, limits))
    lines = str(raised.value).splitlines()
    assert lines[0] == "Memory adapter failed 2 conformance case(s)."
    assert lines[1] == (
        "deterministic least-recently-written eviction: View changed eviction recency. "
        'Expected ["/memories/a.md"], received [].'
    )
    assert lines[2].startswith("total-byte eviction: Total-byte eviction chose the wrong file.")


def test_s74_the_git_adapter_passes_all_cases(tmp_path):
    git_memory = pytest.importorskip("git_obversa.memory.git_memory")
    repository = make_repo(tmp_path / "repo")
    head = git(repository, "rev-parse", "HEAD")

    def factory(scope, limits):
        return git_memory.open_git_memory(str(repository), scope, limits)

    assert run_memory_conformance(factory) == {"ok": True, "cases": 17, "failures": []}
    assert git(repository, "rev-parse", "HEAD") == head
    assert git(repository, "status", "--porcelain") == ""
    # The kit removes every scope it wrote (issue 27): no ref, name or history is left.
    assert git(repository, "for-each-ref", "refs/obversa/") == ""
