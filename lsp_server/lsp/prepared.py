"""Answers that are big and asked for again and again, made once per input and kept as JSON.

A client asks for the code lenses and inlay hints of a document after every
edit, scroll and focus change. Built with lsprotocol's types, each answer for a
20,000-line file was converted by cattrs and serialised by `json` on every
request (~100–180 ms). Here the answer is made from plain JSON once per
document text and results (`Memo`), and written as the JSON text it already is
(`Prepared`, which `server.RunfixProtocol` sends without converting it again).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request's result as JSON text, sent as it is."""

    text: str

    @classmethod
    def of(cls, value: Any) -> Prepared:
        return cls(json.dumps(value, separators=(",", ":")))


class Memo(Generic[T]):
    """One value per URI, made again when any input differs from the ones it was made from.

    Inputs are compared by identity first (a document's lines and its results are
    replaced, never changed in place, so the same object means the same content).
    The least recently made values go first beyond `size` documents."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._made: dict[str, tuple[tuple[object, ...], T]] = {}

    def get(self, uri: str, inputs: tuple[object, ...], make: Callable[[], T]) -> T:
        made = self._made.get(uri)
        if made is not None and _same(made[0], inputs):
            return made[1]
        value = make()
        self._made.pop(uri, None)
        self._made[uri] = (inputs, value)
        if len(self._made) > self.size:
            del self._made[next(iter(self._made))]
        return value


def _same(old: tuple[object, ...], new: tuple[object, ...]) -> bool:
    return len(old) == len(new) and all(a is b or a == b for a, b in zip(old, new, strict=True))


@dataclass
class ByLine:
    """JSON items of a document sorted by line: all of them, or those of a range of lines."""

    lines: list[int]
    items: list[Any]
    _whole: Prepared | None = field(default=None, repr=False)

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, Any]]) -> ByLine:
        ordered = sorted(pairs, key=lambda pair: pair[0])
        return cls([line for line, _ in ordered], [item for _, item in ordered])

    def between(self, first: int, last: int) -> Prepared:
        """The items on lines first..last (whole answers are serialised once)."""
        lo = bisect.bisect_left(self.lines, first)
        hi = bisect.bisect_right(self.lines, last)
        if lo == 0 and hi == len(self.items):
            if self._whole is None:
                self._whole = Prepared.of(self.items)
            return self._whole
        return Prepared.of(self.items[lo:hi])
