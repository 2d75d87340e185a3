"""A run: one execute request of the kernel-side helper (`_kernel_side.run`), read the
idiomatic way — iopub messages filtered by parent id until `idle`, then the shell reply.
While it waits, the loop also watches the clock (timeout: interrupt, then restart after a
grace period), the cancel event (interrupt), `input()` asked at the editor, and the kernel
itself (death: restart) — it never waits on a dead kernel. Another language's kernel gets
the code as it is; what it publishes after its answer is looked for a while (late outputs).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import queue
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from executor.base import ExecutorState
from executor.cancel import CANCELLED, or_cancelled
from executor.events import (
    Error,
    Event,
    Jailed,
    RunOutcome,
    RunRequest,
    RunStatus,
    Stream,
    Usage,
)
from executor.foreign import placed, sent
from executor.kernel_asked_live import LiveKernel
from executor.kernel_channels import C, KernelClient
from executor.messages import MessageCollector

log = logging.getLogger(__name__)

_POLL = 0.1  # seconds between looks at the clock, the cancel event and the kernel
_ALIVE_EVERY = 0.5  # seconds between liveness checks during a run
LATE_LOOKS = (0.005, 0.05, 0.25, 1.0)
"""Seconds after another language's kernel answered a run when what it still published for
the run is looked for and taken as the run's (`_late_outputs`), unless the next run starts
first."""

DROPPED_LINE_ROOM = 100
"""Characters of a run's output, beyond `outputLimit`, for the line saying what was dropped."""
RESTARTED_NOTE = "Cancelled: the kernel was restarted, and its state was lost."

DIED_NOTE = (
    "The kernel died while running this (crash, os._exit or out of memory); "
    "it was restarted and its state was lost."
)


AskInput = Callable[[str, bool], Awaitable["str | None"]]
"""Ask the user for a line of input: (prompt, password) → the line, or None if declined."""


