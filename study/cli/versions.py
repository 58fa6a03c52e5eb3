"""`study record` and `study pull`: DVC's records of what Snakemake made (study.versions), and
the pull that brings a pushed result set back as Snakemake left it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from study.cli.args import SubParsers


def add_record(sub: SubParsers) -> None:
    p = sub.add_parser("record", help="record every finished Snakemake job's files in DVC (versions/*.dvc)")
    p.add_argument("--root", type=Path, default=Path("."), help="the project's root (default: here)")
    p.add_argument("--stage", action="store_true", help="add the records to git's index as well "
                                                        "(default: where DVC's core.autostage is set)")
    p.add_argument("--also", nargs="*", default=[], metavar="FILE",
                   help="files no Snakemake job lists (the report), each recorded on its own")
    p.set_defaults(func=cmd_record)


def cmd_record(args: argparse.Namespace) -> int:
    from study.versions import record

    if not (args.root / ".dvc").is_dir():
        raise FileNotFoundError(f"{args.root.resolve()} holds no DVC repository (.dvc/): --root names the "
                                "project's root")
    missing = [f for f in args.also if not (args.root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"--also {missing[0]}: no such file under {args.root.resolve()}")
    done = record(args.root, stage=True if args.stage else None, also=args.also)
    print(f"study record: {len(done.records)} job records ({done.files} files) in versions/"
          + (f"; {len(done.dropped)} dropped (their inputs changed since)" if done.dropped else ""))
    return 0


def add_pull(sub: SubParsers) -> None:
    p = sub.add_parser("pull", help="dvc pull every record (or the records without weights), "
                                    "then each file's time set to its job's end")
    p.add_argument("--records-only", action="store_true",
                   help="leave the model weights (the *.pt files under results/) on the remote")
    p.add_argument("--remote", default=None, help="the DVC remote (default: the project's default remote)")
    p.add_argument("--root", type=Path, default=Path("."), help="the project's root (default: here)")
    p.set_defaults(func=cmd_pull)


def cmd_pull(args: argparse.Namespace) -> int:
    from study.versions import NOT_PULLED, pull_targets, restore_times, write_not_pulled

    targets = pull_targets(args.root.resolve(), args.records_only)
    if not targets:
        raise FileNotFoundError(f"{(args.root / 'versions').resolve()} holds no record: check out the commit "
                                "whose results were pushed (git log -- versions)")
    dvc = Path(sys.executable).parent / "dvc"
    # in batches: a preset's records are thousands of paths, more than one command line holds
    for start in range(0, len(targets), 500):
        argv = [str(dvc), "pull", *(["--remote", args.remote] if args.remote else []), *targets[start:start + 500]]
        proc = subprocess.run(argv, cwd=args.root)
        if proc.returncode != 0:
            raise RuntimeError(f"dvc pull failed (exit {proc.returncode}, above); nothing was lost: run the "
                               "same command again")
    count = restore_times(args.root.resolve())
    if args.records_only:
        write_not_pulled(args.root.resolve(), targets)
    elif (args.root / NOT_PULLED).is_file():
        (args.root / NOT_PULLED).unlink()
    what = "records, no model weights" if args.records_only else "records and weights"
    print(f"study pull: {len(targets)} targets pulled ({what}); {count} files set to their job's end time")
    return 0


PARSERS = (add_record, add_pull)
