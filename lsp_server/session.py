"""What the services share, whoever the editor is: results, kernels, settings, models, locks.

One `Session` per server (or per `runfix run`). Settings come from a reader the
front end gives (the LSP server asks the client too; the CLI reads the
project file only) and are kept per folder until `forget_settings()`.

Trust (`executor.trust`): a folder whose code would run on this machine (the
local kernel) gets no kernel until the user decided how it runs; the decision
changes its settings (the sandbox forces the Docker executor, runfix's own
Python replaces the folder's interpreter). A front end may decide for the whole
session: `runfix run` in a terminal is the user's own act, and VS Code's
Workspace Trust is the decision there.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

from executor import kernelspecs
from executor.base import ExecutorUnavailable
from executor.guard import Allowances
from executor.interpreter import find_interpreter
from executor.jupyter import Kernel
from executor.kinds import DOCKER, KINDS, LOCAL
from executor.pool import KernelPool
from executor.trust import Choice, TrustFileError, TrustStore, resolved
from lsp_server.executors import kernel_config
from lsp_server.model.client import ModelClient, ModelConfig
from lsp_server.outputs.store import ResultStore
from lsp_server.record.store import BUSY_RETRY, RecordedRun, RunRecord
from lsp_server.record.store import FILE as RECORD_FILE
from lsp_server.settings import Settings
from lsp_server.text.languages import PYTHON, Language

SettingsReader = Callable[[Path], Awaitable[Settings]]
KernelWatcher = Callable[[Path, Kernel], None]


class NotTrusted(ExecutorUnavailable):
    """The folder's code would run on this machine and its user has not decided how."""

    def __init__(self, folder: Path, python: str) -> None:
        super().__init__(
            f"runfix did not run anything: {folder} is not trusted, and running it would start "
            f"{python}, which comes with the folder. Trust the folder, run it in the sandbox, "
            "or use runfix's own Python (`runfix trust`)."
        )
        self.folder = folder
        self.python = python


def needs_trust(settings: Settings) -> bool:
    """Whether these settings run the folder's code on this machine (the local kernel): the
    sandbox and a remote server run nothing of the folder's here until a run sends code."""
    return KINDS[settings.executor].asks_trust


def may_start(settings: Settings, choice: Choice | None) -> bool:
    """Whether a kernel may start with these settings, the folder's decision being `choice`."""
    return not needs_trust(settings) or choice is not None


def with_choice(settings: Settings, choice: Choice | None) -> Settings:
    """The settings a decision makes: the sandbox, or runfix's own interpreter."""
    if choice == Choice.SANDBOX:
        return replace(settings, executor=DOCKER.name)
    if choice == Choice.OWN:
        return replace(settings, executor=LOCAL.name, python=sys.executable)
    return settings


