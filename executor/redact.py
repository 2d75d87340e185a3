"""The one secret rule: what is hidden from everything that goes to a model.

A value is hidden, said as `<hidden: …>` so that the model still sees whose value it was:

- by name: a variable, mapping key, keyword or header whose name says it holds a secret
  (`api_key`, `github_token`, `password`, `Authorization`, `Cookie`, `X-Api-Key`, …, and
  the names the user adds: the `secretNames` setting);
- by value: the value of an environment variable whose name says it is a secret
  (`STRIPE_KEY`), or a text holding one; the shapes keys are issued in (`sk-…`,
  `sk_live_…`, `ghp_…`, `AKIA…`, a JWT, a private key block, a `Bearer` token); the
  password inside a URL (`postgresql://admin:…@host`);
- by source: a name the code assigns from such an environment variable
  (`token = os.environ["GITHUB_TOKEN"]`), whatever the name.

The rule runs where a value is still whole — in the kernel before a preview is cut, in the
test run's plugin before a local's repr is cut (this file is sent to both as it is, so it
imports nothing but the standard library and runs on Python 3.8) — and once more over the
whole text of every request at the model client, which puts the values back where the
model's answer repeats a placeholder (`Hider.unhide`): a fix of a line that holds a
password keeps the password. Nothing unhides anything on its way out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
SECRET_WORDS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "pass",
        "pw",
        "passphrase",
        "pwd",
        "secret",
        "secrets",
        "token",
        "apikey",
        "credential",
        "credentials",
        "creds",
        "authorization",
        "auth",
        "cookie",
        "cookies",
        "bearer",
        "sessionid",
        "privatekey",
        "accesskey",
        "secretkey",
        "signingkey",
        "xsrf",
        "csrf",
    }
)
"""A name with one of these words (its parts split at `_`, `-`, `.` and case) says so."""
_KEY_OWNERS = frozenset(
    {"api", "access", "secret", "private", "client", "signing", "encryption", "master", "license"}
)
"""`<owner>_key` (`api_key`, `access-key`, `privateKey`) says it too; a bare `key` does not."""
LAST_WORDS = frozenset({"key", "pass", "pat", "dsn"})
"""An environment variable's name ending so is a secret's (`STRIPE_KEY`, `DB_PASS`)."""
_NOT_SECRETS = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "GPG_AGENT_INFO"})
"""Environment variables whose names read as a secret's and whose values are none."""
MIN_SECRET = 6
"""An environment secret shorter than this is not looked for in texts (`1`, `true`)."""


def words(name: str) -> list[str]:
    """A name's words, lower case: `X-Api-Key` → x, api, key; `accessToken` → access, token."""
    return [w.lower() for w in _WORDS.findall(name)]


def secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a variable's, key's or keyword's name says it holds a secret (`extra`: more
    names the user listed, matched as whole names or words, case aside)."""
    parts = words(name)
    if not parts:
        return False
    joined = "".join(parts)
    if any(word in SECRET_WORDS for word in parts) or joined in SECRET_WORDS:
        return True
    if any(a in _KEY_OWNERS and b == "key" for a, b in zip(parts, parts[1:])):  # noqa: B905, RUF007 (3.8)
        return True
    for more in extra:
        wanted = words(more)
        if wanted and ("".join(wanted) == joined or set(wanted) <= set(parts)):
            return True
    return False


def secret_env_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether an environment variable's name says it holds a secret: as a variable's does,
    or ending in KEY, PASS, PAT or DSN (`STRIPE_KEY`, `DB_PASS`, `SENTRY_DSN`)."""
    parts = words(name)
    return bool(parts) and (parts[-1] in LAST_WORDS or secret_name(name, extra))


