"""A Jupyter Server's (or an Enterprise Gateway's) REST API as runfix calls it: the token
from the environment variable `remote.tokenEnv` names, sent only in the Authorization header
to the configured server (redirects are not followed), never logged; TLS as configured; each
failure one sentence saying what to do (`ExecutorUnavailable`), a kernel the server does
not have `Gone`."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from executor.base import ExecutorUnavailable, short_error
from executor.configs import RemoteConfig

REQUEST_TIMEOUT = 15.0
"""Seconds a REST call may take (kernel creation and restart: the start timeout)."""


class Gone(Exception):
    """The server does not know the kernel (404)."""


class Failed(ExecutorUnavailable):
    """The server answered a request with an error (not a refusal)."""


def _tls_problem(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE" in str(seen).upper():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# -- kernels runfix created ----------------------------------------------------------------


class ServerApi:
    """The server's REST API (`remote.url`), one client for a kernel's life."""

    def __init__(self, config: RemoteConfig) -> None:
        self.config = config
        self.base = (config.url or "").rstrip("/")
        self._http: httpx.AsyncClient | None = None

    def token(self) -> str | None:
        name = self.config.token_env
        if name is None:
            return None
        value = os.environ.get(name, "").strip()
        if not value:
            raise ExecutorUnavailable(
                f"Set the environment variable {name} to the token of {self.base} "
                "(runfix's remote.tokenEnv names it; the token itself is never a setting), "
                "then restart the kernel."
            )
        return value

    def headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        token = self.token()
        if token is not None:
            headers["Authorization"] = f"token {token}"
        return headers

    def tls(self) -> ssl.SSLContext | None:
        if not self.base.startswith("https:"):
            return None
        context = ssl.create_default_context()
        if not self.config.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                verify=self.tls() or True,
                timeout=httpx.Timeout(REQUEST_TIMEOUT),
                follow_redirects=False,
            )
        return self._http

    async def request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """Call the server's REST API; its JSON answer (None for an empty one).

        Raises `Gone` for a 404 on a kernel, `ExecutorUnavailable` saying what to do for the
        rest."""
        url = f"{self.base}{path}"
        try:
            response = await self._client().request(
                method,
                url,
                json=body,
                headers=self.headers(),
                timeout=timeout or REQUEST_TIMEOUT,
            )
        except httpx.TimeoutException:
            raise ExecutorUnavailable(
                f"{self.config.host} did not answer {method} {path} within "
                f"{timeout or REQUEST_TIMEOUT:g}s."
            ) from None
        except httpx.HTTPError as exc:
            raise ExecutorUnavailable(self.no_answer(exc)) from None
        if response.status_code in (401, 403):
            raise ExecutorUnavailable(self.refused(response.status_code, _reason(response)))
        if response.status_code == 404 and path.startswith("/api/kernels/"):
            raise Gone(path)
        if response.status_code >= 400:
            raise Failed(
                f"{self.config.host} answered {method} {path} with HTTP {response.status_code}: "
                f"{_reason(response)}"
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ExecutorUnavailable(
                f"{self.base} did not answer as a Jupyter Server does (no JSON from {path}); "
                "check remote.url."
            ) from None

    def no_answer(self, exc: BaseException) -> str:
        if _tls_problem(exc):
            return (
                f"TLS with {self.config.host} failed: {short_error(exc)}. Give this machine the "
                "server's certificate authority (SSL_CERT_FILE), or set runfix's "
                "remote.verifyTls to false for a server you trust."
            )
        return (
            f"Nothing answers at {self.base} ({short_error(exc)}). Is the Jupyter Server or "
            "Enterprise Gateway running, and the tunnel to it open? (runfix's remote.url)"
        )

    def refused(self, status: int, reason: str) -> str:
        token = self.config.token_env
        if "KERNEL_USERNAME" in reason:  # an Enterprise Gateway that wants to know who
            fix = "set KERNEL_USERNAME (and what else it needs) in runfix's remote.kernelEnv"
        elif token:
            fix = f"set {token} to a valid token for {self.base}"
        else:
            fix = "set runfix's remote.tokenEnv to the environment variable holding its token"
        said = f" ({reason})" if reason else ""
        return f"{self.config.host} refused runfix (HTTP {status}){said}: {fix}."

    def socket_url(self, kernel_id: str) -> str:
        """The WebSocket of a kernel's channels."""
        parts = urlsplit(self.base)
        scheme = "wss" if parts.scheme == "https" else "ws"
        path = f"{parts.path}/api/kernels/{quote(kernel_id)}/channels"
        return urlunsplit((scheme, parts.netloc, path, "", ""))

    async def close(self) -> None:
        """The HTTP client closed (a new one is made if the API is called again)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def about_server(self) -> str:
        """What the server says it is (`GET /api`), checking the URL and the token on the way:
        `/api/kernelspecs` answers only with a token it takes."""
        about = await self.request("GET", "/api")
        await self.request("GET", "/api/kernelspecs")  # an Enterprise Gateway may not list kernels
        if not isinstance(about, dict) or "version" not in about:
            raise ExecutorUnavailable(f"{self.base} does not answer as a Jupyter Server does.")
        gateway = about.get("gateway_version")
        kind = f"Enterprise Gateway {gateway}" if gateway else "Jupyter Server"
        return f"{kind} (server API {about['version']}); the token is accepted"

    async def kernel_names(self) -> list[str]:
        """The server's kernel specs (empty when it will not say)."""
        try:
            specs = await self.request("GET", "/api/kernelspecs")
        except (ExecutorUnavailable, Gone):
            return []
        return sorted((specs or {}).get("kernelspecs", {}))

    async def diagnose(self, say: Callable[[str], None]) -> bool:
        """`runfix doctor`'s check of the server: it answers as a Jupyter Server does, takes
        the token, and has the kernel spec `remote.kernelName` names."""
        try:
            about = await self.about_server()
        except ExecutorUnavailable as exc:
            say(f"server:         FAILED — {exc}")
            return False
        say(f"server:         {about}")
        names = await self.kernel_names()
        wanted = self.config.kernel_name
        if names and wanted not in names:
            say(f"kernel spec:    {wanted} MISSING — it has {', '.join(names)}")
            say("  fix: set runfix's remote.kernelName to one of them")
            return False
        say(f"kernel spec:    {wanted}" + (f"  (of {', '.join(names)})" if names else ""))
        return True

    async def spec_name(self) -> tuple[str, str]:
        """The server's kernelspec for another language, and the language it says it runs:
        the first whose `language` is one that runs it (in the order of `languages`, then
        by name)."""
        specs = await self.request("GET", "/api/kernelspecs")
        listed = (specs or {}).get("kernelspecs", {}) if isinstance(specs, dict) else {}
        if (named := self.config.named) is not None:
            if not isinstance(listed.get(named), dict):
                raise ExecutorUnavailable(
                    f"{self.config.host} has no kernel named {named!r} (runfix's `kernels` "
                    f"setting for {self.config.language}); it has {', '.join(sorted(listed))}."
                )
            return named, spec_language(listed[named])
        found: list[tuple[int, str, str]] = []
        for name, about in listed.items():
            language = spec_language(about)
            if language.lower() in self.config.languages:
                found.append((self.config.languages.index(language.lower()), name, language))
        if not found:
            language = self.config.language
            raise ExecutorUnavailable(
                f"{self.config.host} has no Jupyter kernel for {language} (it has "
                f"{', '.join(sorted(listed)) or 'none it will list'}), so this {language} "
                "document was not run (never as Python)."
            )
        _, name, language = min(found)
        return name, language


def spec_language(about: Any) -> str:
    """The `language` a kernelspec of `/api/kernelspecs` says it runs ("" where it says none)."""
    spec = about.get("spec") if isinstance(about, dict) else None
    return str(spec.get("language", "")) if isinstance(spec, dict) else ""


def _reason(response: httpx.Response) -> str:
    """What the server said about an error (Jupyter answers JSON with `message`/`reason`)."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or ""
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or response.reason_phrase or "")[:300]
    return response.reason_phrase or ""
