"""The `study` command: every step of the pipeline, runnable by hand with the same
arguments that the Snakemake rules pass."""

# One module per rule file of workflow/rules (data, train, features, evaluate, robustness,
# tables, figures, zoo, bench) holds the subcommands its rules run, and plan and report those
# no rule runs by that name; each module's PARSERS add its subcommands, every parser beside the
# function it calls. Parsing what is given and saying what was done is all they do: what the
# commands compute lives in the library.

from __future__ import annotations

import _thread
import argparse
import os
import signal
import sys
import threading
from types import FrameType
from typing import NoReturn

from study.cli import (
    bench,
    data,
    evaluate,
    features,
    figures,
    plan,
    rename,
    report,
    robustness,
    tables,
    train,
    versions,
    zoo,
)

# In the order of the workflow, which is the order `study --help` lists them in.
MODULES = (plan, data, train, features, evaluate, robustness, tables, report, figures, zoo, bench, rename, versions)


class _Parser(argparse.ArgumentParser):
    """A bad argument gives one line (which argument, what it got, where the valid ones are),
    not the usage block: the last line of a job's log says what went wrong."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the arguments)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="study", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in MODULES:
        for add in module.PARSERS:
            add(sub)
    return parser


class _Interrupts:
    """SIGINT's handler while a command runs: it raises KeyboardInterrupt, as Python's own does,
    but never inside an import, and remembers that it did.

    Libraries do not survive an exception raised while they import: torch's C code clears any
    error raised while it imports numpy, which leaves a half-imported module whose next use fails
    with an unrelated error (`module 'numpy' has no attribute 'subtract'`), and an exception that
    crosses its pybind11 calls aborts the process. So an interrupt that finds an import under way
    is delivered again a moment later, until it finds none; an error after an interrupt (one that a
    library swallowed all the same), or a normal end after it, is then the interrupt it was."""

    RETRY_S = 0.05

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if _importing(frame):
            # (another thread asks the main one again: the handler runs there, between bytecodes)
            retry = threading.Timer(self.RETRY_S, _thread.interrupt_main)
            retry.daemon = True
            retry.start()
            return
        raise KeyboardInterrupt


def _importing(frame: FrameType | None) -> bool:
    """Whether the main thread, stopped at `frame`, is inside an import statement's machinery."""
    while frame is not None:
        if frame.f_globals.get("__name__") in ("importlib._bootstrap", "importlib._bootstrap_external"):
            return True
        frame = frame.f_back
    return False


def main(argv: list[str] | None = None) -> int:
    """The `study` command on `argv`; without one, the process's own arguments, and then this is the
    process's command: once its work is done, Ctrl-C has nothing left to stop and is ignored, so that
    it cannot put a KeyboardInterrupt into the interpreter's shutdown. (The console script's name
    stays `study.cli:main`, so that an environment installed at any commit runs any other.)"""
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    command = "study"
    try:
        # (parsing already imports the config's types: an interrupt there is one line too)
        args = build_parser().parse_args(argv)
        command = f"study {args.command}"
        status: int = args.func(args)
        if interrupts.seen:  # a library swallowed it, and the command went on to its end
            raise KeyboardInterrupt
        return status
    except (KeyboardInterrupt, Exception) as err:
        # Ctrl-C: the shell's status for SIGINT, no traceback; an error after one is its consequence
        if isinstance(err, KeyboardInterrupt) or interrupts.seen:
            print(f"{command}: interrupted", file=sys.stderr)
            return 130
        # Known failure modes (bad config, missing file, diverged run) get one clear line.
        # One line, whatever the message holds, so that a log's last line is the whole story.
        if not isinstance(err, (ValueError, OSError, RuntimeError)) or os.environ.get("STUDY_TRACEBACK"):
            raise
        message = " ".join(str(err).split())
        print(f"{command}: error: {message} (STUDY_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGINT, previous if argv is not None else signal.SIG_IGN)

