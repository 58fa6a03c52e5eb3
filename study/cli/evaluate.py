"""`study evaluate` and `study merge-shards`: the per-sample evaluations of
workflow/rules/evaluate.smk (its tables and report: study/cli/tables.py, study/cli/report.py)."""

from __future__ import annotations

import argparse

from study.checkpoints import CHECKPOINTS
from study.cli.args import SubParsers, run_args, spec_json


def _shard_arg(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected SHARD/SHARDS like 0/4, got {text!r}") from err
    return i, n


def add_evaluate(sub: SubParsers) -> None:
    p = sub.add_parser("evaluate", parents=[run_args()], help="per-sample evaluation of a trained run")
    p.add_argument("--evaluation", type=spec_json("EvaluationSpec", "evaluation"), required=True, action="append",
                   help="resolved evaluation (JSON or @file); repeat with an --out each for several")
    p.add_argument("--out", required=True, action="append", help="parquet file of per-sample records")
    p.add_argument("--shard", type=_shard_arg, default=None, help="evaluate only shard I of N (I/N, from 0)")
    p.add_argument("--checkpoint", default="last", choices=list(CHECKPOINTS),
                   help="last (model.pt), best on validation (model_best.pt; recorded as <evaluation>@best) or "
                        "published (model_published.pt, the published protocol; <evaluation>@published)")
    p.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.evaluate.checkpoint_eval import evaluate_checkpoint
    from study.run_directory import owned_run

    if len(args.evaluation) != len(args.out):
        raise ValueError(f"{len(args.evaluation)} --evaluation but {len(args.out)} --out; "
                         "give one --out after each --evaluation")
    if args.shard and len(args.evaluation) > 1:
        raise ValueError(f"--shard evaluates one shard of one evaluation; got {len(args.evaluation)} evaluations")
    device = select_device(args.device)
    set_threads(args.threads)
    # the records are written under the folder's run id: refused unless its config and model are that run's
    owned_run(args.run_dir, args.checkpoint)
    splits = load_prepared(args.data)
    # Several evaluations of one run in one process: the workflow's evaluate job of a run and
    # checkpoint, which pays torch's import and the model's load once.
    evaluate_checkpoint(args.run_dir, splits, list(zip(args.evaluation, args.out, strict=True)), device=device,
                        progress=not args.no_progress, shard=args.shard, checkpoint=args.checkpoint)
    return 0


def add_merge_shards(sub: SubParsers) -> None:
    p = sub.add_parser("merge-shards", help="merge the shard records of one evaluation")
    p.add_argument("--out", required=True)
    p.add_argument("parts", nargs="+")
    p.set_defaults(func=cmd_merge_shards)


def cmd_merge_shards(args: argparse.Namespace) -> int:
    from study.evaluate.records import check_record_owner
    from study.evaluate.shards import merge_shards

    for path in args.parts:
        check_record_owner(path)
    merge_shards(args.parts, args.out)
    return 0


PARSERS = (add_evaluate, add_merge_shards)
