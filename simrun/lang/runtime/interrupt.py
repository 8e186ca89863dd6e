"""Ctrl-C and SIGTERM during a long native call.

Python runs a signal's handler only between bytecodes, so a chain call that makes minutes of
steps (a gradient's reverse sweep of a large scene is one call) used to hold Ctrl-C, and a
cluster's SIGTERM, until it returned: Slurm's SIGKILL then came first and left the job's
folder "running". Inside `stopping_native_calls` a thread watches the signals' wakeup fd and
sets the stop word of every chain call in flight (`Chain._run` registers it), which the
native code reads after each repetition: the call returns at the next step boundary and
Python's own handler raises KeyboardInterrupt as the call returns. Only where that handler
raises (the CLI installs it) may a call be cut short this way: a caller that keeps going
after a short call would hold the wrong state.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# the stop word of each chain call in flight, by id; Chain._run adds and removes its own
in_flight: dict[int, np.ndarray] = {}


@contextmanager
def stopping_native_calls(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)
                          ) -> Iterator[None]:
    """Within: one of ``signals`` stops the native calls in flight after their current
    repetition (their handlers must raise, as KeyboardInterrupt's do). Outside the main
    thread, where Python delivers no signal, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    wanted = {int(s) for s in signals}

    def watch() -> None:
        while True:
            try:
                got = os.read(read_end, 64)
            except OSError:
                return
            if not got:  # the write end closed: the context is over
                return
            if wanted.intersection(got):
                for word in list(in_flight.values()):
                    word[()] = 1

    watcher = threading.Thread(target=watch, name="simrun-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_end)
        watcher.join(timeout=5)
        os.close(read_end)
