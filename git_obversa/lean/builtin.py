"""Stands in for `collections.abc`, `operator` and `threading`: the built-in halves they wrap.

Why: `collections.abc` runs the whole `collections` package first, `operator` defines a
Python twin of every function before replacing it with the C one, and `threading` loads a
module of classes; a one-shot memory command needs none of that. The names below are the
very objects those modules export (`collections.abc.Mapping is _collections_abc.Mapping`,
`operator.itemgetter is _operator.itemgetter`), and `allocate_lock` is what
`threading.Lock` is.

Held equal by tests/test_lean.py (each name is the standard module's own object).
"""

from _collections_abc import Mapping
from _operator import is_not, itemgetter, ne
from _thread import allocate_lock

__all__ = ["Mapping", "allocate_lock", "is_not", "itemgetter", "ne"]
