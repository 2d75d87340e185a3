"""Which distribution provides an import: `ModuleNotFoundError: No module named 'X'` → what
to install, and whether any data vouches for it.

`pip install websocket` installs someone else's package (the library is
`websocket-client`); so does `pip install kafka`, `faiss`, `docx`, `attr`. A name
is never guessed into an install: the answer comes from data, layer by layer,
first that knows wins:

1. the distributions installed here (`importlib.metadata.packages_distributions`):
   what this machine already resolved;
2. namespace packages (`google.cloud.storage` → `google-cloud-storage`,
   `azure.storage.blob` → `azure-storage-blob`), where the database below has
   that distribution;
3. pipreqs' curated mapping of import names to distributions (Apache-2.0,
   `data/pipreqs-mapping.txt`), where the database confirms the distribution
   really provides the name (it drops the mapping's stale entries);
4. which of the distributions that provide the name people install: the download
   counts of the 15,000 most-downloaded on PyPI (`data/top-pypi-packages.csv`, a
   monthly snapshot, `scripts/refresh_top_pypi.py`). Of the providers in it, the most
   downloaded is chosen (`grpc` → `grpcio`, not the placeholder `grpc`; `skimage` →
   `scikit-image`; for `mysql.connector`, those named with `connector` first); it is
   installed unasked only when something besides its downloads says it is the import's
   own — its name is the import's or made from it, it installs nothing else, or the
   mapping above agrees — else proposed in the question. A provider not in that list is
   never installed unasked when one in it exists;
5. pigar's database of what the published wheels on PyPI install (BSD-3, the
   `pigar` package's `.db.sqlite3`: 650,000 distributions, read-only, never its
   code), for names no popular distribution provides: the only distribution providing
   the name; else the one whose name is the import's, when no related distribution is
   further developed; else the most developed distribution named after it (a guess
   the user confirms).

What none of that vouches for is still offered, as a question: its `vouched` is
False and the editor asks before installing (`Install `X`? (…)`).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DATA = Path(__file__).parent / "data"
NAMESPACES = {"google": 3, "azure": 3, "jaraco": 2, "sphinxcontrib": 2, "backports": 2}
"""Namespace packages whose distributions are named after their first parts
(`google.cloud.storage` → `google-cloud-storage`; `jaraco.text` → `jaraco-text`)."""


@dataclass(frozen=True)
class Provider:
    """What to install for an import."""

    distribution: str
    vouched: bool
    """Data says this distribution provides the import: it installs without a question."""
    why: str
    """Where the answer came from, for the quick fix and the note (`pipreqs' mapping`)."""
    others: tuple[str, ...] = ()
    """Other distributions that provide the same import name (when it was a choice)."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _installed() -> dict[str, list[str]]:
    from importlib.metadata import packages_distributions

    try:
        return {k: list(v) for k, v in packages_distributions().items()}
    except Exception as exc:  # a broken distribution's metadata
        log.debug("installed distributions unreadable: %s", exc)
        return {}


@functools.cache
def _download_list() -> dict[str, tuple[str, int]]:
    """The 15,000 most-downloaded distributions, by canonical name: the name as the list
    spells it and its downloads over 30 days (read once)."""
    out: dict[str, tuple[str, int]] = {}
    for line in (DATA / "top-pypi-packages.csv").read_text(encoding="utf-8").splitlines()[2:]:
        name, _, count = line.rpartition(",")
        if name and count.isdigit():
            out.setdefault(canonical(name), (name, int(count)))
    return out


@functools.cache
def _downloads() -> dict[str, int]:
    """Downloads over 30 days, by canonical name."""
    return {key: count for key, (_, count) in _download_list().items()}


@functools.cache
def _curated() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (DATA / "pipreqs-mapping.txt").read_text(encoding="utf-8").splitlines():
        name, sep, dist = line.strip().partition(":")
        if sep and name and dist:
            out.setdefault(name, dist)
    return out


def _database_path() -> Path | None:
    spec = importlib.util.find_spec("pigar")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / ".db.sqlite3"
    return path if path.is_file() else None


@functools.cache
def _database() -> sqlite3.Connection | None:
    path = _database_path()
    if path is None:
        log.info("pigar's database is not installed: imports are resolved with less data")
        return None
    return sqlite3.connect(
        f"{path.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
    )