class Session:
    """What the services share for one server (or one `runfix run`): results, kernels,
    settings, trust, run records, model clients and run locks."""

    def __init__(
        self,
        read_settings: SettingsReader,
        on_kernel_state: KernelWatcher,
        kernels: KernelPool | None = None,
        *,
        trust: TrustStore | None = None,
        decided: Choice | None = None,
    ) -> None:
        self.store = ResultStore()
        self.kernels = kernels or KernelPool()
        """The folders' kernels (one may have been started before the server was built)."""
        self.trust = trust or TrustStore()
        self.decided = decided
        """A decision for this session only, for every folder (`runfix run`: the user's own
        act) or those of `decided_for` (VS Code's Workspace Trust)."""
        self.decided_for: tuple[Path, ...] | None = None
        """The folders `decided` covers, resolved, with those inside them (None: every one).
        VS Code trusts the workspace it was sent for: a folder added later, or a file
        outside every folder, is still asked about."""
        self._resolved: dict[Path, Path] = {}
        self.decided_here: dict[Path, Choice | None] = {}
        """Decisions for this session only, per folder (None: revoked this session)."""
        self.confirmed: dict[str, tuple[str, ...]] = {}
        """Digests of flagged model-written code the user said to run, each with what its
        yes lets the runtime guard allow that code (the scan's findings: `Gate.confirm_run`)."""
        self.allowances = Allowances(self.trust.path.parent / "guard.json")
        """What the runtime guard lets model-written code do for good, per folder (the user's
        "Allow always"; kept beside the trust decisions)."""
        self._read_settings = read_settings
        self._on_kernel_state = on_kernel_state
        self._settings: dict[Path, Settings] = {}
        self._locks: dict[Path, asyncio.Lock] = {}
        self._models: dict[ModelConfig, ModelClient] = {}
        self._records: dict[Path, RunRecord] = {}
        self._flush: asyncio.TimerHandle | None = None

    async def settings(self, folder: Path) -> Settings:
        """The folder's settings as its trust decision makes them."""
        return (await self.decided_settings(folder))[0]

    async def decided_settings(self, folder: Path) -> tuple[Settings, Choice | None]:
        """The folder's settings as its trust decision makes them, and that decision (read
        once: a request carries both)."""
        if (cached := self._settings.get(folder)) is None:
            cached = self._settings[folder] = await self._read_settings(folder)
        choice = self.choice(folder)
        return with_choice(cached, choice), choice

    def display_settings(self, folder: Path) -> Settings:
        """The folder's settings as far as they say how results show: a trust decision
        changes none of those, so none is read (a publication never touches the trust
        store: a `stat` and a `realpath` each time)."""
        return self._settings.get(folder) or Settings()

    def cached_settings(self, folder: Path) -> Settings:
        """The folder's settings if known, without asking anyone (for fast handlers)."""
        return with_choice(self._settings.get(folder) or Settings(), self.choice(folder))

    # -- trust ----------------------------------------------------------------------------

    def choice(self, folder: Path) -> Choice | None:
        """How the user decided the folder's code runs (None: undecided)."""
        if folder in self.decided_here:
            return self.decided_here[folder]
        if (kept := self.trust.decision(folder)) is not None:
            return kept[1]
        return self.decided if self._covered(folder) else None

    def _covered(self, folder: Path) -> bool:
        if self.decided_for is None:
            return True
        real = self._resolved.get(folder)
        if real is None:
            real = self._resolved[folder] = resolved(folder)
        return any(real.is_relative_to(f) for f in self.decided_for)

    def may_start(self, folder: Path, settings: Settings) -> bool:
        """Whether a kernel may start for the folder with these settings."""
        return may_start(settings, self.choice(folder))

    def decide(self, folder: Path, choice: Choice, *, keep: bool = True) -> None:
        """Record the user's decision (kept in the state folder, or for this session)."""
        if keep:
            try:
                self.trust.decide(folder, choice)
            except TrustFileError:
                self.decided_here[folder] = choice  # for this session; the caller says why
                raise
            self.decided_here.pop(folder, None)
        else:
            self.decided_here[folder] = choice

    async def revoke(self, folder: Path) -> None:
        """Forget the folder's decision; its kernel stops at once, its state with it."""
        with contextlib.suppress(TrustFileError):  # then nothing was kept to revoke
            self.trust.revoke(folder)
        self.decided_here[folder] = None
        await self.kernels.stop(folder)

    def interpreter_for(self, folder: Path, settings: Settings) -> str:
        """The interpreter a local kernel of the folder would start (nothing is run)."""
        return find_interpreter(folder, settings.python).path

    def forget_settings(self) -> None:
        self._settings.clear()
        kernelspecs.forget()

    async def kernel_for(
        self,
        folder: Path,
        settings: Settings,
        language: Language = PYTHON,
        admitted: bool = False,
    ) -> Kernel:
        """The folder's kernel of `language` with these settings (its own, as `settings` gives
        them: made, or replaced when they changed; not started); `NotTrusted` while the folder
        is undecided and its code would run here (unless the caller `admitted` it: the gate,
        which read the decision), `ExecutorUnavailable` when no kernel runs the language
        here."""
        if not admitted and not self.may_start(folder, settings):
            raise NotTrusted(folder, self.interpreter_for(folder, settings))
        kernel = self.kernels.get(
            folder,
            kernel_config(folder, settings, language),
            grace=settings.interrupt_grace,
            startup_timeout=settings.kernel_start_timeout,
            language=language.id,
        )
        if kernel.on_state is None:
            kernel.on_state = lambda _: self._on_kernel_state(folder, kernel)
            self._on_kernel_state(folder, kernel)
        return kernel

    def run_lock(self, folder: Path) -> asyncio.Lock:
        """Runs of one folder go one at a time, in the order asked."""
        return self._locks.setdefault(folder, asyncio.Lock())

    def record(self, folder: Path, settings: Settings) -> RunRecord:
        """The folder's run record (`history.maxRuns` from its settings)."""
        if (record := self._records.get(folder)) is None:
            record = self._records[folder] = RunRecord(folder, settings.history_max_runs)
        record.max_runs = settings.history_max_runs
        return record

    def existing_record(self, folder: Path, settings: Settings) -> RunRecord | None:
        """The folder's record if it has one (open, or on disk): reading creates nothing."""
        if folder in self._records or (folder / RECORD_FILE).is_file():
            return self.record(folder, settings)
        return None

    def recorded(self, folder: Path, settings: Settings, run: RecordedRun) -> int | None:
        """Add a run to the folder's record (its ticket; None: not recorded), written now,
        before the run is answered: a server killed once a run was answered has lost none
        (SQLite's WAL, `synchronous=NORMAL`: the write goes to the WAL file, no fsync; a
        power loss may take the runs since the last checkpoint). Runs another writer kept
        out are written `BUSY_RETRY` later."""
        return self.recorded_all(folder, settings, [run])[0]

    def recorded_all(
        self, folder: Path, settings: Settings, runs: Sequence[RecordedRun]
    ) -> list[int | None]:
        """`recorded`, for many runs in one commit (a test run's tests); their tickets."""
        record = self.record(folder, settings)
        tickets = [record.add(run) for run in runs]
        if any(t is not None for t in tickets) and not record.flush() and self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(BUSY_RETRY, self.flush_records)
        return tickets

    def amended(
        self, folder: Path, settings: Settings, ticket: int | None, run: RecordedRun
    ) -> None:
        """A recorded run's outputs, again (`RunRecord.amend`): what its kernel published for
        it after it was answered is in them."""
        self.record(folder, settings).amend(ticket, run)

    def flush_records(self) -> None:
        """Write the runs that ended; those another writer kept out wait a moment more."""
        self._flush = None
        waiting = [record for record in self._records.values() if not record.flush()]
        if waiting:
            self._flush = asyncio.get_running_loop().call_later(BUSY_RETRY, self.flush_records)

    def model_for(self, settings: Settings) -> ModelClient:
        """One client per model configuration (it keeps its HTTP connections)."""
        config = ModelConfig.from_settings(settings)
        if (client := self._models.get(config)) is None:
            client = self._models[config] = ModelClient(config)
        return client

    async def close(self) -> None:
        """Stop every kernel and close the model clients."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        records, self._records = list(self._records.values()), {}
        for record in records:
            record.close()
        models, self._models = list(self._models.values()), {}
        await asyncio.gather(*(m.close() for m in models), return_exceptions=True)
        await self.kernels.shutdown()
