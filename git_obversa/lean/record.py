"""Stands in for `collections.namedtuple` and a frozen `dataclasses.dataclass`: `Record`.

Why: a value type of the memory port (`MemoryLimits`) is built by every one-shot memory
command, and the modules that make such types (the `collections` package; `dataclasses`,
which imports `inspect` and `re`) are a large part of that command's start. `Record` is a
tuple whose items have names (`_fields`), read as attributes (`field`); the subclass writes
its own `__new__` with those names as parameters, as it would a dataclass's `__init__`.

It keeps what callers of the dataclass it replaced relied on: `dataclasses.fields`,
`asdict`, `replace` and `is_dataclass` accept it (its `__dataclass_fields__` are made, on
first use, by `dataclasses` itself from the same names), and copy and pickle rebuild it.

Held equal by tests/test_lean.py (asdict, replace, fields, repr, copy and pickle as a
frozen dataclass with the same fields gives them).
"""

from _operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _DataclassFields:
    """`__dataclass_fields__` of a Record class, made by `dataclasses` when first asked."""

    def __get__(self, instance: object, owner: "type[Record]") -> "dict[str, Any]":
        import dataclasses

        names = [(name, "int") for name in owner._fields]
        twin = dataclasses.make_dataclass(owner.__name__, names, frozen=True)
        owner.__dataclass_fields__ = twin.__dataclass_fields__  # type: ignore[attr-defined]
        return owner.__dataclass_fields__  # type: ignore[attr-defined]


class Record(tuple):
    """A tuple whose items have names (`_fields`), each read as an attribute."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: "Any") -> None:
        super().__init_subclass__(**kwargs)
        cls.__dataclass_fields__ = _DataclassFields()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> "tuple[Any, ...]":
        return tuple(self)  # copy and pickle build it again from its items


def field(index: int, doc: str = "") -> property:
    """Item INDEX of a Record, as an attribute."""
    return property(itemgetter(index), doc=doc)
