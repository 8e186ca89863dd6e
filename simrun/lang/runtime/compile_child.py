"""LLVM's optimiser and code emission in a forked child process, so that LLVM cannot abort
simrun's own process.

llvmlite 0.50's LLVM has its assertions on, and its loop vectoriser aborts on some loops of
constant trip count ("VPlan cost model and legacy cost model disagreed": a serial loop over
a field of 36 particles on Zen 4, 18 on AVX-512 Intel). One child is forked at the first
compile and serves every later one over a pipe (a fork per compile would cost ~7 ms each,
too much for a test suite of thousands of kernels). A child that dies mid-compile is
replaced, and the module is compiled again without loop vectorisation, with a note: LLVM
vectorises without reassociating floating-point arithmetic, so the results are the same.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import struct
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable

from ..errors import InternalCompilerError

Compile = Callable[..., bytes]  # (module_text, kernel, slp, cpu, print_llvm, loop_vectorize)

_lock = threading.Lock()  # one request at a time; no LLVM call of another thread mid-way
_child: dict = {}         # pid, owner (the process that forked it), pipes, stderr file


def compile_in_child(compile_: Compile, module_text: str, kernel: str, slp: bool,
                     cpu: str | None, print_llvm: bool) -> bytes:
    """``compile_(...)``'s object code, made in the child; on a crash, made again without
    loop vectorisation; an InternalCompilerError when LLVM crashes on that too."""
    args = (module_text, kernel, slp, cpu, print_llvm)
    with _lock:
        obj, said = _request(compile_, (*args, True))
        if obj is not None:
            return obj
        print(f"note: LLVM crashed optimising kernel '{kernel}' (an assertion in its loop "
              f"vectoriser); it is compiled again without loop vectorisation, which gives "
              f"the same results", file=sys.stderr)
        obj, said_again = _request(compile_, (*args, False))
        if obj is not None:
            return obj
    raise InternalCompilerError(
        f"LLVM crashed compiling kernel '{kernel}', also without loop vectorisation (a bug "
        f"in LLVM or in simrun's code generator; SIMRUN_PRINT_IR=1 prints the kernel's IR "
        f"for a report). What LLVM printed:\n{said_again or said}")


def _request(compile_: Compile, args: tuple) -> tuple[bytes | None, str]:
    """(object code, "") from the child, or (None, the end of what it printed) if it died."""
    child = _child if _child.get("owner") == os.getpid() and _child.get("compile") is compile_ \
        else _start(compile_)
    try:
        _send(child["to"], pickle.dumps(args))
        reply = _receive(child["from"])
    except (BrokenPipeError, EOFError):
        return None, _bury(child)
    except BaseException:  # Ctrl-C mid-compile: its reply must not answer a later request
        _forget()
        raise
    if reply[:1] == b"E":
        raise InternalCompilerError(reply[1:].decode())
    return reply[1:], ""


def _start(compile_: Compile) -> dict:
    _forget()
    requests, replies = os.pipe(), os.pipe()
    said = tempfile.TemporaryFile()
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():  # Python 3.12+ warns of forking with threads: the
        warnings.simplefilter("ignore", DeprecationWarning)  # child only calls LLVM
        pid = os.fork()
    if pid == 0:
        try:
            os.close(requests[1])
            os.close(replies[0])
            os.dup2(said.fileno(), 2)
            _serve(compile_, requests[0], replies[1])
        finally:
            os._exit(0)
    os.close(requests[0])
    os.close(replies[1])
    _child.update(pid=pid, owner=os.getpid(), compile=compile_, to=requests[1],
                  said=said, **{"from": replies[0]})
    return _child


def _serve(compile_: Compile, requests: int, replies: int) -> None:
    """The child: compile each request until the parent closes its end (it exited)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.disable()  # an abort here is expected and handled: no Python trace
    while True:
        try:
            args = pickle.loads(_receive(requests))
        except EOFError:
            return
        try:
            reply = b"O" + compile_(*args)
        except Exception as err:  # noqa: BLE001 - raised again in the parent
            reply = b"E" + str(err).encode()
        sys.stdout.flush()
        _send(replies, reply)


def _bury(child: dict) -> str:
    """Reap a dead child; the last lines it printed (LLVM's assertion)."""
    _, status = os.waitpid(child["pid"], 0)
    said = child["said"]
    said.seek(0)
    lines = said.read().decode(errors="replace").strip().splitlines()
    _forget()
    return "\n".join(lines[-6:]) or f"(exit status {os.waitstatus_to_exitcode(status)})"


def _forget() -> None:
    """Close this process's ends of a child's pipes (those a fork inherited too: the child
    then sees its owner's end close only when its owner exits)."""
    if _child:
        for end in ("to", "from"):
            os.close(_child[end])
        _child["said"].close()
    _child.clear()


def _send(fd: int, data: bytes) -> None:
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _receive(fd: int) -> bytes:
    size = struct.unpack("<Q", _read(fd, 8))[0]
    return _read(fd, size)


def _read(fd: int, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            raise EOFError
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
