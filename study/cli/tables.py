"""`study tables`: the class-wise tables of workflow/rules/evaluate.smk (and of zoo.smk's models)."""

from __future__ import annotations

import argparse
import sys

from study.cli.args import SubParsers


def add_tables(sub: SubParsers) -> None:
    p = sub.add_parser("tables", help="aggregate run records into a preset's tables (results/<preset>/tables)")
    p.add_argument("--records", nargs="+", required=True, help="per-sample evaluation records (parquet)")
    p.add_argument("--epochs", nargs="*", default=[], help="epochs.csv files of the runs")
    p.add_argument("--out-dir", required=True, help="the tables' folder (the workflow's: results/<preset>/tables)")
    p.add_argument("--metrics-dir", default=None,
                   help="also write the headline metrics here, one JSON file per model "
                        "(results/<preset>/metrics, for DVC); "
                        "the folder is the metrics' own: a JSON file of a model no longer in the records is removed")
    p.add_argument("--checks", nargs="*", default=[],
                   help="checks.json files of the runs: flagged evaluations are marked and not counted")
    p.set_defaults(func=cmd_tables)


def cmd_tables(args: argparse.Namespace) -> int:
    from pathlib import Path

    from study.evaluate.records import check_record_owner
    from study.run_directory import owned_run
    from study.tables.classwise import build_tables

    # a row is named by the run id its record holds: refused unless the record, and the run
    # folder an epochs.csv lies in, are that run's
    for path in args.records:
        check_record_owner(path)
    for path in args.epochs:
        owned_run(Path(path).parent, checkpoint=None)
    paths = build_tables(args.records, args.epochs, args.out_dir, args.metrics_dir, checks=args.checks)
    for name, path in paths.items():
        print(f"{name}: {path}", file=sys.stderr)
    return 0


PARSERS = (add_tables,)
