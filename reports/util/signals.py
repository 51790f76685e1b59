"""Signals that end a command: SIGINT (Ctrl-C), SIGTERM and SIGHUP all become `Interrupted`
(a KeyboardInterrupt that knows its signal), so every `finally` and `except
KeyboardInterrupt` runs the same way whichever ended the command, and the exit code is
128 + the signal's number (130, 143, 129), as a shell reports a process a signal ended.

    with handled():            # the CLI, around one command
        ...                    # raises Interrupted(signum) on SIGTERM/SIGHUP, and on SIGINT
    held()                     # a context in which those signals wait (writing results)
"""
from __future__ import annotations

import contextlib
import signal
from typing import Any, Iterator

NAMES = ("SIGINT", "SIGTERM", "SIGHUP")
SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in NAMES) if s is not None)


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def of(e: KeyboardInterrupt) -> Interrupted:
    """A plain KeyboardInterrupt is SIGINT's."""
    return e if isinstance(e, Interrupted) else Interrupted(signal.SIGINT)


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Install the handlers for the duration (main thread only), then restore the old ones."""
    try:
        old = {s: signal.signal(s, _raise) for s in SIGNALS}
    except ValueError:          # not the main thread: leave signals alone
        old = {}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP are delivered after the block, not during it."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
