"""What bizmsg does differently inside a Jupyter (IPython) kernel: two of its log records are
held back there, by a filter on the ``bizmsg`` logger.

- **The blocked-loop warning.** The Rust client logs a WARNING the first time a sync call is
  made while an asyncio loop runs on the thread (``warn_if_in_event_loop`` in
  ``src/python/client.rs``): in an ``async def`` that loop really is blocked. A notebook's
  cells run inside the kernel's own loop, but the kernel does nothing else while a cell runs,
  so a sync call a cell makes blocks nothing that matters, and the sync ``Client`` the docs use
  in notebooks would warn on every first call. The record is dropped when the call comes from
  the task running the cell; a sync call from a task of your own on the kernel's loop (a
  background task) still warns.
- **A campaign's warnings** (a messaging tier passed, a sender rated RED: ``campaign: ...``)
  are shown by a ``BulkResult`` displayed in the notebook. While a cell runs they are held;
  when it ends, those a displayed result showed are dropped and the others are logged then, so
  each is seen once.

Installed when a client is made in a process where IPython is loaded (``_client.py``); it
imports nothing that IPython has not loaded already.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

    from ._campaign import CampaignWarning

__all__ = ["attach", "shown", "sync_call_blocks_loop"]

#: The start of the Rust client's blocked-loop warning (``warn_if_in_event_loop``).
LOOP_WARNING = "a synchronous bizmsg call was made while an asyncio event loop is running"
#: The start of a campaign's warnings (``campaign/engine/mod.rs``).
CAMPAIGN_WARNING = "campaign: "

_state: _Cells | None = None


def attach() -> None:
    """Installs the filter and the cell hooks once, if this process runs an IPython kernel
    (a terminal IPython runs no loop while a cell runs, and shows no HTML)."""
    global _state
    if _state is not None or "IPython" not in sys.modules:
        return
    shell = _kernel_shell()
    if shell is None:
        return
    import logging  # loaded already: IPython uses it

    _state = _Cells()
    shell.events.register("pre_run_cell", _state.pre_run_cell)
    shell.events.register("post_run_cell", _state.post_run_cell)
    logging.getLogger("bizmsg").addFilter(_state.keep)


def _kernel_shell() -> Any:
    try:
        from IPython import get_ipython  # type: ignore[attr-defined, unused-ignore]
    except ImportError:  # pragma: no cover - IPython half loaded
        return None
    shell = get_ipython()
    # A kernel's shell has its kernel (ipykernel's ZMQInteractiveShell); a terminal's has not.
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def sync_call_blocks_loop() -> bool:
    """Whether a sync call made now, while an asyncio loop runs on this thread, blocks work
    that loop has to do: not when it comes from the cell a kernel is running (the kernel's loop
    waits for the cell anyway), yes from any other task.

    Asked by the Rust client's ``warn_if_in_event_loop`` before it warns, and before it counts
    its one warning per client, so that a cell's own calls do not spend it."""
    state = _state
    return state is None or not state.running or _current_task() is not state.task


def shown(warnings: list[CampaignWarning]) -> None:
    """A ``BulkResult`` showed these warnings in the notebook (its HTML display)."""
    if _state is not None:
        _state.shown.update(CAMPAIGN_WARNING + warning.message for warning in warnings)


class _Cells:
    """The cell running now (its task on the kernel's loop), and the campaign warnings held
    until it ends."""

    def __init__(self) -> None:
        self.running = False
        self.task: object = None
        self.held: list[logging.LogRecord] = []
        self.shown: set[str] = set()
        self.releasing = False

    def pre_run_cell(self, *args: object) -> None:
        self.running = True
        self.task = _current_task()
        self.held.clear()
        self.shown.clear()

    def post_run_cell(self, *args: object) -> None:
        self.running = False
        held, self.held = self.held, []
        if held:
            import logging

            logger = logging.getLogger("bizmsg")
            self.releasing = True
            try:
                for record in held:
                    if record.getMessage() not in self.shown:
                        logger.handle(record)
            finally:
                self.releasing = False
        self.shown.clear()

    def keep(self, record: logging.LogRecord) -> bool:
        """The filter: whether ``record`` goes to the handlers now."""
        if self.releasing or not self.running:
            return True
        try:
            text = record.getMessage()
        except Exception:  # pragma: no cover - not ours to judge
            return True
        if text.startswith(LOOP_WARNING):
            # Made by the cell itself, the call blocked a loop that had nothing else to do.
            return sync_call_blocks_loop()
        if text.startswith(CAMPAIGN_WARNING):
            self.held.append(record)
            return False
        return True


def _current_task() -> object:
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.current_task()
    except RuntimeError:  # no loop runs on this thread
        return None
