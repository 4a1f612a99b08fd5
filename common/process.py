"""Running one command: logging set up, SIGTERM as Ctrl-C, and the exit codes (0 done,
1 internal error, 2 bad input, 3 a violated privacy model, 128 + N a signal, 141 a reader that
closed our standard output).  Light on purpose: the daemons' entry points use it too.  It
sits below the CLI (it was fedanon.cli.runner), so no library module or daemon imports
fedanon.cli."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from fedanon.errors import FedanonError, Terminated

log = logging.getLogger("fedanon")

# The exit codes of every command (the daemons' too)
EXIT_OK = 0
EXIT_INTERNAL = 1  # a bug: the traceback is logged
EXIT_INPUT = 2  # bad input or usage (fedanon.errors.FedanonError; argparse's own)
EXIT_VIOLATED = 3  # fedanon audit: the privacy model does not hold on the table


def run_command(handler: Callable[[argparse.Namespace], Any], args: argparse.Namespace) -> int:
    """Configure logging (the only place, with the daemons' entry points), run ``handler``
    and turn what it raises into an exit code and one line on stderr."""
    quiet = getattr(args, "quiet", False) is True  # --quiet: warnings and errors only
    verbose = getattr(args, "verbose", False) is True
    logging.basicConfig(
        level=logging.WARNING if quiet and not verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if verbose:  # fedanon's own debug lines, not every library's (matplotlib's fonts: 2,000)
        log.setLevel(logging.DEBUG)
    on_main = threading.current_thread() is threading.main_thread()
    global _caught
    _caught = None
    # SIGTERM cleans up (daemons, temporary keys, partial files) exactly as Ctrl-C does
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main else None
    # Ctrl-C as Python's own handler does, remembered too (not when SIGINT is ignored: nohup)
    interrupting = on_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if interrupting:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        code = int(handler(args))
        raise_if_signalled()  # a signal whose exception Python swallowed: not a success
        sys.stdout.flush()  # a reader that went away (`| head`) shows here, not at exit
        return code
    except BrokenPipeError:
        if not _stdout_reader_gone():  # another pipe (a daemon's, a socket): ours to report
            log.exception("internal error")
            return 1
        return _reader_gone()
    except FedanonError as exc:
        print(f"fedanon: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated as exc:
        print(f"fedanon: terminated by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("fedanon: interrupted", file=sys.stderr)
        return 130
    except MemoryError as exc:  # the machine's limit, not a bug: say what to lower
        print(f"fedanon: error: {out_of_memory_message(exc, args)}", file=sys.stderr)
        return EXIT_INPUT
    except Exception:
        log.exception("internal error")
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if interrupting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _caught = None  # answered by this command's exit code: nothing later re-raises it


def out_of_memory_message(exc: MemoryError, args: argparse.Namespace) -> str:
    """One bounded line for an allocation that failed: what ran out (numpy names the array's
    size and shape) and what to lower; the DP bounds when the command has them."""
    what = " ".join(str(exc).split())[:200] or "an allocation failed"
    lower = "a smaller input or spec, or run with more memory"
    if hasattr(args, "max_table_rows"):
        lower = (
            "a smaller input or spec (a DP spec: a smaller h, privacy.specializations, or "
            "--max-table-rows below the rows this machine holds, ~300 bytes a row), or run "
            "with more memory"
        )
    return f"out of memory ({what}): nothing written; expected {lower}"


# The signal (SIGTERM, SIGINT) received during the running command, if any.  Python runs a
# signal handler between two bytecodes of the main thread, also inside a weakref callback or
# a __del__ (e.g. when Arrow drops an input block); there the exception it raises is printed
# as "Exception ignored in ..." and lost, and the command went on and published its outputs
# with exit 0.  Remembered here, it is raised again before anything is published
# (:func:`raise_if_signalled`, called by fedanon.io.fsutil) and when the command returns.
_caught: int | None = None


def _terminate(signum: int, _frame: FrameType | None) -> None:
    global _caught
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    _caught = signum
    raise Terminated(signum)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    global _caught
    _caught = signum
    raise KeyboardInterrupt


def raise_if_signalled() -> None:
    """Raise again the exception of a termination signal or Ctrl-C received during the
    command, in case Python swallowed it (see ``_caught``): nothing may be published after
    one.  A no-op outside :func:`run_command` and when no signal came."""
    if _caught is None:
        return
    if _caught == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(_caught)


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll reports an error
    on the write end of a pipe without readers)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _reader_gone() -> int:
    """The reader of our standard output closed it (``fedanon audit ... | head``): not an
    error of ours, nothing to log.  Further output goes to /dev/null (so the interpreter's
    final flush is quiet too); exit 141 = 128 + SIGPIPE, what a shell reports for ``yes | head``
    (the command's own exit code is lost with the rest of its output)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind sys.stdout
        pass
    return 128 + signal.SIGPIPE


def exit_process(code: int) -> None:
    """End the CLI process now, without the interpreter's teardown: standard output and
    error flushed, logging shut down, then ``os._exit``.  The teardown destroys Arrow's and
    gRPC's C++ globals while their threads may still run -- after a refused corrupt gzip an
    Arrow reader thread made it abort ("terminate called without an active exception", exit
    134 instead of 2) -- and costs 0.2-0.5 s.  Every command has written and closed its
    outputs and removed its temporary files before it returns.  Only from the main thread of
    a CLI process (elsewhere, e.g. a test calling :func:`fedanon.cli.main.main`, it returns:
    those callers use ``main`` itself, never this)."""
    if threading.current_thread() is not threading.main_thread():
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # a reader gone: nothing to say
            stream.flush()
    os._exit(code)
