"""`study rename-runs`: an existing results folder renamed from the run ids of an older identity
(the hash of a run config as written) to today's (the hash of its typed value's canonical
form), nothing trained again (study.rename)."""

from __future__ import annotations

import argparse
from pathlib import Path

from study.cli.args import SubParsers


def add_rename_runs(sub: SubParsers) -> None:
    p = sub.add_parser("rename-runs", help="rename a results folder's runs to the ids of today's identity")
    p.add_argument("--results", type=Path, default=Path("results"), help="the results folder (default: results)")
    p.add_argument("--data", type=Path, default=Path("data"),
                   help="the data folder whose constructed/ datasets name source runs (default: data)")
    p.add_argument("--dry-run", action="store_true", help="say what would be renamed; change nothing")
    p.set_defaults(func=cmd_rename_runs)


def cmd_rename_runs(args: argparse.Namespace) -> int:
    from study.rename import plan_renames, rename_results, rewrite_snakemake_records, stand_ins_missing, write_stand_ins

    if not (args.results / "runs").is_dir():
        raise FileNotFoundError(f"{args.results / 'runs'} does not exist: --results names no results folder "
                                "(the folder holding runs/ and evaluations/)")
    renames = plan_renames(args.results, args.data)
    for old, new in {**renames.runs, **renames.constructions}.items():
        print(f"{old} -> {new}")
    rewritten = sorted({p.parent.name for p in renames.configs} - set(renames.runs))
    for run in rewritten:
        print(f"{run}: config.json written canonically (same id)")
    # checked before anything is written: a config.json that does not parse refuses the whole call
    missing = stand_ins_missing(args.results, renames)
    for run, (names, _) in missing.items():
        print(f"{run}: stand-ins for model.pt written ({', '.join(names)}: the run keeps no such checkpoint)")
    if not (renames.runs or renames.constructions or renames.configs or missing):
        print(f"nothing to rename: every run under {args.results / 'runs'} carries its id already")
        return 0
    if args.dry_run:
        print("dry run: nothing changed")
        return 0
    rename_results(args.results, args.data, renames)
    written = write_stand_ins(args.results, missing)
    # Snakemake's records beside the results folder: a job reading a renamed run is not rerun for its new path
    records = args.results.parent / ".snakemake" / "metadata"
    rewritten_records, dropped = rewrite_snakemake_records(records, renames.names())
    if rewritten_records or dropped:
        print(f"{records}: {rewritten_records} job records rewritten to the new names, "
              f"{dropped} of renamed files dropped")
    print(f"renamed {len(renames.runs)} runs and {len(renames.constructions)} constructed datasets; "
          f"{len(rewritten)} other config.json files written canonically"
          + (f"; {written} stand-in files written" if written else ""))
    return 0


PARSERS = (add_rename_runs,)