def env_secrets(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The environment's secrets worth looking for in a text: value → its variable's name,
    longest first (a secret that holds another is hidden whole)."""
    names = list(extra)
    found = {
        value: name
        for name, value in environ.items()
        if len(value) >= MIN_SECRET
        and value.strip()
        and not value.startswith("/")  # a path (SSH_AUTH_SOCK's, PWD's), not a secret
        and name not in _NOT_SECRETS
        and secret_env_name(name, names)
    }
    return dict(sorted(found.items(), key=lambda item: -len(item[0])))


KEY_SHAPES = re.compile(
    r"""(?x)
    -----BEGIN[ A-Z]*PRIVATE\ KEY-----[\s\S]*?(?:-----END[ A-Z]*PRIVATE\ KEY-----|\Z)
    | \b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}
    | \bsk-(?:proj-|ant-|or-)?[A-Za-z0-9_-]{16,}
    | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bglpat-[A-Za-z0-9_-]{16,}
    | \bxox[abposr]-[A-Za-z0-9-]{10,}
    | \b(?:AKIA|ASIA)[0-9A-Z]{16}\b
    | \bAIza[0-9A-Za-z_-]{30,}
    | \bhf_[A-Za-z0-9]{24,}
    | \bnpm_[A-Za-z0-9]{30,}
    | \bSG\.[\w-]{16,}\.[\w-]{16,}
    | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}
    """
)
"""The shapes keys are issued in (OpenAI, Anthropic, Stripe, GitHub, GitLab, Slack, AWS,
Google, Hugging Face, npm, SendGrid; a JWT; a PEM private key)."""
_SCHEMES = r"[A-Za-z][A-Za-z0-9+.-]{1,20}://"
URL_PASSWORD = re.compile(rf"({_SCHEMES}[^\s:/@'\"<>]+:)([^\s@'\"<>/]+)(@)")
"""The password of `scheme://user:password@host`."""
URL_TOKEN = re.compile(rf"({_SCHEMES})([^\s:/@'\"<>]{{12,}})(@)")
"""A token standing for the user of `https://TOKEN@host` (GitHub's clone URLs)."""
URL_QUERY = re.compile(r"([?&](?P<param>[A-Za-z_][\w.-]*)=)(?P<value>[^&#;\s'\"<>]{3,})")
"""A URL's query parameter: `?api_key=…&sig=…`."""
QUERY_SECRETS = frozenset(
    {"key", "sig", "signature", "code", "x-amz-signature", "x-amz-credential"}
)
"""Query parameters that hold a secret though their names alone would not say so elsewhere
(a URL's `key=` is an API key; a `sig=` signs it)."""
CONNECTION_PASSWORD = re.compile(
    r"(?i)(\b(?:password|pwd|passwd|pass|pw)\s*=\s*)([^;'\"\s]{1,500})"
)
"""`Password=…;`, `Pwd=…` in a connection string (ODBC, ADO.NET, libpq's `password=`)."""
_NAMED_SEQUENCE = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<quote>['\"]?)\s*(?:=|:)\s*(?P<open>[\[(])"
)
"""`name = [` or `"name": (`: a list or tuple literal whose strings are under that name."""
_STRING = re.compile(r"(?P<q>['\"])(?P<value>(?:\\.|(?!(?P=q)).){1,2000}?)(?P=q)")
_SCHEME_NAMES = frozenset({"", "Bearer", "Basic", "Token", "Digest", "token", "bearer"})
_SCHEME_WORDS = re.compile(r"\b(Bearer|Basic|Token|Digest)(\s+)([A-Za-z0-9._~+/=-]{8,})")
"""An HTTP credential after its scheme's word."""
_QUOTED = r"(?P<q>['\"])(?P<value>(?:\\.|(?!(?P=q)).){1,2000}?)(?P=q)"
_NAMED = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<quote>['\"]?)(?P<sep>\s*(?:=|:|,)\s*(?:[A-Za-z_]\w*\s*\(\s*)?)"
    + _QUOTED
)
"""`name = "value"`, `"name": "value"`, `name="value"`, `("name", "value")`, `name: str(…"`;
a name starts where no name goes on before it (else a long word is tried from each of its
letters: a 10,000-character line took 8 s)."""
_SAID = re.compile(
    r"(?m)^(?P<head>\s*(?:[-*]\s+)?)(?P<name>[A-Za-z_][\w.-]*)"
    r"(?P<sep>:\s[^\n]*?\s=\s+|\s*=\s+|:\s+)(?P<value>\S.*)$"
)
"""A line that says a name's value: `api_key: str len=28 = 'sk…'` (the kernel's variables),
`password = 'x'` (a test's locals), `Authorization: Bearer x` (a header)."""
_ENVIRON_READ = re.compile(
    r"""(?:os\.)?(?:environ\s*\[\s*|environ\.get\s*\(\s*|getenv\s*\(\s*|environ\.pop\s*\(\s*)
        (['"])(?P<var>[A-Za-z_][A-Za-z0-9_]*)\1""",
    re.X,
)
_ASSIGNED = re.compile(
    r"(?m)^[ \t]*(?P<targets>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)"
    r"\s*(?::[^=\n]*)?=(?!=)(?P<value>[^\n]*)$"
)


def sourced_names(text: str, extra: Iterable[str] = ()) -> set[str]:
    """Names `text` (code) assigns from an environment variable whose name says it is a
    secret: `token = os.environ["GITHUB_TOKEN"]`, `db = "pg://u:" + getenv("DB_PASS")`."""
    names = list(extra)
    found: set[str] = set()
    for match in _ASSIGNED.finditer(text):
        reads = [m.group("var") for m in _ENVIRON_READ.finditer(match.group("value"))]
        if any(secret_env_name(var, names) for var in reads):
            for target in match.group("targets").split(","):
                found.add(target.strip().rsplit(".", 1)[-1])
    return found


MIN_PIECE = 8
"""A piece of a secret this long, where a repr cut it, is hidden too."""
_CUTS = ("...", "…")
_PLACEHOLDER = re.compile(r"<hidden: ([^>\n]{1,200})>")


def _cut_pieces(text: str, value: str) -> set[str]:
    """The pieces of `value` that show where a repr cut it: a head before `...` or `…`, a
    tail after one (pytest's `'sk_l...EfGhIjKl'`), `MIN_PIECE` characters or more."""
    pieces: set[str] = set()
    for mark in _CUTS:
        at = text.find(mark)
        while at >= 0:
            before, after = text[max(0, at - len(value)) : at], text[at + len(mark) :]
            for size in range(min(len(value), len(before)), MIN_PIECE - 1, -1):
                if before.endswith(value[:size]):
                    pieces.add(value[:size])
                    break
            for size in range(min(len(value), len(after)), MIN_PIECE - 1, -1):
                if after.startswith(value[-size:]):
                    pieces.add(value[-size:])
                    break
            at = text.find(mark, at + len(mark))
    return pieces


class Hider:
    """The rule applied to texts on their way to a model: each secret becomes a placeholder
    saying whose it was, the same secret the same placeholder; `unhide` puts them back in
    what comes back (the model's code that repeats a line holding one)."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        extra: Iterable[str] = (),
        names: Iterable[str] = (),
    ) -> None:
        self.extra = list(extra)
        self.secrets = env_secrets(environ or {}, self.extra)
        self.names = set(names)
        """Names hidden whatever they are called (by source: `sourced_names`)."""
        self._placeholders: dict[str, str] = {}
        """value → its placeholder."""
        self._values: dict[str, str] = {}
        """placeholder → value."""
        self.said: list[str] = []
        """What each placeholder in the texts hidden says, in order, once each (what the
        request's record shows): this hider's and the kernel's."""

    def named(self, name: str) -> bool:
        """Whether a value of this name is hidden (by name, or by where it came from)."""
        return name in self.names or secret_name(name, self.extra)

    def _placeholder(self, value: str, why: str) -> str:
        known = self._placeholders.get(value)
        if known is not None:
            return known
        placeholder = f"<hidden: {why}>"
        if placeholder in self._values:
            placeholder = f"<hidden: {why} #{len(self._values) + 1}>"
        self._placeholders[value] = placeholder
        self._values[placeholder] = value
        return placeholder

    def hide(self, text: str) -> str:
        """`text` with every secret the rule finds in it hidden."""
        if not text:
            return text
        self.names |= sourced_names(text, self.extra)
        text = self.hide_environment(text)
        for value, variable in self.secrets.items():
            for piece in _cut_pieces(text, value):  # a repr cut it ('sk_l...EfGhIjKl')
                text = text.replace(piece, self._placeholder(piece, f"part of {variable}'s value"))
        text = KEY_SHAPES.sub(lambda m: self._placeholder(m.group(0), "a key"), text)
        text = URL_PASSWORD.sub(
            lambda m: m.group(1) + self._placeholder(m.group(2), "a URL's password") + m.group(3),
            text,
        )
        text = URL_TOKEN.sub(
            lambda m: m.group(1) + self._placeholder(m.group(2), "a URL's token") + m.group(3),
            text,
        )
        text = _SCHEME_WORDS.sub(
            lambda m: (
                m.group(1)
                + m.group(2)
                + self._placeholder(m.group(3), f"a {m.group(1)} credential")
            ),
            text,
        )
        text = URL_QUERY.sub(self._query, text)
        text = CONNECTION_PASSWORD.sub(
            lambda m: (
                m.group(0)
                if m.group(2).startswith("<hidden")
                else m.group(1) + self._placeholder(m.group(2), "a connection's password")
            ),
            text,
        )
        text = self._sequences(text)
        text = _NAMED.sub(self._named_literal, text)
        text = _SAID.sub(self._said_line, text)
        for why in _PLACEHOLDER.findall(text):
            if why not in self.said:
                self.said.append(why)
        return text

    def _query(self, match: re.Match[str]) -> str:
        param, value = match.group("param"), match.group("value")
        if "<hidden" in value or not (
            param.lower() in QUERY_SECRETS or self.named(param) or words(param)[-1:] == ["key"]
        ):
            return match.group(0)
        return match.group(1) + self._placeholder(value, f"a URL's {param}")

    def _sequences(self, text: str) -> str:
        """The strings of a list or tuple literal under a secret's name, each hidden."""
        out: list[str] = []
        at = 0
        for match in _NAMED_SEQUENCE.finditer(text):
            name = match.group("name").rsplit(".", 1)[-1]
            if match.start() < at or not self.named(name):
                continue
            close = "]" if match.group("open") == "[" else ")"
            end = text.find(close, match.end(), match.end() + 4000)
            if end < 0:
                continue
            inside = _STRING.sub(
                lambda m, name=name: (
                    m.group(0)  # type: ignore[misc]
                    if "<hidden" in m.group("value")
                    else m.group("q")
                    + self._placeholder(m.group("value"), f"{name}'s value")
                    + m.group("q")
                ),
                text[match.end() : end],
            )
            out += [text[at : match.end()], inside]
            at = end
        return "".join(out) + text[at:] if out else text

    def hide_environment(self, text: str) -> str:
        """`text` with the environment's secret values hidden, and nothing else: a plain
        replace, for a text too long for the whole rule."""
        for value, variable in self.secrets.items():
            if value in text:
                text = text.replace(value, self._placeholder(value, f"{variable}'s value"))
        return text

    def _named_literal(self, match: re.Match[str]) -> str:
        name, value = match.group("name"), match.group("value")
        if not self.named(name.rsplit(".", 1)[-1]) or "<hidden" in value:
            return match.group(0)
        if value.strip() in _SCHEME_NAMES:  # `"Bearer " + token`: the code, not a secret
            return match.group(0)
        hidden = self._placeholder(value, f"{name.rsplit('.', 1)[-1]}'s value")
        q = match.group("q")
        return f"{name}{match.group('quote')}{match.group('sep')}{q}{hidden}{q}"

    def _said_line(self, match: re.Match[str]) -> str:
        name = match.group("name")
        if not self.named(name.rsplit(".", 1)[-1]):
            return match.group(0)
        value = match.group("value")
        if "<hidden" in value or _is_code(value):
            return match.group(0)
        kept = self._placeholder(value, f"{name}'s value")
        return f"{match.group('head')}{name}{match.group('sep')}{kept}"

    def unhide(self, text: str) -> str:
        """`text` with the placeholders this hider made put back (longest first)."""
        for placeholder in sorted(self._values, key=len, reverse=True):
            if placeholder in text:
                text = text.replace(placeholder, self._values[placeholder])
        return text

    @property
    def hidden(self) -> tuple[str, ...]:
        """What was hidden, said without the values."""
        return tuple(self.said)


_READS = re.compile(r"[A-Za-z_][\w.]*\s*[\[(]")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*\s*(?:#.*)?")


def _is_code(value: str) -> bool:
    """A right-hand side that reads a value rather than holding one (`os.environ["X"]`,
    `get_token()`, `other_name`, an annotation's `str`): code the model must see to fix
    it, and no secret itself. A bare word of letters and digits mixed (`a1b2c3d4e5f6`)
    is a token, not a name."""
    text = value.strip()
    if _READS.match(text):
        return True
    if not _IDENTIFIER.fullmatch(text):
        return False
    word = text.split("#")[0].strip()
    mixed = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return not mixed or "_" in word or "." in word


def hide_value(
    name: str, text: str, secrets: Mapping[str, str], extra: Sequence[str] = ()
) -> str | None:
    """How the kernel says a value named `name` whose whole preview is `text`: None to
    show it as it is, else the text with what must be hidden hidden (the placeholder
    alone where the name says it is a secret)."""
    if secret_name(name, extra):
        return "<hidden: its name says it is a secret>"
    hider = Hider(extra=extra)
    hider.secrets = dict(secrets)
    said = hider.hide(text)
    return None if said == text else said
