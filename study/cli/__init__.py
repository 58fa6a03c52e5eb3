"""The `study` command: every step of the pipeline, runnable by hand with the same
arguments that the Snakemake rules pass."""

# One module per rule file of workflow/rules (data, train, features, evaluate, robustness,
# tables, figures, zoo, bench) holds the subcommands its rules run, and plan and report those
# no rule runs by that name; each module's PARSERS add its subcommands, every parser beside the
# function it calls. Parsing what is given and saying what was done is all they do: what the
# commands compute lives in the library.

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from study.cli import bench, data, evaluate, features, figures, plan, rename, report, robustness, tables, train, zoo

# In the order of the workflow, which is the order `study --help` lists them in.
MODULES = (plan, data, train, features, evaluate, robustness, tables, report, figures, zoo, bench, rename)


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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, RuntimeError) as err:
        # Known failure modes (bad config, missing file, diverged run) get one clear line.
        # One line, whatever the message holds, so that a log's last line is the whole story.
        if os.environ.get("STUDY_TRACEBACK"):
            raise
        message = " ".join(str(err).split())
        print(f"study {args.command}: error: {message} (STUDY_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the shell's status for SIGINT, no traceback
        print(f"study {args.command}: interrupted", file=sys.stderr)
        return 130
