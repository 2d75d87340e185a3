"""Jupyter iopub messages → runfix events, for one run.

Pure and synchronous so that it can be tested without a kernel, and shared by
every executor that runs the kernel-side helper (local or in a container).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from executor._kernel_side import FRAME_LIMIT as KERNEL_FRAME_LIMIT
from executor._kernel_side import MESSAGE_LIMIT, MIME, TRACEBACK_LIMIT, cap
from executor.events import Display, Error, Event, Frame, Jailed, Refusal, Span, Stream, Value

# Images are kept whole (they are saved to files, not shown as text), but not without end.
_MAX_BINARY = 20_000_000


class MessageCollector:
    """Collects the events of one run, attributing each to the statement that made it.

    A second cap on output sits here, behind the kernel-side one, for output
    the kernel-side helper cannot see (a C extension writing to the stream
    object directly, a magic's own output).
    """

    def __init__(self, output_limit: int) -> None:
        self.events: list[Event] = []
        self.span: Span | None = None
        self.truncated = 0
        self.interrupted: Error | None = None
        """The KeyboardInterrupt the code ended with: an interrupt, or the code's own raise."""
        self.strays = 0
        """Characters a thread of an earlier run printed during this one (dropped)."""
        self.exited = False
        """The code asked the kernel to exit (`exit()`, `quit()`)."""
        self.refused: list[Refusal] = []
        """What the runtime guard stopped (model-written code)."""
        self.jailed: Jailed | None = None
        """How a run in the jail went (`_kernel_jail`)."""
        self._left = output_limit
        self._displays: dict[str, int] = {}
        """Where each display with a `display_id` stands in `events` (its updates go there)."""
        self._clear_next = False
        """`clear_output(wait=True)` came: what was shown goes when the next output comes."""

    def _take(self, text: str) -> str:
        if len(text) <= self._left:
            self._left -= len(text)
            return text
        kept = text[: max(self._left, 0)]
        self.truncated += len(text) - len(kept)
        self._left = 0
        return kept

    def _bundle(self, data: Mapping[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for mime, content in data.items():
            if mime == MIME:
                continue
            if not isinstance(content, str):
                content = str(content)
            if mime.startswith("image/") and not mime.endswith("svg+xml"):
                if len(content) <= _MAX_BINARY:
                    out[mime] = content
            else:
                out[mime] = self._take(content)
        return out

    def feed(self, msg: Mapping[str, Any]) -> None:
        kind = msg["header"]["msg_type"]
        content = msg.get("content", {})
        if kind == "clear_output":
            if content.get("wait"):
                self._clear_next = True
            else:
                self._clear()
            return
        if kind == "update_display_data":
            self._update(content)
            return
        if self._clear_next and kind in ("stream", "display_data", "execute_result"):
            self._clear()
        if kind == "stream":
            text = self._take(content.get("text", ""))
            if text:
                self._add_stream(content.get("name", "stdout"), text)
        elif kind in ("display_data", "update_display_data"):
            data = content.get("data", {})
            control = data.get(MIME)
            if control is None:
                display_id = (content.get("transient") or {}).get("display_id")
                if isinstance(display_id, str):
                    self._displays[display_id] = len(self.events)
                self.events.append(Display(self._bundle(data), self.span))
            else:
                self._control(control, data)
        elif kind == "execute_result":
            self.events.append(Value(self._bundle(content.get("data", {})), self.span))
        elif kind == "error":
            text = cap("\n".join(content.get("traceback", [])), TRACEBACK_LIMIT)
            ename = str(content.get("ename", "Error"))
            evalue = cap(str(content.get("evalue", "")), MESSAGE_LIMIT)
            self.events.append(Error(ename, evalue, (), text, self.span))

    def _clear(self) -> None:
        """`clear_output()`: what the run showed so far goes, as Jupyter clears the cell's
        output area (its error, which ends the run, comes after)."""
        self.events = [e for e in self.events if not isinstance(e, (Stream, Display, Value))]
        self._displays.clear()
        self._clear_next = False

    def _update(self, content: Mapping[str, Any]) -> None:
        """`update_display_data`: the display it names shows the new bundle where it stands;
        one this run did not show (an earlier cell's) is left as it was."""
        display_id = (content.get("transient") or {}).get("display_id")
        at = self._displays.get(display_id) if isinstance(display_id, str) else None
        if at is None or at >= len(self.events) or not isinstance(self.events[at], Display):
            return
        was = self.events[at]
        self.events[at] = Display(self._bundle(content.get("data", {})), was.span)

    def _add_stream(self, name: str, text: str) -> None:
        last = self.events[-1] if self.events else None
        if isinstance(last, Stream) and last.name == name and last.span == self.span:
            self.events[-1] = Stream(name, last.text + text, self.span)
        else:
            self.events.append(Stream(name, text, self.span))

    def _control(self, control: Mapping[str, Any], data: Mapping[str, Any]) -> None:
        if "stmt" in control:  # alone, or with the statement's value or error
            first, last = control["stmt"]
            self.span = Span(int(first), int(last))
        if "value" in control:
            about = control.get("about")
            about = about if isinstance(about, dict) else None
            self.events.append(Value(self._bundle(data), self.span, about))
        elif "error" in control:
            error = _error(control["error"], self.span)
            if control.get("interrupted"):
                self.interrupted = error  # the run decides: cancelled, or the code's error
            else:
                self.events.append(error)
        elif "truncated" in control:
            self.truncated += int(control["truncated"])
        elif "strays" in control:
            self.strays += int(control["strays"])
        elif control.get("exited"):
            self.exited = True
        elif "guard" in control:
            self.refused.extend(Refusal.of(r) for r in control["guard"] if isinstance(r, dict))
        elif isinstance(control.get("jail"), dict):
            self.jailed = Jailed.of(control["jail"])


FRAME_LIMIT = 2 * KERNEL_FRAME_LIMIT
"""The kernel side's caps again, for what bypasses them (an older helper, a magic's error)."""


def _frame(raw: Any) -> Frame:
    filename, line, name, *rest = raw
    repeats = int(rest[0]) if rest else 0
    said = rest[1] if len(rest) > 1 and isinstance(rest[1], dict) else {}
    count, at, context = said.get("in"), said.get("line"), said.get("context")
    return Frame(
        str(filename),
        int(line),
        str(name),
        repeats,
        (count, at) if isinstance(count, int) and isinstance(at, int) else None,
        str(said.get("call") or ""),
        tuple(str(t) for t in context[:10]) if isinstance(context, list) else (),
    )


def _error(raw: Mapping[str, Any], span: Span | None) -> Error:
    frames = tuple(_frame(f) for f in list(raw.get("frames", []))[:FRAME_LIMIT])
    if "line" in raw:  # a SyntaxError: its position is the statement
        span = Span(int(raw["line"]), int(raw.get("end_line") or raw["line"]))
    return Error(
        ename=str(raw.get("ename", "Error")),
        evalue=cap(str(raw.get("evalue", "")), MESSAGE_LIMIT),
        frames=frames,
        text=cap(str(raw.get("text", "")), TRACEBACK_LIMIT),
        span=span,
        column=raw.get("column"),
        end_line=raw.get("end_line"),
        end_column=raw.get("end_column"),
    )
