"""What the services share, whoever the editor is: results, kernels, settings, models, locks.

One `Session` per server (or per `runfix run`). Settings come from a reader the
front end gives (the LSP server asks the client too; the CLI reads the
project file only) and are kept per folder until `forget_settings()`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from executor.jupyter import JupyterKernel
from executor.pool import KernelPool
from lsp_server.executors import kernel_config
from lsp_server.model import ModelClient, ModelConfig
from lsp_server.record import FILE as RECORD_FILE
from lsp_server.record import FLUSH_AFTER, RecordedRun, RunRecord
from lsp_server.results import ResultStore
from lsp_server.settings import Settings

SettingsReader = Callable[[Path], Awaitable[Settings]]
KernelWatcher = Callable[[Path, JupyterKernel], None]


class Session:
    def __init__(
        self,
        read_settings: SettingsReader,
        on_kernel_state: KernelWatcher,
        kernels: KernelPool | None = None,
    ) -> None:
        self.store = ResultStore()
        self.kernels = kernels or KernelPool()
        """The folders' kernels (one may have been started before the server was built)."""
        self.confirmed: set[str] = set()
        """Digests of flagged model-written code the user said to run."""
        self._read_settings = read_settings
        self._on_kernel_state = on_kernel_state
        self._settings: dict[Path, Settings] = {}
        self._locks: dict[Path, asyncio.Lock] = {}
        self._models: dict[ModelConfig, ModelClient] = {}
        self._records: dict[Path, RunRecord] = {}
        self._flush: asyncio.TimerHandle | None = None

    async def settings(self, folder: Path) -> Settings:
        if (cached := self._settings.get(folder)) is None:
            cached = self._settings[folder] = await self._read_settings(folder)
        return cached

    def cached_settings(self, folder: Path) -> Settings:
        """The folder's settings if known, without asking anyone (for fast handlers)."""
        return self._settings.get(folder) or Settings()

    def forget_settings(self) -> None:
        self._settings.clear()

    async def kernel_for(self, folder: Path) -> JupyterKernel:
        """The folder's kernel (made, or replaced when its settings changed; not started)."""
        settings = await self.settings(folder)
        kernel = self.kernels.get(
            folder,
            kernel_config(folder, settings),
            grace=settings.interrupt_grace,
            startup_timeout=settings.kernel_start_timeout,
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
        """Add a run to the folder's record (its ticket; None: not recorded), written
        `FLUSH_AFTER` later, once the run's answer has gone out."""
        run_id = self.record(folder, settings).add(run)
        if run_id is not None and self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(FLUSH_AFTER, self.flush_records)
        return run_id

    def flush_records(self) -> None:
        self._flush = None
        for record in self._records.values():
            record.flush()

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
