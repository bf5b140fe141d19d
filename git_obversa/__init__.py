"""git-obversa: keep why a change was made next to the change itself.

The public API is imported lazily, so that `git obversa hook ...` (which runs on every
commit) pays only for the modules it uses.
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

_EXPORTS = {
    "MEMORY_ROOT": "port",
    "MemoryLimits": "port",
    "create_simple_memory": "simple",
    "open_git_memory": "git_memory",
    "run_memory_conformance": "conformance",
    "assert_memory_conformance": "conformance",
    "open_markdown_corpus": "corpus",
    "MEMORY_WARNING": "mechanics",
    "ground": "mechanics",
    "curate": "mechanics",
    "consolidate": "mechanics",
    "open_reasoning_record": "record",
    "scrub": "scrub",
    "isolated": "isolated",
    "why": "why",
    "parse_reasoning": "why",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'git_obversa' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"git_obversa.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        # Importing a submodule binds it as an attribute of the package. `why`,
        # `isolated` and `scrub` are both a module and the public function inside it:
        # keep the function under that name (modules stay reachable via sys.modules).
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
