"""`study prepare`: the command of workflow/rules/data.smk."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.cli.args import SubParsers, json_arg, typed_json


def add_prepare(sub: SubParsers) -> None:
    p = sub.add_parser("prepare", help="fetch (mirror or download), verify and prepare a dataset")
    p.add_argument("--dataset", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--raw-dir", default="data/raw")
    p.add_argument("--mirror", default=None, help="local mirror folder (default: $STUDY_DATA_MIRROR)")
    p.add_argument("--synthetic", type=typed_json("SyntheticData", "synthetic"), default=None,
                   help="synthetic-data parameters (JSON: params data.synthetic)")
    p.add_argument("--options", type=json_arg, default=None,
                   help="options of a hand-placed dataset's loader (JSON), e.g. imagenet per_class")
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (log files)")
    p.set_defaults(func=cmd_prepare)


def cmd_prepare(args: argparse.Namespace) -> int:
    from study.data.prepared import prepare_dataset

    splits = prepare_dataset(args.dataset, args.variant, Path(args.raw_dir), args.mirror, Path(args.out),
                             synthetic=args.synthetic, options=args.options, progress=not args.no_progress)
    print(f"prepared {args.dataset} ({args.variant}): {splits.train_x.shape[0]} train, "
          f"{splits.test_x.shape[0]} test images -> {args.out}", file=sys.stderr)
    return 0


PARSERS = (add_prepare,)
