"""`study zoo-run` and `study zoo-table`: the commands of workflow/rules/zoo.smk (its models'
evaluations and tables are those of the study: study/cli/evaluate.py, tables.py, robustness.py)."""

from __future__ import annotations

import argparse
import sys

from study.cli.args import SubParsers, spec_json


def add_zoo_run(sub: SubParsers) -> None:
    p = sub.add_parser("zoo-run", help="the run directory of a zoo model (names its weights file)")
    p.add_argument("--run-config", type=spec_json("ConfigSpec", "run config", zoo=True), required=True,
                   help="the zoo run's config (study.config.zoo)")
    p.add_argument("--weights-dir", default=None, help="weights folder (default: $STUDY_WEIGHTS_DIR)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing weights into the folder first ($STUDY_WEIGHTS_URL_BASE, else robustbench's "
                        "own download; the workflow asks for it for its own folder data/zoo_weights only)")
    p.add_argument("--run-dir", required=True)
    p.set_defaults(func=cmd_zoo_run)


def cmd_zoo_run(args: argparse.Namespace) -> int:
    from study.run_directory import write_zoo_run

    run_dir = write_zoo_run(args.run_dir, args.run_config, args.weights_dir, download=args.download)
    print(f"{args.run_config.config.zoo.name}: {run_dir} names its weights", file=sys.stderr)
    return 0


def add_zoo_table(sub: SubParsers) -> None:
    p = sub.add_parser("zoo-table", help="the zoo's accuracies beside RobustBench's reported ones")
    p.add_argument("--classwise", required=True, help="the zoo's class-wise table (study tables)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_zoo_table)


def cmd_zoo_table(args: argparse.Namespace) -> int:
    from study.tables.classwise import zoo_table

    print(f"zoo table: {zoo_table(args.classwise, args.out)}", file=sys.stderr)
    return 0


PARSERS = (add_zoo_run, add_zoo_table)