@dataclass(frozen=True)
class _Published:
    name: str
    version: tuple[int, ...]
    dedicated: bool
    """It installs this import name alone (besides private `_x` modules and `tests`): not a
    bundle of other projects' modules."""


@functools.cache
def _providers(top: str) -> tuple[_Published, ...]:
    """Each published distribution that installs `top`."""
    db = _database()
    if db is None:
        return ()
    rows = db.execute(
        "SELECT d.id, d.name, d.version FROM top_level_module_names t "
        "JOIN distributions d ON d.id = t.distribution_id WHERE t.name = ?",
        (top,),
    ).fetchall()
    out = []
    for dist_id, name, version in rows:
        modules = {
            m
            for (m,) in db.execute(
                "SELECT name FROM top_level_module_names WHERE distribution_id = ?", (dist_id,)
            )
            if not m.startswith("_") and m != "tests"
        }
        out.append(_Published(str(name), _version_key(str(version or "")), modules == {top}))
    return tuple(out)


def _published(name: str) -> str | None:
    """The distribution's published name, if the database has it."""
    db = _database()
    if db is None:
        return None
    row = db.execute(
        "SELECT name FROM distributions WHERE name = ? COLLATE NOCASE", (name,)
    ).fetchone()
    return str(row[0]) if row else None


def _version_key(text: str) -> tuple[int, ...]:
    """A version's release numbers (`2.2.15` → (2, 2, 15)); anything else sorts lowest.
    Date-like parts (rolling builds: `5.0.0.20221015`) are cut off."""
    numbers = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    if not numbers:
        return ()
    return tuple(int(p) for p in numbers[1].split(".") if len(p) < 6)


def _related(top: str, dist: str) -> bool:
    """A distribution named after the import: `kafka-python`, `python-docx`, `attrs`,
    `SpeechRecognition` for `speech_recognition`."""
    name, want = canonical(dist), canonical(top)
    tokens = name.split("-")
    squashed, wanted = name.replace("-", ""), want.replace("-", "")
    return squashed.startswith(wanted) or want in tokens or name in (f"py{want}", f"python-{want}")


def _likeliest(top: str, providers: tuple[_Published, ...]) -> tuple[_Published | None, bool]:
    """The distribution to propose, and whether the data vouches for it.

    The one named exactly after the import (`numpy`), vouched unless a distribution named
    after it is a major version further along (`kafka` 1.3 and `kafka-python` 2.2: a
    question). None is named exactly after it: the most developed distribution named after
    it (`python-docx`), a guess. None named after it at all: the only one that installs
    nothing else, a guess."""
    related = [p for p in providers if _related(top, p.name)]
    exact = next((p for p in related if canonical(p.name) == canonical(top)), None)
    if exact is not None:
        ahead = [p for p in related if p.version[:1] > exact.version[:1]]
        return exact, not ahead
    if related:
        return max(related, key=lambda p: (p.version, -len(p.name))), False
    dedicated = [p for p in providers if p.dedicated]
    return (dedicated[0] if len(dedicated) == 1 else None), False


def provider_for(module: str, *, installed: bool = True) -> Provider | None:
    """What provides `import module` (None: the standard library, or not a module name).
    `installed=False` leaves out what this machine has installed (for a measure of the
    published data alone)."""
    parts = module.split(".")
    if not module or not all(p.isidentifier() for p in parts):
        return None
    top = parts[0]
    if top in sys.stdlib_module_names:
        return None
    here = _installed().get(top, []) if installed else []
    if len(here) == 1:
        return Provider(here[0], True, "installed here")
    if (depth := NAMESPACES.get(top)) and len(parts) > 1:
        for n in range(min(depth, len(parts)), 1, -1):
            if published := _published("-".join(parts[:n])):
                return Provider(published, True, f"the {top} namespace package")
    providers = _providers(top)
    curated = _curated().get(top)
    popular = _popular(parts, providers, curated)
    # what a question lists: the most downloaded first, then those named after the import,
    # the most developed first
    counts = _downloads()
    ranked = sorted(
        providers,
        key=lambda p: (
            -counts.get(canonical(p.name), 0),
            not _related(top, p.name),
            [-n for n in p.version],
            p.name.lower(),
        ),
    )
    names = tuple(dict.fromkeys(p.name for p in ranked))
    if popular is not None:
        found, own = popular
        why = (
            "the most downloaded package that provides it"
            if own
            else "the most downloaded of the packages that provide it"
        )
        return Provider(found.name, own, why, _without(names, found.name))
    if curated is not None:
        ours = next((p for p in providers if canonical(p.name) == canonical(curated)), None)
        exact = next((p for p in providers if canonical(p.name) == canonical(top)), None)
        if ours is not None and exact is not None and exact.version[:1] > ours.version[:1]:
            ours = exact  # a stale entry: the project now publishes under the import's name
        if ours is not None or not providers:
            chosen = ours.name if ours is not None else curated
            return Provider(chosen, True, "pipreqs' mapping", _without(names, chosen))
    if len(names) == 1:
        return Provider(names[0], True, "the only published package that provides it")
    likeliest, vouched = _likeliest(top, providers)
    if likeliest is not None:
        why = (
            "the package named after it"
            if vouched
            else f"one of {len(names)} packages that provide it"
        )
        return Provider(likeliest.name, vouched, why, _without(names, likeliest.name))
    guess = top.replace("_", "-")
    why = (
        f"{len(names)} packages provide it, none named after it"
        if names
        else "no known package provides it"
    )
    return Provider(guess, False, why, names[:8])


