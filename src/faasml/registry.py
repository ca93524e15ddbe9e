"""Implementations looked up by name; heavy ones imported only when selected."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from faasml.exceptions import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> implementation table.

    Entries are either objects or ``"module:attribute"`` strings resolved on first use, so
    that choosing the ``ray`` platform is the only thing that imports Ray. An entry may name
    a ``group`` (kinds of one thing used in different places, e.g. the cluster policies of a
    GPU pool and of idle nodes); ``names(group)`` lists one group.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}
        self._groups: dict[str, str] = {}

    def register(self, name: str, entry: T | str, group: str = "") -> None:
        if name in self._entries:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._entries[name] = entry
        self._groups[name] = group

    def decorator(self, name: str) -> Callable[[T], T]:
        def wrap(obj: T) -> T:
            self.register(name, obj)
            return obj

        return wrap

    def names(self, group: str | None = None) -> list[str]:
        return sorted(n for n in self._entries if group is None or self._groups[n] == group)

    def group_of(self, name: str) -> str:
        if name not in self._entries:
            raise self._unknown(name)
        return self._groups[name]

    def _unknown(self, name: str) -> UnknownNameError:
        return UnknownNameError(
            f"unknown {self.kind} '{name}'; choose one of: {', '.join(self.names())}"
        )

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise self._unknown(name) from None
        if isinstance(entry, str):
            module_name, _, attribute = entry.partition(":")
            resolved: T = getattr(importlib.import_module(module_name), attribute)
            self._entries[name] = resolved
            return resolved
        return entry
