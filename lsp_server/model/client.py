"""The model client: the `openai` package's async client against any compatible endpoint.

One request = one chat completion, streamed by default (each piece of text
goes to `on_text`, for progress), retried with backoff on 429 and 5xx while
the request's time budget lasts, stopped at once by the cancel event. Every
failure becomes a `ModelError` whose message tells the user what to do.

The API key is read from the environment variable the settings name, at the
moment of the request; it is never a setting value, never logged, and never
reaches a kernel (see `Settings.secret_names`).

Every request passes the secret rule (`executor.redact`) here, whoever built it: what
it finds is sent as `<hidden: …>`, and put back where the answer repeats it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from executor.cancel import CANCELLED, or_cancelled
from executor.redact import Hider
from lsp_server.record.store import REPLY_KEPT, REQUEST_KEPT, Asked
from lsp_server.settings import DEFAULT_MODEL, OPENAI_URL, Settings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

MAX_BACKOFF = 8.0  # seconds between retries at most


class ModelError(Exception):
    """The model could not answer; the message says why and what to change."""


class ModelCancelled(Exception):
    """The user cancelled the request."""


@dataclass(frozen=True)
class ModelConfig:
    """Where the model is and how to ask it, from the settings (never the key itself)."""

    base_url: str
    name: str
    api_key_env: str
    timeout: float
    temperature: float | None
    stream: bool
    max_tokens: int = 1024
    """The most tokens any answer may take (a request asks for less where it can)."""
    seed: int | None = None
    secret_names: tuple[str, ...] = ()
    """More names whose values the secret rule hides (the `secretNames` setting)."""

    @classmethod
    def from_settings(
        cls, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> ModelConfig:
        env = os.environ if environ is None else environ
        return cls(
            base_url=(settings.model_base_url or env.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip(
                "/"
            ),
            name=settings.model_name or env.get("RUNFIX_MODEL") or DEFAULT_MODEL,
            api_key_env=settings.model_api_key_env,
            timeout=settings.model_timeout,
            temperature=_env_number(
                settings.model_temperature, env, "RUNFIX_MODEL_TEMPERATURE", float
            ),
            stream=settings.model_stream,
            max_tokens=max(
                16,
                int(
                    _env_number(settings.model_max_tokens, env, "RUNFIX_MODEL_MAX_TOKENS", int)
                    or MAX_TOKENS
                ),
            ),
            seed=_seed(settings.model_seed, env),
            secret_names=settings.secret_extra_names,
        )

    @property
    def token_field(self) -> str:
        """OpenAI's current models take `max_completion_tokens`; every other endpoint
        (llama.cpp, Ollama, vLLM, LM Studio) `max_tokens`."""
        return "max_completion_tokens" if self.base_url == OPENAI_URL else "max_tokens"

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        return (os.environ if environ is None else environ).get(self.api_key_env) or None

    def missing(self, environ: Mapping[str, str] | None = None) -> str | None:
        """Why no request can be made (OpenAI's endpoint without a key), else None."""
        if self.base_url == OPENAI_URL and self.api_key(environ) is None:
            return (
                f"No model is configured: set {self.api_key_env} for OpenAI, or point runfix "
                "at an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio), e.g. "
                "http://localhost:11434/v1: the setting model.baseUrl in an editor; in a "
                "terminal the variables OPENAI_BASE_URL (and RUNFIX_MODEL for the model)."
            )
        return None


def _env_number(
    value: float | None, env: Mapping[str, str], name: str, kind: type[float] | type[int]
) -> float | None:
    """A setting, else the environment's `name` (a terminal's way: `runfix run --fix`); a
    value that is not a number is ignored with a log line."""
    if value is not None or not (raw := env.get(name, "").strip()):
        return value
    try:
        number = kind(raw)
    except ValueError:
        log.warning("%s=%r is not a number; ignored", name, raw)
        return None
    return number if number >= 0 else None


def _seed(value: int | None, env: Mapping[str, str]) -> int | None:
    seed = _env_number(value, env, "RUNFIX_MODEL_SEED", int)
    return None if seed is None else int(seed)


MAX_TOKENS = 1024
"""The bound on an answer when nothing sets one (model.maxTokens, RUNFIX_MODEL_MAX_TOKENS)."""
CHARS_PER_TOKEN = 3.6
"""Characters per prompt token until an endpoint's usage report says better (code and English
through BPE tokenizers: 3–4)."""


async def load_sdk() -> None:
    """Import `openai` (about a second) in a thread, the first time a model is asked: the
    server starts without it, and its loop keeps answering while it loads."""
    if "openai" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "openai")