VARIANT_RATIO = 10
"""How many times more a variant (`<name>-…`) of the distribution named after an import may
be downloaded and still be taken for a build of the same project (`psycopg2-binary`: 5×)
rather than the project people mean under a longer name (`discord.py` over `discord`: 18×,
`kafka-python`: 53×, `websocket-client`: 779×)."""
UNDECLARED = {"mpl_toolkits": "matplotlib", "pkg_resources": "setuptools", "gi": "PyGObject"}
"""Import names whose distribution's wheels do not declare them (or that publish none), so
no database of wheels lists them: the distribution that installs them."""


def _popular(
    parts: list[str], providers: tuple[_Published, ...], curated: str | None
) -> tuple[_Published, bool] | None:
    """The provider people install, by downloads, and whether more than downloads says it
    is the import's own (then it installs unasked). None: none of the providers is among
    the most downloaded.

    The candidates: the providers among the most-downloaded distributions, with the
    distribution named after the import, the mapping's and UNDECLARED's; where none of
    the providers is among them, also the names projects give their distribution of `x`
    (`python-x`, `pyx`, `x-python`). For a dotted import (`mysql.connector`), those whose
    name holds its second part, where any does (for a namespace package: only those)."""
    top = parts[0]
    counts = _downloads()
    listed = {canonical(p.name): p for p in providers if canonical(p.name) in counts}
    claimed = [top, curated, UNDECLARED.get(top)]
    if not listed:
        stem = canonical(top)
        claimed += [f"python-{stem}", f"py{stem}", f"{stem}-python"]
    for name in claimed:
        if name and canonical(name) in counts and canonical(name) not in listed:
            listed[canonical(name)] = _Published(_listed_name(name), (), dedicated=False)
    if len(parts) > 1:
        second = canonical(parts[1])
        named = {k: p for k, p in listed.items() if second in k.split("-")}
        if named:
            best = max(named.values(), key=lambda p: counts[canonical(p.name)])
            return best, _related(".".join(parts[:2]), best.name) or len(named) == 1
        if top in NAMESPACES:
            return None  # `google.x`: the providers of `google` are not those of `google.x`
    if not listed:
        return None
    best = max(listed.values(), key=lambda p: counts[canonical(p.name)])
    for name in (top, curated):
        # A variant of the distribution named after the import, or of the mapping's
        # (`psycopg2-binary`, `mlflow-skinny`), downloaded more as others' dependency,
        # does not displace the project's own distribution; a project far more downloaded
        # under a longer name does (`websocket-client` over `websocket`, `kafka-python`).
        found = listed.get(canonical(name)) if name else None
        if (
            found is not None
            and canonical(best.name).startswith(canonical(found.name) + "-")
            and counts[canonical(best.name)] <= VARIANT_RATIO * counts[canonical(found.name)]
        ):
            return found, True
    mapped = {canonical(n) for n in (top, curated, UNDECLARED.get(top)) if n}
    own = (
        canonical(best.name) in mapped
        or _related(top, best.name)
        or best.dedicated
        or len(listed) == 1
    )
    return best, own


def _listed_name(name: str) -> str:
    return _download_list().get(canonical(name), (name, 0))[0]


def _without(names: tuple[str, ...], chosen: str) -> tuple[str, ...]:
    return tuple(n for n in names if canonical(n) != canonical(chosen))[:8]
