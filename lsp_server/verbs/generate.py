"""Generate: the model writes the body of a prompt (`# ai: …`) under it, with the
document and the kernel's names as context; the body is inserted, scanned, and run
when asked (`autoRun`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

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
    streamed,
)
from lsp_server.folder_files import module_names
from lsp_server.model.client import ModelCancelled, ModelError
from lsp_server.model.context import (
    GENERATE_BOUND,
    ReplyError,
    extract_code,
    generate_messages,
)
from lsp_server.runs import RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.reads import KernelReads
from lsp_server.services.runner import Runner
from lsp_server.session import Session
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
        self, session: Session, editor: Editor, runner: Runner, desk: Desk, reads: KernelReads
    ) -> None:
        self.session, self.editor, self.runner = session, editor, runner
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
            try:
                reply = await model.complete(
                    messages,
                    on_text=streamed(progress, "Generating"),
                    cancel=cancel,
                    max_tokens=GENERATE_BOUND,
                )
            except ModelCancelled:
                return GenerateAnswer(Status.CANCELLED)
            except ModelError as exc:
                return self._failed(f"runfix: {exc}")
        asked = model.last_asked
        try:
            body = range(prompt.body_first, prompt.body_last + 1)
            context = [line for i, line in enumerate(text.lines) if i not in body]
            code = extract_code(reply, prompt_line=prompt_line, context=context, language=language)
        except ReplyError as exc:
            return self._failed(f"runfix: nothing was inserted: {exc}.")
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

    def _failed(self, message: str) -> GenerateAnswer:
        self.editor.tell(message, Level.ERROR)
        return GenerateAnswer(Status.ERROR, message=message)