class ModelClient:
    """One OpenAI-compatible endpoint: chat completions, streamed, cancellable, retried."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._client: openai.AsyncOpenAI | None = None
        self._chars_per_token = CHARS_PER_TOKEN
        self._token_field = config.token_field
        self.last_usage: tuple[int, int] | None = None
        """(prompt, completion) tokens of the last answer, where the endpoint said."""
        self.last_finish: str | None = None
        """Why the last answer ended (`stop`, `length`), where the endpoint said."""
        self.last_asked: Asked | None = None
        """The last exchange that was answered (None while one is under way or failed)."""
        self.many: str | None = None
        """How the endpoint gives several answers to one request, once learned: "n" (one
        request's `n` choices: llama.cpp's server, OpenAI) or "requests" (it ignores or
        refuses `n`: concurrent requests, which a server with parallel slots answers at
        once); None until the first `complete_many`."""

    def _openai(self) -> openai.AsyncOpenAI:
        if self._client is None:
            import openai  # on first use: importing it is most of a server's start-up time

            self._client = openai.AsyncOpenAI(
                base_url=self.config.base_url,
                # A local endpoint needs no key; the client insists on some string.
                api_key=self.config.api_key() or "no-key",
                max_retries=0,  # retries are ours: they must fit in the request's budget
                timeout=self.config.timeout,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def unanswered(self, timeout: float = 5.0) -> str | None:
        """Why the endpoint does not answer a model listing within `timeout`, else None."""
        await load_sdk()
        import openai

        try:
            await self._openai().models.list(timeout=timeout)
        except openai.OpenAIError as exc:
            return f"{type(exc).__name__}: {str(exc)[:200]}"
        return None

    async def served(self, timeout: float = 5.0) -> list[str] | None:
        """The names of the models the endpoint lists (`/v1/models`); None when it does
        not answer the listing (some endpoints have none)."""
        await load_sdk()
        import openai

        try:
            page = await self._openai().models.list(timeout=timeout)
        except openai.OpenAIError:
            return None
        return [model.id for model in page.data if isinstance(getattr(model, "id", None), str)]

    def prompt_tokens(self, messages: Sequence[Mapping[str, str]]) -> int:
        """About how many tokens `messages` are: a local model on a CPU reads 60–150 a
        second, so this is the wait before the first token (learned from the endpoint's
        usage reports where it sends them)."""
        chars = sum(len(m.get("content", "")) + 8 for m in messages)
        return max(1, round(chars / self._chars_per_token))

    async def complete_many(
        self,
        messages: Sequence[Mapping[str, str]],
        n: int,
        *,
        cancel: asyncio.Event | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> list[str]:
        """`n` answers to one request, sampled at `temperature` (at 0 they would be one
        answer n times): one request's `n` choices where the endpoint gives them, else
        concurrent requests with seeds one apart (`many` keeps which). Fewer than `n` come
        back only when some requests failed; ModelError when none answered."""
        if n <= 1:
            return [await self.complete(messages, cancel=cancel, max_tokens=max_tokens,
                                        temperature=temperature, seed=seed)]  # fmt: skip
        got: list[str] = []
        if self.many != "requests":
            try:
                got = await self._complete(
                    messages, None, cancel, max_tokens, (temperature, seed), n
                )
            except ModelError as exc:
                if self.many == "n" or ("'n'" not in str(exc) and " n " not in str(exc)):
                    raise
                got = []
            self.many = "n" if len(got) >= n else "requests"
            if len(got) >= n:
                return got[:n]
            log.info("the endpoint gave %d of %d choices: asking in requests", len(got), n)
        base = seed if seed is not None else self.config.seed or 0
        asked = [
            self._complete(messages, None, cancel, max_tokens, (temperature, base + i + 1), 1)
            for i in range(n - len(got))
        ]
        answers = await asyncio.gather(*asked, return_exceptions=True)
        for answer in answers:
            if isinstance(answer, ModelCancelled):
                raise answer
            if isinstance(answer, list):
                got.extend(answer)
        if not got:
            failed = next(a for a in answers if isinstance(a, BaseException))
            raise failed
        return got

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        on_text: Callable[[str], None] | None = None,
        cancel: asyncio.Event | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> str:
        """The reply's text; ModelError or ModelCancelled otherwise, within the timeout.

        The answer is bounded: `max_tokens` (capped by model.maxTokens; None: that cap).
        The secret rule hides what it finds in `messages` before they leave, and puts it
        back in the reply where the reply repeats its placeholder (a fixed line that holds
        a password keeps it)."""
        answers = await self._complete(
            messages, on_text, cancel, max_tokens, (temperature, seed), 1
        )
        return answers[0]

    async def _complete(
        self,
        messages: Sequence[Mapping[str, str]],
        on_text: Callable[[str], None] | None,
        cancel: asyncio.Event | None,
        max_tokens: int | None,
        asked_sampling: tuple[float | None, int | None],
        n: int,
    ) -> list[str]:
        """`complete`'s work, for `n` choices of one request (`n` > 1: not streamed)."""
        temperature, seed = asked_sampling
        if (why := self.config.missing()) is not None:
            raise ModelError(why)
        hider = Hider(os.environ, self.config.secret_names)
        messages = [{**m, "content": hider.hide(m.get("content", ""))} for m in messages]
        await load_sdk()  # not on the request's clock
        bound = min(max_tokens or self.config.max_tokens, self.config.max_tokens)
        self.last_asked = None
        received: list[str] = []

        def seen(text: str) -> None:
            received[:] = [text]
            if on_text is not None:
                on_text(text)

        sampling = (
            temperature if temperature is not None else self.config.temperature,
            seed if seed is not None else self.config.seed,
        )
        refused: list[str] = []  # what a retried answer said, should the clock run out
        work = asyncio.wait_for(
            self._with_retries(messages, seen, bound, sampling, refused, n), self.config.timeout
        )
        began = time.monotonic()
        try:
            reply = await or_cancelled(work, cancel)  # a cancel closes the HTTP stream
        except asyncio.TimeoutError:
            if received and received[0]:
                raise ModelError(
                    f"The model's answer was stopped after {self.config.timeout:g}s (setting "
                    f"model.timeout) with {len(received[0]):,} characters written and no end "
                    "in sight."
                ) from None
            if refused:  # the retry after a 500 or 429 was still under way
                raise ModelError(
                    f"The model at {self.config.base_url} kept answering {refused[-1]}; gave "
                    f"up after {len(refused)} tries within {self.config.timeout:g}s (setting "
                    "model.timeout)."
                ) from None
            raise ModelError(
                f"The model at {self.config.base_url} did not answer within "
                f"{self.config.timeout:g}s (setting model.timeout)."
            ) from None
        if reply is CANCELLED:
            raise ModelCancelled()
        took = time.monotonic() - began
        self.last_asked = self.asked(messages, bound, "\n\n".join(reply), took, hider.hidden)
        _log_exchange(self.last_asked.said)
        return [hider.unhide(answer) for answer in reply]

    def asked(
        self,
        messages: Sequence[Mapping[str, str]],
        bound: int,
        reply: str,
        seconds: float,
        hidden: tuple[str, ...] = (),
    ) -> Asked:
        """One exchange as the record keeps it and the output panel shows it: `messages` as
        they were sent, `reply` as it came."""
        used = self.last_usage
        kept = reply if len(reply) <= REPLY_KEPT else reply[:REPLY_KEPT] + " …"
        request = "\n\n".join(f"[{m.get('role', '?')}]\n{m.get('content', '')}" for m in messages)
        if len(request) > REQUEST_KEPT:
            request = request[:REQUEST_KEPT] + " …"
        return Asked(
            seconds,
            used[0] if used else None,
            used[1] if used else None,
            model=self.config.name,
            asked_chars=sum(len(m.get("content", "")) for m in messages),
            bound=bound,
            finish=self.last_finish,
            reply=kept,
            request=request,
            hidden=hidden,
        )

    async def _with_retries(
        self,
        messages: Sequence[Mapping[str, str]],
        on_text: Callable[[str], None] | None,
        max_tokens: int,
        sampling: tuple[float | None, int | None],
        refused: list[str],
        n: int = 1,
    ) -> list[str]:
        import openai

        deadline = time.monotonic() + self.config.timeout
        attempt = 0
        switched = False
        while True:
            try:
                if n > 1:
                    return await self._plain(messages, None, {self._token_field: max_tokens,
                                             **_sampled(sampling), "n": n})  # fmt: skip
                return [await self._once(messages, on_text, max_tokens, sampling)]
            except openai.BadRequestError as exc:
                # An endpoint that wants the other name for the bound says so in a 400:
                # asked again once with it (never without a bound).
                other = (
                    "max_tokens"
                    if self._token_field == "max_completion_tokens"
                    else "max_completion_tokens"
                )
                if switched or self._token_field not in str(exc):
                    raise ModelError(
                        f"The model at {self.config.base_url} answered 400: {_short(exc)}"
                    ) from None
                log.info("the endpoint refused %s; asking with %s", self._token_field, other)
                self._token_field, switched = other, True
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                delay = _retry_after(exc.response) or min(0.5 * 2**attempt, MAX_BACKOFF)
                refused.append(f"{exc.status_code} ({_short(exc)})")
                if time.monotonic() + delay >= deadline:
                    raise ModelError(
                        f"The model at {self.config.base_url} kept answering {refused[-1]}; "
                        f"gave up after {attempt + 1} tries."
                    ) from None
                log.info("model answered %s; retrying in %.1fs", exc.status_code, delay)
                attempt += 1
                await asyncio.sleep(delay)
            except openai.AuthenticationError:
                raise ModelError(
                    f"The model at {self.config.base_url} refused the API key; check "
                    f"{self.config.api_key_env}."
                ) from None
            except openai.NotFoundError as exc:
                raise ModelError(
                    f"The endpoint {self.config.base_url} has no model {self.config.name!r} "
                    f"({_short(exc)}); set model.name."
                ) from None
            except openai.APITimeoutError:
                raise ModelError(
                    f"The model at {self.config.base_url} did not answer within "
                    f"{self.config.timeout:g}s (setting model.timeout)."
                ) from None
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                raise ModelError(
                    f"Cannot reach the model at {self.config.base_url}: {cause}. Is the "
                    "server running? (setting model.baseUrl; in a terminal OPENAI_BASE_URL)"
                ) from None
            except openai.APIStatusError as exc:
                raise ModelError(
                    f"The model at {self.config.base_url} answered {exc.status_code}: {_short(exc)}"
                ) from None

    async def _once(
        self,
        messages: Sequence[Mapping[str, str]],
        on_text: Callable[[str], None] | None,
        max_tokens: int,
        sampling: tuple[float | None, int | None],
    ) -> str:
        extra: dict[str, Any] = {self._token_field: max_tokens, **_sampled(sampling)}
        self.last_usage = None
        if not self.config.stream:
            return (await self._plain(messages, on_text, extra))[0]
        stream = await self._openai().chat.completions.create(
            model=self.config.name, messages=cast(Any, list(messages)), stream=True, **extra
        )
        parts: list[str] = []
        finished: str | None = None
        try:
            async for chunk in stream:
                if chunk.choices:
                    choice = chunk.choices[0]
                    if piece := choice.delta.content:
                        parts.append(piece)
                        if on_text is not None:
                            on_text("".join(parts))
                    finished = choice.finish_reason or finished
                if getattr(chunk, "usage", None) is not None:
                    self._learn(messages, chunk.usage)
        finally:
            await stream.close()
        text = "".join(parts)
        self.last_finish = finished
        why = ended_early(text, finished)
        if why is None:
            return text
        # llama-cpp-python's server ends a stream this way when another request interrupts
        # it (`interrupt_requests`): what came is not the answer. Asked once more, whole.
        log.warning("the model's stream ended early (%s); asking once more without streaming", why)
        return (await self._plain(messages, on_text, extra))[0]

    async def _plain(
        self,
        messages: Sequence[Mapping[str, str]],
        on_text: Callable[[str], None] | None,
        extra: Mapping[str, Any],
    ) -> list[str]:
        """The answer in one piece (no stream): each of its choices (`n` in `extra`)."""
        reply = await self._openai().chat.completions.create(
            model=self.config.name, messages=cast(Any, list(messages)), stream=False, **extra
        )
        choices = sorted(reply.choices or [], key=lambda c: c.index)
        texts = [c.message.content or "" for c in choices] or [""]
        self.last_finish = choices[0].finish_reason if choices else None
        self._learn(messages, reply.usage)
        if on_text is not None:
            on_text(texts[0])
        return texts

    def _learn(self, messages: Sequence[Mapping[str, str]], usage: Any) -> None:
        """The endpoint's own count of the prompt's tokens: the estimate follows it."""
        prompt = getattr(usage, "prompt_tokens", None)
        done = getattr(usage, "completion_tokens", None)
        if isinstance(prompt, int) and prompt > 0:
            chars = sum(len(m.get("content", "")) + 8 for m in messages)
            self._chars_per_token = min(max(chars / prompt, 1.5), 8.0)
            self.last_usage = (prompt, done if isinstance(done, int) else 0)


