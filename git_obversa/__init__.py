"""git-obversa: keep why a change was made next to the change itself.

The public API is imported lazily, so that `git obversa hook ...` (which runs on every
commit) pays only for the modules it uses.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "MEMORY_ROOT": "memory.port",
    "MemoryLimits": "memory.port",
    "create_simple_memory": "memory.simple",
    "open_git_memory": "memory.git_memory",
    "run_memory_conformance": "memory.conformance",
    "assert_memory_conformance": "memory.conformance",
    "open_markdown_corpus": "corpus.markdown",
    "MEMORY_WARNING": "memory.mechanics",
    "ground": "memory.mechanics",
    "curate": "memory.mechanics",
    "consolidate": "memory.mechanics",
    "open_reasoning_record": "record.reasoning",
    "scrub": "record.scrub",
    "isolated": "stages.isolated",
    "why": "lookup.why",
    "parse_reasoning": "lookup.why",
    "GitMemoryTool": "agents.anthropic_memory",
    "AsyncGitMemoryTool": "agents.anthropic_memory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'git_obversa' has no attribute {name!r}")
    import importlib  # here: the commit hook imports this package and needs none of it

    value = getattr(importlib.import_module(f"git_obversa.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
