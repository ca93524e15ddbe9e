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
    that choosing the ``ray`` platform is the only thing that imports Ray.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, entry: T | str) -> None:
        if name in self._entries:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._entries[name] = entry

    def decorator(self, name: str) -> Callable[[T], T]:
        def wrap(obj: T) -> T:
            self.register(name, obj)
            return obj

        return wrap

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown {self.kind} '{name}'; choose one of: {', '.join(self.names())}"
            ) from None
        if isinstance(entry, str):
            module_name, _, attribute = entry.partition(":")
            resolved: T = getattr(importlib.import_module(module_name), attribute)
            self._entries[name] = resolved
            return resolved
        return entry