PREVIEW = 160
"""Characters of an answer's first line said at INFO (the whole answer at DEBUG)."""


def _log_exchange(said: str) -> None:
    """An exchange in the log: at DEBUG in full; else in one line, the answer's first line
    cut short (enough to tell "no code block" from "no answer"), never a whole answer."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", said)
        return
    head, _, answer = said.partition("\n")
    lines = answer.strip().splitlines()
    first = lines[0] if lines else ""
    more = len(lines) > 1 or len(first) > PREVIEW
    shown = first[:PREVIEW] + (
        f" … ({len(lines)} lines; the whole answer at DEBUG)" if more else ""
    )
    log.info("%s%s", head, f" {shown}" if shown else "")


def _sampled(sampling: tuple[float | None, int | None]) -> dict[str, Any]:
    """The request's sampling fields (temperature, seed), where set."""
    temperature, seed = sampling
    out: dict[str, Any] = {}
    if temperature is not None:
        out["temperature"] = temperature
    if seed is not None:
        out["seed"] = seed
    return out


def ended_early(text: str, finished: str | None) -> str | None:
    """Why a streamed answer is not a whole one (None: it is): nothing came, the stream
    closed without saying why it ended, or it closed inside a code block. An answer that
    ended at its token bound (`length`) is whole: it is what was asked for."""
    if not text.strip():
        return "no content"
    if finished is None:
        return "no finish_reason"
    if finished != "length" and text.count("```") % 2:
        return "cut inside a code block"
    return None


def _retry_after(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("retry-after")
    try:
        return min(max(float(value), 0.0), MAX_BACKOFF) if value is not None else None
    except ValueError:
        return None


def _short(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error")
        if isinstance(message, dict):
            message = message.get("message")
        if message:
            return str(message)[:200]
    return str(exc.message)[:200]
