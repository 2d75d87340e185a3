"""The model client: the `openai` package's async client against any compatible endpoint.

One request = one chat completion, streamed by default (each piece of text
goes to `on_text`, for progress), retried with backoff on 429 and 5xx while
the request's time budget lasts, stopped at once by the cancel event. Every
failure becomes a `ModelError` whose message tells the user what to do.

The API key is read from the environment variable the settings name, at the
moment of the request; it is never a setting value, never logged, and never
reaches a kernel (see `secret_names`).
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
from lsp_server.settings import DEFAULT_MODEL, OPENAI_URL, Settings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

MAX_BACKOFF = 8.0  # seconds between retries at most


class ModelError(Exception):
    """The model could not answer; the message says why and what to change."""


class ModelCancelled(Exception):
    """The user cancelled the request."""


def secret_names(settings: Settings) -> set[str]:
    """Environment variables that hold secrets (model keys, the remote server's token):
    never passed to a kernel or an installer."""
    names = {"OPENAI_API_KEY", settings.model_api_key_env}
    token = settings.remote.token_env
    return names | ({token} if token else set())


@dataclass(frozen=True)
class ModelConfig:
    """Where the model is and how to ask it, from the settings (never the key itself)."""

    base_url: str
    name: str
    api_key_env: str
    timeout: float
    temperature: float | None
    stream: bool

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
            temperature=settings.model_temperature,
            stream=settings.model_stream,
        )

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

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        on_text: Callable[[str], None] | None = None,
        cancel: asyncio.Event | None = None,
    ) -> str:
        """The reply's text; ModelError or ModelCancelled otherwise, within the timeout."""
        if (why := self.config.missing()) is not None:
            raise ModelError(why)
        await load_sdk()  # not on the request's clock
        work = asyncio.wait_for(self._with_retries(messages, on_text), self.config.timeout)
        try:
            reply = await or_cancelled(work, cancel)  # a cancel closes the HTTP stream
        except asyncio.TimeoutError:
            raise ModelError(
                f"The model at {self.config.base_url} did not answer within "
                f"{self.config.timeout:g}s (setting model.timeout)."
            ) from None
        if reply is CANCELLED:
            raise ModelCancelled()
        return reply

    async def _with_retries(
        self, messages: Sequence[Mapping[str, str]], on_text: Callable[[str], None] | None
    ) -> str:
        import openai

        deadline = time.monotonic() + self.config.timeout
        attempt = 0
        while True:
            try:
                return await self._once(messages, on_text)
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                delay = _retry_after(exc.response) or min(0.5 * 2**attempt, MAX_BACKOFF)
                if time.monotonic() + delay >= deadline:
                    raise ModelError(
                        f"The model at {self.config.base_url} kept answering "
                        f"{exc.status_code} ({_short(exc)}); gave up after {attempt + 1} tries."
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
        self, messages: Sequence[Mapping[str, str]], on_text: Callable[[str], None] | None
    ) -> str:
        extra: dict[str, Any] = {}
        if self.config.temperature is not None:
            extra["temperature"] = self.config.temperature
        client = self._openai()
        if not self.config.stream:
            reply = await client.chat.completions.create(
                model=self.config.name, messages=cast(Any, list(messages)), stream=False, **extra
            )
            text = (reply.choices[0].message.content or "") if reply.choices else ""
            if on_text is not None:
                on_text(text)
            return text
        stream = await client.chat.completions.create(
            model=self.config.name, messages=cast(Any, list(messages)), stream=True, **extra
        )
        parts: list[str] = []
        try:
            async for chunk in stream:
                if chunk.choices and (piece := chunk.choices[0].delta.content):
                    parts.append(piece)
                    if on_text is not None:
                        on_text("".join(parts))
        finally:
            await stream.close()
        return "".join(parts)


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
