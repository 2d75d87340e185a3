"""The folder's trust and settings: the user's decision (kept or for this session), its
revocation, agents' leave to run, and the client's settings read again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from executor.trust import Choice, resolved
from lsp_server.editor import Editor
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.session import Session


class TrustDecisions:
    """How a folder's code may run, as decided (`Flow.decide`, `Flow.revoke`, …)."""

    def __init__(self, session: Session, editor: Editor, gate: Gate, desk: Desk) -> None:
        self.session, self.editor, self.gate, self.desk = session, editor, gate, desk

    def decide(self, folder: Path, choice: Choice, keep: bool = True) -> None:
        """The user decided how the folder's code runs (`keep`: beyond this session)."""
        self.gate.decided(folder, choice, keep=keep)

    async def revoke(self, folder: Path) -> Choice | None:
        """Forget the folder's trust decision (its kernel stops); the decision left."""
        await self.session.revoke(folder)
        return self.session.choice(folder)

    def trust_workspace(self, folders: Sequence[Path]) -> None:
        """The client decided these folders are trusted (VS Code's Workspace Trust)."""
        self.session.decided = Choice.TRUST
        self.session.decided_for = tuple(resolved(f) for f in folders)

    async def agent_may_run(self, folder: Path, agent: str) -> str | None:
        """Whether `agent` may run code in the folder's kernel (asked at the editor); None:
        it may, else why not."""
        settings, choice = await self.session.decided_settings(folder)
        return await self.gate.agent_may_run(folder, settings, choice, agent)

    async def settings_changed(
        self, uris: Sequence[str], where: Callable[[str], Awaitable[Where]]
    ) -> None:
        """The client's settings changed: read again; a folder's kernel whose settings now
        say another interpreter is replaced; the documents show their results as the
        settings now say (each document's context made again by `where`)."""
        self.session.forget_settings()
        for uri in uris:
            folder = self.editor.folder_for(uri)
            if self.session.kernels.find(folder) is not None:
                settings = await self.session.settings(folder)  # as the client says them now
                await self.session.kernel_for(folder, settings)  # replaced if they changed
        for uri in uris:
            self.desk.show((await where(uri)).uri)  # (its results as they now say)