class RunningKernel(LiveKernel[C]):
    """Runs, one at a time (`execute`), each followed to its end."""

    def _channels_closing(self) -> None:
        super()._channels_closing()
        self._stop_late()

    async def execute(
        self,
        request: RunRequest,
        *,
        cancel: asyncio.Event | None = None,
        asked_at: float | None = None,
        ask_input: AskInput | None = None,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
        on_late: Callable[[tuple[Event, ...]], None] | None = None,
    ) -> RunOutcome:
        """Run the request; `asked_at` (loop time) is when the user asked, for `start()`.

        With `ask_input`, the code's `input()`/`getpass()` ask the user through it (None:
        they declined, and the run is cancelled); without, they raise as in a notebook
        that cannot ask. `on_stream` is told what the code prints as it comes; `on_output`
        the same with the statement that printed it. `on_late` is told the run's events
        again when another language's kernel publishes more for it after it said it was
        idle (Deno's sends a cell's value so, now and then): until the next run starts,
        for `LATE_WINDOW` seconds at most."""
        asked_at = asyncio.get_running_loop().time() if asked_at is None else asked_at
        async with self._queue:
            self._stop_late()
            if cancel is not None and cancel.is_set():
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="cancelled before it ran")
            started = self.launched and self._start_task is None  # nothing to wait for
            if (
                not started
                and await or_cancelled(self.start(asked_at=asked_at), cancel) is CANCELLED
            ):
                note = f"Cancelled while the {self.where} was starting."
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note=note)
            note = ""
            lost = False
            if not await self.is_alive():
                cause = await self._death_cause()
                await self.restart()
                lost = True
                if cause:
                    note = f"Before this run: {cause}; {self._replaced}"
                else:
                    note = "The kernel had died since the last run; its state was lost."
            self._state = ExecutorState.BUSY
            self._running, self._interrupt_sent = True, False
            try:
                outcome = await self._run(request, cancel, ask_input, on_stream, on_output, on_late)
                if self.retired is not None:
                    return self._retired_outcome(outcome)
                if outcome.status == RunStatus.ERROR and not self.plain and _helper_gone(outcome):
                    log.warning("runfix's helper was gone from the kernel; loading it again")
                    await self._load_helper(self._channels)
                    outcome = await self._run(request, cancel, ask_input, on_stream, on_output)
                outcome = await self._after_run(outcome)
            except Exception:
                if self.retired is None:
                    raise
                return self._retired_outcome(None)  # its channels closed under the run
            finally:
                self._running = False
                if self._state == ExecutorState.BUSY:
                    self._state = ExecutorState.IDLE
            await self._restart_for_caller()  # asked for as the run ended
            if self._live is not None and self._live.subshell is None:
                self._refresh_picture()  # waits for the queue: after this run is answered
            if self._exited:
                self._exited = False
                await self._restart_locked()
                note = f"The code ended the kernel (exit()); {self._replaced}"
                outcome = replace(outcome, state_lost=True, note=note)
            if lost and not outcome.state_lost:
                outcome = replace(outcome, state_lost=True, note=outcome.note or note)
            return outcome

    def _retired_outcome(self, outcome: RunOutcome | None) -> RunOutcome:
        note = f"Cancelled: the kernel was replaced ({self.retired}); its state was lost."
        events = outcome.events if outcome is not None else ()
        duration = outcome.duration if outcome is not None else 0.0
        return RunOutcome(RunStatus.CANCELLED, events, duration, note=note, state_lost=True)

    async def _run(
        self,
        request: RunRequest,
        cancel: asyncio.Event | None,
        ask_input: AskInput | None,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
        on_late: Callable[[tuple[Event, ...]], None] | None = None,
    ) -> RunOutcome:
        kc = self._channels
        loop = asyncio.get_running_loop()
        began = loop.time()
        if self.plain:
            ran = self._ran.setdefault(request.filename, {})
            ran.update(
                (request.first_line + i, row) for i, row in enumerate(request.code.splitlines())
            )
        # Code that may hold a top-level `await` runs on the kernel's loop, as IPython runs it.
        entry = (
            "await __import__('_runfix_kernel').run_async"
            if _may_await(request.code)
            else "__import__('_runfix_kernel').run"
        )
        # Silent: IPython echoes nothing and counts nothing; the helper fires the events
        # IPython would have fired for an interactive cell (`_kernel_side._cell_info`).
        # Another language's kernel gets the code as it is, and echoes and counts it.
        msg_id = kc.execute(
            sent(request.code, self.language, request.first_line)
            if self.plain
            else _jailed(request)
            if request.jail is not None
            else (
                f"{entry}({request.code!r}, {request.filename!r}, "
                f"{request.first_line}, {request.output_limit}"
                # (the guard as a string: a dict literal in the request cost IPython 0.1 ms)
                + (f", {json.dumps(request.guard.said())!r})" if request.guard else ")")
            ),
            silent=not self.plain,
            store_history=self.plain,
            allow_stdin=ask_input is not None,
        )
        relay = _InputRelay(kc, msg_id, ask_input) if ask_input is not None else None
        # The kernel-side helper keeps `output_limit` characters of the code's own output,
        # plus the line saying how much it dropped between the head and the tail.
        collector = MessageCollector(request.output_limit + DROPPED_LINE_ROOM)
        try:
            outcome = await self._follow(
                request, cancel, kc, msg_id, began, relay, collector, on_stream, on_output
            )
        finally:
            if relay is not None:
                relay.close()
        if not self.plain:
            return outcome
        place = functools.partial(
            placed,
            language=self.language,
            code=request.code,
            first_line=request.first_line,
            filename=request.filename,
            ran=self._ran.get(request.filename),
        )
        if on_late is not None and outcome.status in (RunStatus.OK, RunStatus.ERROR):
            late = functools.partial(
                self._late_outputs, kc, msg_id, outcome, collector, place, on_late
            )
            self._late = asyncio.get_running_loop().call_later(LATE_LOOKS[0], late, 0)
        return place(outcome)

    def _late_outputs(
        self,
        kc: KernelClient,
        msg_id: str,
        outcome: RunOutcome,
        collector: MessageCollector,
        place: Callable[[RunOutcome], RunOutcome],
        on_late: Callable[[tuple[Event, ...]], None],
        look: int,
    ) -> None:
        """What another language's kernel published for a run after it said it was idle, and
        after its reply: against the protocol, Deno's sends a cell's value so now and then
        (1 run in 200 with both cores loaded). Looked for `LATE_LOOKS` after the answer, on
        a timer, not a read left waiting (cancelled at once when the next run starts:
        `_stop_late`); `on_late` is told the run's events with it. Nothing else reads IOPub
        between runs (another language's kernel has no live door)."""
        self._late = None
        told = tuple(collector.events)
        try:
            while (msg := kc.iopub_waiting()) is not None:
                if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] != "status":
                    collector.feed(msg)
        except Exception as exc:  # (the channels closed under it: the kernel went)
            log.info("stopped looking for the late outputs of a run: %s", exc)
            return
        if (events := tuple(collector.events)) != told:
            on_late(place(replace(outcome, events=events)).events)
        if look + 1 < len(LATE_LOOKS):
            later = functools.partial(
                self._late_outputs, kc, msg_id, outcome, collector, place, on_late, look + 1
            )
            wait = LATE_LOOKS[look + 1] - LATE_LOOKS[look]
            self._late = asyncio.get_running_loop().call_later(wait, later)

    def _stop_late(self) -> None:
        """The next run starts (the queue is held), or the channels close: late outputs of
        the last run are no longer looked for."""
        if (late := self._late) is not None:
            self._late = None
            late.cancel()

    async def _follow(
        self,
        request: RunRequest,
        cancel: asyncio.Event | None,
        kc: KernelClient,
        msg_id: str,
        began: float,
        relay: _InputRelay | None,
        collector: MessageCollector,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
    ) -> RunOutcome:
        """Read the run's messages into `collector` until the kernel is idle again, watching
        everything else."""
        loop = asyncio.get_running_loop()
        watch = _Watch(deadline=began + request.timeout, next_alive_check=began + _ALIVE_EVERY)
        while True:
            now = loop.time()
            ended = await self._between_messages(
                watch, now, request, cancel, relay, collector, began
            )
            if ended is not None:
                return ended
            try:
                msg = await kc.get_iopub_msg(timeout=_POLL)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status":
                if msg["content"].get("execution_state") == "idle":
                    break
                continue
            collector.feed(msg)
            if msg["msg_type"] == "stream":
                _pass_on(msg, collector, on_stream, on_output)
        reply = await self._drain_reply(msg_id)
        if self.plain:
            await self._trailing(kc, msg_id, collector)
        outcome = self._finished(watch.status, collector, request, began, reply)
        if watch.why and outcome.status == RunStatus.CANCELLED:
            outcome = replace(outcome, note=watch.why)
        return outcome

    async def _trailing(self, kc: KernelClient, msg_id: str, collector: MessageCollector) -> None:
        """What another language's kernel published for the request after it said it was
        idle, before its reply: against the protocol, Deno's kernel sends a cell's value so
        when the machine is busy (17 runs in 25 with both cores loaded); by its reply it is
        there. The Python kernel never does, and is not asked."""
        while True:
            try:
                msg = await kc.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            if msg["parent_header"].get("msg_id") == msg_id:
                collector.feed(msg)

    async def _between_messages(
        self,
        watch: _Watch,
        now: float,
        request: RunRequest,
        cancel: asyncio.Event | None,
        relay: _InputRelay | None,
        collector: MessageCollector,
        began: float,
    ) -> RunOutcome | None:
        """Between messages: a restart asked for, the kernel replaced, a cancel, the timeout,
        an interrupt ignored, the kernel dead. The run's outcome if it ends here, else None."""
        if self._restart_asked is not None:
            await self._restart_for_caller()
            return self._ended(
                RunStatus.CANCELLED, collector, began, lost=True, note=RESTARTED_NOTE
            )
        if self.retired is not None:  # another kernel replaces this one: stop waiting
            # (`execute` says why, for this and for a run that ended meanwhile)
            return self._ended(RunStatus.CANCELLED, collector, began, lost=True, note="")
        declined = relay is not None and not await relay.poll(now)
        if watch.interrupted_at is None:
            if (cancel is not None and cancel.is_set()) or declined:
                watch.status, watch.interrupted_at = RunStatus.CANCELLED, now
                if declined and not (cancel is not None and cancel.is_set()):
                    watch.why = INPUT_DECLINED_NOTE
                await self._interrupt()
            elif now >= watch.deadline + (relay.waited(now) if relay is not None else 0.0):
                watch.status, watch.interrupted_at = RunStatus.TIMEOUT, now
                await self._interrupt()
        elif now >= watch.interrupted_at + self.grace:
            log.warning("%s for %s ignored the interrupt; restarting it", self.where, self.folder)
            await self._restart_locked()
            note = _stopped_note(watch.status, request.timeout, restarted=True)
            return self._ended(watch.status, collector, began, lost=True, note=note)
        if now >= watch.next_alive_check:
            watch.next_alive_check = now + _ALIVE_EVERY
            if not await self.is_alive():
                return await self._died(collector, began)
        return None

    async def _died(self, collector: MessageCollector, began: float) -> RunOutcome:
        """The kernel died during a run: say why if it can be told, and start a new one."""
        cause = await self._death_cause()
        note = f"{cause}: {self._replaced}" if cause else DIED_NOTE
        log.warning("%s for %s died during a run: %s", self.where, self.folder, note)
        where = self._last_statement()
        await self._restart_locked()
        outcome = self._ended(RunStatus.DIED, collector, began, lost=True, note=note)
        return replace(outcome, span=where or outcome.span)

    def _finished(
        self,
        status: RunStatus,
        collector: MessageCollector,
        request: RunRequest,
        began: float,
        reply: dict[str, Any] | None,
    ) -> RunOutcome:
        """The outcome of a run the kernel finished (idle again)."""
        if status == RunStatus.OK and collector.interrupted is not None:
            if self._interrupt_sent:
                status = RunStatus.CANCELLED
            else:  # `raise KeyboardInterrupt` in the code: an error like any other
                collector.events.append(collector.interrupted)
        if status == RunStatus.OK and any(isinstance(e, Error) for e in collector.events):
            status = RunStatus.ERROR
        self._exited = collector.exited
        note = _stopped_note(status, request.timeout, restarted=False)
        if collector.strays:
            dropped = f"{collector.strays:,} characters a thread of an earlier run printed"
            log.info("dropped %s during this run", dropped)
            note = f"{note} Dropped: {dropped}.".strip()
        outcome = self._ended(status, collector, began, lost=False, note=note)
        if collector.refused:
            outcome = replace(outcome, refused=tuple(collector.refused))
        if request.jail is not None:  # (no word from the jail: an older helper, a killed run)
            jailed = collector.jailed or Jailed("cut", why="the jail said nothing")
            outcome = replace(outcome, jailed=jailed)
        if reply is None:
            return outcome
        count = reply.get("content", {}).get("execution_count")
        count = count if isinstance(count, int) and count > 0 else None
        return replace(outcome, usage=_usage(reply), execution_count=count)

    async def _drain_reply(self, msg_id: str) -> dict[str, Any] | None:
        """Take our shell reply off the channel (and any stale ones before it)."""
        while True:
            try:
                reply: dict[str, Any] = await self._channels.get_shell_msg(timeout=1.0)
            except queue.Empty:
                return None
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    def _ended(
        self,
        status: RunStatus,
        collector: MessageCollector,
        began: float,
        *,
        lost: bool,
        note: str,
    ) -> RunOutcome:
        return RunOutcome(
            status=status,
            events=tuple(collector.events),
            duration=asyncio.get_running_loop().time() - began,
            truncated=collector.truncated,
            state_lost=lost,
            note=note,
            span=collector.span if status != RunStatus.OK or collector.exited else None,
        )


