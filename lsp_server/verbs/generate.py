"""Generate: the model writes the body of a prompt (`# ai: …`) under it, with the
document and the kernel's names as context; the body is inserted, scanned, and run
when asked (`autoRun`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from executor.events import RunOutcome, RunStatus
from executor.safety import scan
from executor.vouched import document_names
from lsp_server.contract import (
    GenerateAnswer,
    Range,
    Status,
)
from lsp_server.editor import (
    Editor,
    Level,
    LineEdit,
    Place,
    streamed,
)
from lsp_server.fix.candidates import (
    SAMPLED_TEMPERATURE,
    Ran,
    agreed,
    disagreement,
    grouped,
    in_jail,
)
from lsp_server.fix.fixing import Asking
from lsp_server.fix.ports import ask_at_once, attempt_run
from lsp_server.folder_files import module_names
from lsp_server.model.client import ModelCancelled, ModelClient, ModelError
from lsp_server.model.context import (
    GENERATE_BOUND,
    ReplyError,
    extract_code,
    generate_messages,
)
from lsp_server.model.paste import PASTE_SYSTEM, from_file
from lsp_server.runs import RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.reads import KernelReads
from lsp_server.services.runner import Runner
from lsp_server.session import Session
from lsp_server.text.languages import PYTHON
from lsp_server.text.positions import strip_eol
from lsp_server.text.prompts import Prompt, prompt_at, prompt_lines

log = logging.getLogger(__name__)


def _find_again(
    lines: Sequence[str], was: Prompt, text: str, markers: Sequence[str]
) -> Prompt | None:
    """The prompt in the document as it is now (it may have moved while the model wrote)."""
    if was.line < len(lines) and strip_eol(lines[was.line]) == text:
        return prompt_at(lines, was.line, markers)
    same = [i for i in prompt_lines(lines, markers) if strip_eol(lines[i]) == text]
    if not same:
        return None
    return prompt_at(lines, min(same, key=lambda i: abs(i - was.line)), markers)


class Generator:
    """Writing a prompt's body (`Flow.generator`)."""

    def __init__(
        self,
        session: Session,
        editor: Editor,
        gate: Gate,
        runner: Runner,
        desk: Desk,
        reads: KernelReads,
    ) -> None:
        self.session, self.editor, self.gate, self.runner = session, editor, gate, runner
        self.desk, self.reads = desk, reads

    # -- generate -------------------------------------------------------------------------

    async def generate(
        self, where: Where, line: int, run: bool, cancel: asyncio.Event
    ) -> GenerateAnswer:
        """Write (or rewrite) the body of the prompt on `line`; with `run`, run it too."""
        text, settings, language = where.text, where.settings, where.language
        if language is None:
            return self._failed("runfix: it does not know this document's language.")
        prompt = prompt_at(text.lines, line, settings.prompt_markers)
        if prompt is None:
            said = f"`{language.comment} ai: …`"
            return self._failed(f"runfix: line {line + 1} is not a prompt ({said}).")
        prompt_line = strip_eol(text.lines[prompt.line])
        variables = await self.reads.variables(where)
        messages = generate_messages(
            prompt.text,
            text.lines,
            prompt.line,
            (prompt.body_first, prompt.body_last),
            variables,
            settings.context_budget,
            language,
        )
        model = self.session.model_for(settings)
        async with self.editor.progress(cancel) as progress:
            reading = model.prompt_tokens(messages)
            progress.report(
                f"Generating: {prompt.text[:60]}: the model is reading the prompt "
                f"(~{reading:,} tokens)"
            )
            body = range(prompt.body_first, prompt.body_last + 1)
            context = [line for i, line in enumerate(text.lines) if i not in body]
            n = settings.candidates() if language.python else 1
            try:
                if n > 1:
                    progress.report(f"Generating: {n} candidates, asked at once")
                    asked_for = (prompt_line, context)
                    found = await self._round(where, prompt, asked_for, messages, model, n, cancel)
                    if isinstance(found, str):
                        return self._failed(f"runfix: nothing was inserted: {found}.")
                    code, note = found
                else:
                    reply = await model.complete(
                        messages,
                        on_text=streamed(progress, "Generating"),
                        cancel=cancel,
                        max_tokens=GENERATE_BOUND,
                    )
                    code = extract_code(
                        reply, prompt_line=prompt_line, context=context, language=language
                    )
                    note = ""
            except ModelCancelled:
                return GenerateAnswer(Status.CANCELLED)
            except ModelError as exc:
                return self._failed(f"runfix: {exc}")
            except ReplyError as exc:
                return self._failed(f"runfix: nothing was inserted: {exc}.")
        asked = model.last_asked
        text = self.desk.text(where.uri)
        now = _find_again(text.lines, prompt, prompt_line, settings.prompt_markers)
        if now is None:
            return self._failed(
                "runfix: the prompt changed while the model wrote; nothing was inserted."
            )
        edit = LineEdit(now.body_first, now.body_last, code)
        label = "runfix: regenerate" if now.has_body else "runfix: generate"
        if not await self.editor.apply(where.uri, text.version, edit, label):
            return self._failed("runfix: the editor did not apply the generated code.")
        first, last = now.body_first, now.body_first + code.rstrip("\n").count("\n")
        answer = GenerateAnswer(Status.OK, Range.lines(first, last))
        if note:
            self.editor.tell(f"runfix: {note}", Level.WARNING, Place(where.uri, first))
        shown = await self.desk.shown(where, first, code)
        if shown is None:
            log.warning("the generated code did not show up in %s; it will not be run", where.uri)
            return answer
        findings = scan(
            code,
            first + 1,
            language=language.unread,
            context=document_names("".join(shown.text.lines)),
            modules=await asyncio.to_thread(module_names, where.folder),
        )
        self.desk.mark_findings(where.uri, shown.text.version, findings)
        if run or settings.auto_run:
            ran = await self.runner.run_range(
                shown, Range.lines(first, last), cancel, RunMode(origin="model", asked=asked)
            )
            answer = GenerateAnswer(Status.OK, answer.range, ran)
        return answer

    async def _round(
        self,
        where: Where,
        prompt: Prompt,
        asked_for: tuple[str, list[str]],
        messages: list[dict[str, str]],
        model: ModelClient,
        n: int,
        cancel: asyncio.Event,
    ) -> tuple[str, str] | str:
        """`n` answers asked at once — the request at its own temperature, the same sampled
        warmer, and one asked the paste's way (the whole file) — each run in its own jail
        where the body goes; of those that ran clean, the largest group by what they print
        wins (`candidates.agreed`). (The code, what to tell the user: the disagreement, or
        that none ran clean), or why no answer held code. `asked_for`: the prompt's line and
        the file's other lines (what an answer's code is told from)."""
        lines, language = where.text.lines, where.language or PYTHON
        prompt_line, context = asked_for
        asks = [
            Asking(messages, 1, GENERATE_BOUND),
            Asking(_paste_generate(lines, prompt.text), 1, GENERATE_BOUND * 2, how="paste"),
        ]
        if n > 2:
            asks.append(Asking(messages, n - 2, GENERATE_BOUND, SAMPLED_TEMPERATURE, "sampled"))
        replies, failed = await ask_at_once(model, asks, cancel)
        votes: dict[str, int] = {}
        """Each code answered, and how many answers were it."""
        why = "no answer held code"
        for ask, answers in zip(asks, replies, strict=True):
            how = ask.how
            for reply in answers:
                try:
                    code = (
                        from_file(reply, lines, prompt.body_first, prompt.body_last, language)
                        if how == "paste"
                        else extract_code(reply, prompt_line=prompt_line, context=context)
                    )
                except ReplyError as exc:
                    why = str(exc)
                    continue
                if code.strip():
                    votes[code] = votes.get(code, 0) + 1
        codes = list(votes)
        if not codes:
            if failed and not any(replies[:2]):  # (the request's and the paste's)
                raise failed[0]
            return why
        clean: list[Ran] = []
        for code in codes:
            ran = await attempt_run(
                self.gate, self.runner, where, code, prompt.body_first, cancel, proof_only=True
            )  # (a Generate that was not asked to run asks nothing, runs nothing unjailed)
            if ran.status == RunStatus.CANCELLED and cancel.is_set():
                raise ModelCancelled()
            if ran.status == RunStatus.CANCELLED or not in_jail(ran):
                return codes[0], ""  # nothing may run here, or not in a jail: as one answer
            if _clean(ran):
                clean.append(Ran(code, ran, votes=votes[code]))
        groups = grouped(clean)
        chosen = agreed(groups, "")
        if chosen is not None:
            return chosen.code, ""
        if groups:
            said = disagreement(groups, "look at what it prints before you keep it")
            return groups[0][0].code, f"the code inserted {said}"
        return codes[0], f"none of the {len(codes)} answers ran clean; the first is inserted"

    def _failed(self, message: str) -> GenerateAnswer:
        self.editor.tell(message, Level.ERROR)
        return GenerateAnswer(Status.ERROR, message=message)


def _paste_generate(lines: Sequence[str], prompt: str) -> list[dict[str, str]]:
    """The paste's way of asking for a prompt's body: the whole file, nothing else."""
    text = "".join(lines).rstrip()
    user = (
        f"My Python file:\n```python\n{text}\n```\nWrite the code the comment `{prompt}` asks "
        "for, right under it. Reply with the complete file in one ```python block."
    )
    return [{"role": "system", "content": PASTE_SYSTEM}, {"role": "user", "content": user}]


def _clean(ran: RunOutcome) -> bool:
    """It ran to its end and tried nothing the jail refuses."""
    return ran.status == RunStatus.OK and (ran.jailed is None or ran.jailed.clean)
