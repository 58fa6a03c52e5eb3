"""`study check`, `study corruptions` and `study robustness-tables`: the commands of
workflow/rules/robustness.smk."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.checkpoints import CHECKPOINTS
from study.cli.args import SubParsers, run_args, spec_json


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def add_check(sub: SubParsers) -> None:
    p = sub.add_parser("check", parents=[run_args()], help="checks against false robustness of one run")
    p.add_argument("--records", nargs="+", required=True, help="the run's per-sample evaluation records")
    p.add_argument("--pgd", type=spec_json("EvaluationSpec", "pgd", "PgdJob"), required=True,
                   help="reference PGD evaluation (JSON) for eps sweeps")
    p.add_argument("--per-class", type=int, default=20, help="test samples per class for the model checks")
    p.add_argument("--eps-factors", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0])
    p.add_argument("--strong-steps", type=_positive_int, default=100,
                   help="steps of the much stronger PGD that the reference PGD is checked against")
    p.add_argument("--strong-restarts", type=_positive_int, default=2, help="its random restarts")
    p.add_argument("--out", required=True, help="checks.json")
    p.add_argument("--table", required=True, help="checks.csv")
    p.add_argument("--checkpoint", default="last", choices=list(CHECKPOINTS),
                   help="checkpoint checked: last (model.pt), best (model_best.pt) or published "
                        "(model_published.pt); only its records are compared")
    p.add_argument("--strict", action="store_true", help="exit 1 when a check fails (after writing the results)")
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.evaluate.checkpoint_checks import check_run
    from study.evaluate.checks import DEFAULT_THRESHOLDS
    from study.evaluate.records import check_record_owner
    from study.run_directory import owned_run

    device = select_device(args.device)
    set_threads(args.threads)
    owned_run(args.run_dir, args.checkpoint)
    for path in args.records:
        check_record_owner(path, run_id=Path(args.run_dir).name)
    thresholds = replace(DEFAULT_THRESHOLDS, strong_steps=args.strong_steps, strong_restarts=args.strong_restarts)
    result = check_run(args.run_dir, load_prepared(args.data), args.records, args.pgd, args.out, args.table,
                       per_class=args.per_class, eps_factors=args.eps_factors, device=device,
                       checkpoint=args.checkpoint, thresholds=thresholds)
    return 1 if result["status"] == "fail" and args.strict else 0


def add_corruptions(sub: SubParsers) -> None:
    p = sub.add_parser("corruptions", parents=[run_args()], help="per-sample CIFAR-10-C evaluation")
    p.add_argument("--corruptions", nargs="+", required=True)
    p.add_argument("--source", choices=["auto", "official", "regenerated"], default="auto",
                   help="official archive, regenerated images, or auto: official when CIFAR-10-C.tar is found")
    p.add_argument("--raw-dir", default="data/raw", help="where CIFAR-10-C.tar is looked for after the mirror")
    p.add_argument("--mirror", default=None, help="local mirror folder (default: $STUDY_DATA_MIRROR)")
    p.add_argument("--severities", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--per-class", type=int, default=None, help="test images per class (default: all)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="images per batch (default: by device, study.device.eval_batch_size)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_corruptions)


def cmd_corruptions(args: argparse.Namespace) -> int:
    from study.data.prepared import load_prepared
    from study.device import eval_batch_size, select_device, set_threads
    from study.evaluate.corruptions import evaluate_corruptions
    from study.run_directory import owned_run

    device = select_device(args.device)
    set_threads(args.threads)
    owned_run(args.run_dir)
    evaluate_corruptions(args.run_dir, load_prepared(args.data), args.corruptions, args.severities, args.out,
                         per_class=args.per_class, batch_size=eval_batch_size(args.batch_size, device),
                         seed=args.seed, device=device, source=args.source, raw_dir=args.raw_dir,
                         mirror=args.mirror)
    return 0


def add_robustness_tables(sub: SubParsers) -> None:
    p = sub.add_parser("robustness-tables", help="FRL, CFP, confusion, attack and check tables")
    p.add_argument("--records", nargs="+", required=True)
    p.add_argument("--checks", nargs="*", default=[])
    p.add_argument("--corruptions", nargs="*", default=[], help="corruption records (study corruptions)")
    p.add_argument("--out-dir", required=True, help="the tables' folder (the workflow's: results/<preset>/tables)")
    p.set_defaults(func=cmd_robustness_tables)


def cmd_robustness_tables(args: argparse.Namespace) -> int:
    from study.evaluate.records import check_record_owner
    from study.tables.robustness import robustness_tables, write_corruption_table

    for path in [*args.records, *args.corruptions]:
        check_record_owner(path)
    paths = robustness_tables(args.records, args.checks, args.out_dir)
    paths["corruptions"] = write_corruption_table(args.corruptions, args.out_dir)
    for name, path in paths.items():
        print(f"{name}: {path}", file=sys.stderr)
    return 0


PARSERS = (add_check, add_corruptions, add_robustness_tables)