@dataclass
class _Watch:
    """What a run's watch keeps between messages."""

    deadline: float
    next_alive_check: float
    status: RunStatus = RunStatus.OK
    interrupted_at: float | None = None
    """When the run was interrupted (cancelled or timed out); then `grace` counts."""
    why: str | None = None
    """Why it was cancelled, where more than "interrupted" can be said."""


def _pass_on(
    msg: dict[str, Any],
    collector: MessageCollector,
    on_stream: Callable[[str], None] | None,
    on_output: Callable[[Stream], None] | None,
) -> None:
    """A stream message, as it comes, to whoever follows the run's output."""
    text = str(msg["content"].get("text", ""))
    if on_stream is not None:
        on_stream(text)
    if on_output is not None:
        on_output(Stream(str(msg["content"].get("name", "stdout")), text, collector.span))


class _InputRelay:
    """The kernel's input requests during one run, each answered by asking the user.

    The time spent waiting for the user does not count against the run's timeout."""

    def __init__(self, kc: KernelClient, msg_id: str, ask: AskInput) -> None:
        self.kc, self.msg_id, self.ask = kc, msg_id, ask
        self._asking: asyncio.Future[str | None] | None = None
        self._since = 0.0
        self._waited = 0.0

    def waited(self, now: float) -> float:
        return self._waited + (now - self._since if self._asking is not None else 0.0)

    async def poll(self, now: float) -> bool:
        """Take a new request or hand over an answer; False once the user declined."""
        if self._asking is None:
            try:
                msg = await self.kc.get_stdin_msg(timeout=0)
            except queue.Empty:
                return True
            ours = msg["parent_header"].get("msg_id") == self.msg_id
            if ours and msg["msg_type"] == "input_request":
                content = msg["content"]
                prompt, password = str(content.get("prompt", "")), bool(content.get("password"))
                self._asking = asyncio.ensure_future(self.ask(prompt, password))
                self._since = now
            return True
        if not self._asking.done():
            return True
        asking, self._asking = self._asking, None
        self._waited += now - self._since
        try:
            value = asking.result()
        except Exception as exc:  # the client could not ask: as if declined
            log.warning("asking for input failed: %s", exc)
            value = None
        if value is None:
            return False
        self.kc.input(value)
        return True

    def close(self) -> None:
        if self._asking is not None:
            self._asking.cancel()


