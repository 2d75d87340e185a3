"""The gate in front of a folder's kernel: how the user decided its code runs (the
question, asked once per folder while runs wait for it; the choices kept or for the
session; the note on the line when nothing ran), the confirmation flagged
model-written code needs before it runs in the local kernel, and what an agent may do
there (the user's "Allow once", "Allow for this session" or "Deny").
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path

from executor._kernel_guard import literal
from executor.base import ExecutorUnavailable
from executor.configs import LocalConfig
from executor.events import Guard, Jailed, Refusal
from executor.interpreter import find_interpreter
from executor.jupyter import Kernel
from executor.safety import scan
from executor.trust import Choice, TrustFileError
from lsp_server.editor import Editor, Level, Place, TrustAnswer, TrustQuestion
from lsp_server.executors import kernel_config, sandboxed
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.session import Session, may_start, with_choice
from lsp_server.settings import Settings
from lsp_server.text.languages import LANGUAGES, Language

log = logging.getLogger(__name__)

SANDBOX_CHECK = 3.0  # seconds to find out whether the sandbox can run, before asking
ALLOW_ONCE, ALLOW_SESSION, DENY = "Allow once", "Allow for this session", "Deny"
ALLOW_ALWAYS, DONT_ALLOW = "Allow always", "Don't allow"
RUN_IN_KERNEL, DONT_RUN = "Run it in the kernel", "Don't run it"
ALLOWED_BY = {
    "process": "process:*",
    "shell": "process:*",
    "network": "network:*",
    "native": "native:*",
}
"""What the runtime guard lets flagged code do once its user said to run it: what the scan's
finding (its category) told them it does. A write or a deletion is allowed only where the
finding names its path (`_written`): the user said yes to that file, not to every write —
a link's target, a database's journal beside another file, are asked about as they come."""
_NAMED_PATH = re.compile(r"\(([^()]+)\)$")


def _allowed_by(code: str, folder: Path) -> tuple[str, ...]:
    """What the runtime guard lets flagged `code` do once it may run: what the scan found."""
    allowed: set[str] = set()
    for finding in scan(code, 1):
        if finding.category in ALLOWED_BY:
            allowed.add(ALLOWED_BY[finding.category])
        elif finding.category == "write":
            allowed |= set(_written(finding.message, folder))
    return tuple(sorted(allowed))


def _written(message: str, folder: Path) -> tuple[str, ...]:
    """The guard's patterns for the one file a write finding names (`writes outside the
    folder (~/out.csv)`), resolved as the kernel (whose working folder is `folder`) would,
    with the files SQLite keeps beside it (`-journal`, `-wal`, `-shm`)."""
    found = _NAMED_PATH.search(message)
    if found is None:
        return ()
    path = os.path.realpath(folder / os.path.expanduser(found.group(1)))
    exact = literal(path)
    return (f"write:{exact}", f"write:{exact}-journal", f"write:{exact}-wal", f"write:{exact}-shm")


def _digest(code: str) -> str:
    """Model-written code as a confirmation names it: this exact code."""
    return hashlib.sha256(code.encode()).hexdigest()


def _sandbox_ready(image: str) -> bool:
    """Whether the sandbox can run here (docker-py is imported here, off the loop)."""
    from executor.docker import sandbox_ready

    return sandbox_ready(image)


@dataclass(frozen=True)
class Admitted:
    """A folder's kernel, and the request's context as the user's decision made it (the
    sandbox, runfix's own Python) when the gate asked for one."""

    kernel: Kernel
    where: Where


class Gate:
    """Trust before a kernel, confirmation before flagged code (`Flow.gate`)."""

    def __init__(self, session: Session, editor: Editor, desk: Desk) -> None:
        self.session, self.editor, self.desk = session, editor, desk
        self._questions: dict[Path, asyncio.Future[TrustAnswer]] = {}
        """The trust question being asked, per folder (runs meanwhile wait for its answer)."""
        self._agents_allowed: set[Path] = set()
        """Folders whose user allowed agents for this session."""
        self._agents_denied: set[Path] = set()
        """Folders whose user denied an agent, until they allow one: nothing an agent asks
        there touches the kernel (its names, a value, an interrupt)."""
        self._agent_questions: dict[Path, asyncio.Future[str | None]] = {}

    # -- trust ----------------------------------------------------------------------------

    async def admit(self, where: Where, line: int | None = None) -> Admitted | None:
        """The folder's kernel, once its code may run: the first time, an undecided folder's
        user is asked how (one question per folder; runs meanwhile wait for its answer).
        None: nothing may run, and the document says so at `line`. `ExecutorUnavailable`:
        no kernel runs the document's language here (it says how to get one).

        Once per request: what it came to is kept on the request (`Where.admission`), and
        a later run of the request (a fix's candidate) runs there, deriving nothing again."""
        kept = where.admission
        if kept.kernel is not None and kept.settings is not None:
            return Admitted(kept.kernel, replace(where, settings=kept.settings, choice=kept.choice))
        admitted = await self.admission(where, line)
        if admitted is not None:
            kept.kernel, kept.settings = admitted.kernel, admitted.where.settings
            kept.choice = admitted.where.choice
        return admitted

    async def admitted_quietly(self, where: Where) -> Admitted | None:
        """`admit`, where the folder's code may already run; None (nothing asked, nothing
        said) where it may not yet."""
        if where.language is None or not may_start(where.settings, where.choice):
            return None
        return await self.admit(where)

    async def admission(self, where: Where, line: int | None) -> Admitted | None:
        """`admit`, made: the trust decision the request carries (asked for if there is
        none), then the kernel."""
        folder, language = where.folder, where.language
        if language is None:
            known = ", ".join(lang.name for lang in LANGUAGES)
            raise ExecutorUnavailable(
                f"runfix runs {known} documents; it does not know this document's language, "
                "so it ran nothing."
            )
        if not may_start(where.settings, where.choice):
            # Undecided when the request came: decided meanwhile (another request's question)?
            choice = self.session.choice(folder)
            where = replace(where, settings=with_choice(where.settings, choice), choice=choice)
        if not may_start(where.settings, where.choice):
            await self.session.kernels.stop(folder)  # revoked elsewhere (`runfix trust`)
            answer = await self._trust_answer(folder, where.settings, language)
            if answer.choice is None:
                self.not_trusted(where.uri, line, folder, answer.why)
                return None
            self.decided(folder, answer.choice)
            settings = with_choice(where.settings, answer.choice)
            where = replace(where, settings=settings, choice=answer.choice)
        kernel = await self.session.kernel_for(folder, where.settings, language, admitted=True)
        return Admitted(kernel, where)

    async def _trust_answer(
        self, folder: Path, settings: Settings, language: Language
    ) -> TrustAnswer:
        pending = self._questions.get(folder)
        if pending is None:
            pending = asyncio.ensure_future(self._ask_trust(folder, settings, language))
            self._questions[folder] = pending
            pending.add_done_callback(lambda _: self._questions.pop(folder, None))
        return await asyncio.shield(pending)

    async def _ask_trust(self, folder: Path, settings: Settings, language: Language) -> TrustAnswer:
        interpreter = find_interpreter(folder, settings.python)
        starts, source = interpreter.path, interpreter.source
        if not language.python:  # its own kernel starts, not the folder's Python
            try:
                config = await asyncio.to_thread(kernel_config, folder, settings, language)
            except ExecutorUnavailable:
                config = None
            spec = config.spec if isinstance(config, LocalConfig) else None
            if spec is not None:
                starts = " ".join(a for a in spec.argv if a not in ("-f", "{connection_file}"))
                source = f"the {spec.display_name or spec.name} kernel, kernelspec {spec.name!r}"
        try:
            sandbox = await asyncio.wait_for(
                asyncio.to_thread(_sandbox_ready, settings.docker.image), SANDBOX_CHECK
            )
        except Exception:  # no engine, no image, no docker package: no sandbox to offer
            sandbox = False
        own = sys.executable if language.python and not _same(starts, sys.executable) else None
        question = TrustQuestion(folder, starts, source, sandbox, own)
        return await self.editor.ask_trust(question)

    def decided(self, folder: Path, choice: Choice, *, keep: bool = True) -> None:
        """The user decided how the folder's code runs: kept, and the documents' notes that
        nothing ran are dropped."""
        try:
            self.session.decide(folder, choice, keep=keep)
        except TrustFileError as exc:  # kept for this session only
            self.editor.tell(
                f"runfix: {exc}; your choice holds until the editor closes", Level.WARNING
            )
        self.desk.decided(folder)

    def not_trusted(self, uri: str, line: int | None, folder: Path, why: str) -> None:
        """Say that nothing ran, and why: on the line (the desk keeps the note), whose quick
        fixes decide."""
        message = (
            f"runfix: nothing ran: {folder} is not trusted ({why}). Trust it (quick fix "
            f"'Trust this folder', or `runfix trust {folder}`) to run its code."
        )
        self.editor.remark(Place(uri, line), message)
        self.desk.not_run(uri, line, folder, message)

    # -- confirming -----------------------------------------------------------------------

    async def confirm_run(self, code: str, reason: str, where: Where, place: Place) -> bool:
        """Whether flagged model-written code may run.

        In the sandbox (`executor: docker`) the container is the control, so nothing is
        asked. Else the editor asks; a "Run" holds for this exact code for the session."""
        digest = _digest(code)
        if sandboxed(where.settings):  # (the guard still keeps the folder's tests and history)
            log.info("flagged model-written code runs in the sandbox: %s", reason)
            self.session.confirmed[digest] = _allowed_by(code, where.folder)
            return True
        if digest in self.session.confirmed:
            return True
        if await self.editor.confirm(reason, place):
            # what the user said yes to, the guard lets this code do (one question, not two)
            self.session.confirmed[digest] = _allowed_by(code, where.folder)
            return True
        log.info("flagged model-written code was not run: %s", reason)
        return False

    # -- the runtime guard ----------------------------------------------------------------

    def guard_for(self, where: Where, code: str = "") -> Guard:
        """What the runtime guard lets this request's model-written `code` do: what its user
        allowed always for the folder, once for this request, and what the scan flagged in
        this very code when the user confirmed running it."""
        kept = self.session.allowances.of(where.folder)
        confirmed = self.session.confirmed.get(_digest(code), ()) if code else ()
        return Guard(allow=where.admission.allowed + confirmed + kept, keep=kept)

    async def allow_refused(self, where: Where, refused: Sequence[Refusal], place: Place) -> bool:
        """The guard stopped model-written code (`refused`): asked at the editor whether to
        allow it once (for this request), always (for the folder, in the user's state
        folder) or not. True: allowed, run it again. Where the editor cannot ask (a
        terminal), no."""
        patterns = tuple(dict.fromkeys(r.pattern for r in refused))
        what = "; ".join(dict.fromkeys(r.sentence for r in refused))
        always = f"{ALLOW_ALWAYS} ({', '.join(patterns)})"
        at = f"{Path(where.path).name}:{place.line + 1}" if place.line is not None else where.path
        question = (
            f"runfix: the guard stopped the model's code ({at}): {what}. Allow it and run the "
            "code again?"
        )
        answer = await self.editor.choose(question, [ALLOW_ONCE, always, DONT_ALLOW])
        if answer == ALLOW_ONCE:
            where.admission.allowed += patterns
            return True
        if answer == always:
            try:
                self.session.allowances.allow(where.folder, patterns)
            except OSError as exc:
                self.editor.tell(f"runfix: {exc}; allowed for this request only", Level.WARNING)
                where.admission.allowed += patterns
            return True
        log.info("the guard's refusal stands: %s", what)
        return False

    async def allow_tried(self, where: Where, code: str, jailed: Jailed, place: Place) -> bool:
        """Model-written `code` tried, in the jail, what the jail refuses (`jailed.tried`):
        asked at the editor whether to run it in the kernel after all (what it tried allowed
        for this request), unless the user already said to run this very code for what the
        scan found it does (`confirm_run`), or it runs in the sandbox (the container is the
        control there, as for flagged code). Where the editor cannot ask (a terminal), no: it
        is held."""
        said_yes = self.session.confirmed.get(_digest(code))
        patterns = [t.pattern for t in jailed.tried]
        if sandboxed(where.settings):  # the container is the control: nothing is asked
            log.info("model code that tried %s runs in the sandbox", jailed.said())
            where.admission.allowed += tuple(dict.fromkeys(patterns))
            return True
        if said_yes is not None and all(
            any(fnmatchcase(p, allowed) for allowed in said_yes) for p in patterns
        ):
            return True  # (one question, not two)
        at = f"{Path(where.path).name}:{place.line + 1}" if place.line is not None else where.path
        question = (
            f"runfix: the model's code ({at}) tried {jailed.said()}. runfix's jail refused "
            "it, and it has not run in your kernel. Run it in the kernel?"
        )
        answer = await self.editor.choose(question, [RUN_IN_KERNEL, DONT_RUN])
        if answer != RUN_IN_KERNEL:
            log.info("held in the jail: %s", jailed.said())
            return False
        where.admission.allowed += tuple(dict.fromkeys(patterns))
        return True

    # -- agents ---------------------------------------------------------------------------

    def allow_agents(self, folder: Path) -> None:
        """Agents may run in `folder` without asking (trust still applies)."""
        self._agents_allowed.add(folder)

    async def agent_may_run(
        self, folder: Path, settings: Settings, choice: Choice | None, agent: str
    ) -> str | None:
        """Whether `agent` may run code in the folder's kernel (its settings as `choice`, the
        folder's trust decision, makes them): asked at the editor (one question at a time
        per folder, naming the agent), never in a folder that is not trusted. None: it may;
        else why not, for the agent."""
        if not may_start(settings, choice):
            return (
                f"{folder} is not trusted: nothing runs there (the user decides that in the "
                "editor or with `runfix trust`; an agent cannot)"
            )
        while folder not in self._agents_allowed:
            # One question at a time per folder, naming the agent that asked it; a call of
            # another agent meanwhile waits for it: "Allow for this session" lets it run,
            # "Allow once" only the call that asked, and the other asks its own question.
            pending = self._agent_questions.get(folder)
            mine = pending is None or pending.done()
            if pending is None or pending.done():
                question = (
                    f'runfix: the agent "{agent}" wants to run code in {folder.name}\'s kernel '
                    "(the one your runs use; its results show in your files)."
                )
                pending = asyncio.ensure_future(
                    self.editor.choose(question, [ALLOW_ONCE, ALLOW_SESSION, DENY])
                )
                self._agent_questions[folder] = pending
            answer = await asyncio.shield(pending)
            if self._agent_questions.get(folder) is pending:
                del self._agent_questions[folder]
            if answer == ALLOW_SESSION:
                self._agents_allowed.add(folder)
            elif not mine:
                continue  # a question about another agent: this one asks its own
            elif answer == ALLOW_ONCE:
                self._agents_denied.discard(folder)
                return None
            else:
                if answer == DENY:
                    self._agents_denied.add(folder)
                return "the user did not allow agents to run code in this folder"
        self._agents_denied.discard(folder)
        return None

    def agent_may_read(self, folder: Path) -> str | None:
        """Reading the kernel asks nothing, but not after the user denied an agent there:
        why not (None: it may)."""
        if folder in self._agents_denied:
            return (
                "the user denied agents in this folder: nothing of its kernel is read for "
                "them until the user allows one"
            )
        return None


def _same(one: str, other: str) -> bool:
    """Whether two interpreters are one: the same path (links are not followed: a virtual
    environment's `python` links to the one it was made with, and is another environment)."""
    return os.path.normpath(os.path.abspath(one)) == os.path.normpath(os.path.abspath(other))