def _usage(reply: dict[str, Any]) -> Usage | None:
    """A run's figures from its reply's payload (None when the kernel could not say)."""
    for payload in reply.get("content", {}).get("payload") or ():
        if isinstance(payload, dict) and payload.get("source") == "runfix-usage":
            figures = payload.get("usage") or {}
            try:
                return Usage(
                    cpu=float(figures["cpu"]),
                    rss_before=figures.get("rss_before"),
                    rss_after=figures.get("rss_after"),
                    peak=figures.get("peak"),
                )
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _jailed(request: RunRequest) -> str:
    """The call that runs `request` in the jail (`_kernel_jail.run`): its pieces as JSON,
    one string (a literal IPython need not parse)."""
    assert request.jail is not None
    pieces = [*request.jail.before, (request.code, request.filename, request.first_line)]
    return (
        f"__import__('_runfix_jail').run({json.dumps(pieces)!r}, {request.output_limit}, "
        f"{request.jail.budget!r}, {list(request.jail.secrets)!r}, {request.jail.through!r})"
    )


def _may_await(code: str) -> bool:
    """Whether the code could hold a top-level `await` (`async for`/`async with` too)."""
    return "await" in code or "async" in code


def _helper_gone(outcome: RunOutcome) -> bool:
    """The code deleted runfix's helper module, so the call to it failed."""
    error = outcome.error
    return error is not None and not error.frames and "_runfix_kernel" in error.evalue


INPUT_DECLINED_NOTE = (
    "Cancelled: input() got no answer (declined, timed out, or not text), so the kernel was "
    "interrupted. Its state is kept."
)


def _stopped_note(status: RunStatus, timeout: float, *, restarted: bool) -> str:
    lost = (
        " The kernel did not stop, so it was restarted and its state was lost." if restarted else ""
    )
    if status == RunStatus.TIMEOUT:
        kept = "" if restarted else " Its state is kept."
        return f"Timed out after {timeout:g}s and was interrupted.{kept}{lost}"
    if status == RunStatus.CANCELLED:
        return "Cancelled: the kernel was interrupted." + lost
    return ""
