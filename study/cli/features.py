"""`study construct`: the command of workflow/rules/features.smk (figure 12, which draws what
it builds, is `study features-figure`: study/cli/figures.py)."""

from __future__ import annotations

import argparse
import sys

from study.cli.args import SubParsers, device_args, typed_json


def add_construct(sub: SubParsers) -> None:
    p = sub.add_parser("construct", parents=[device_args()],
                       help="build a robust / non-robust feature dataset (Ilyas et al.)")
    p.add_argument("--kind", required=True, help="d_r, d_nr, d_rand or d_det")
    p.add_argument("--data", required=True, help="prepared source dataset")
    p.add_argument("--source-run", required=True, help="run directory of the model to construct with")
    p.add_argument("--settings", type=typed_json("Construct", "settings"), required=True,
                   help="construction settings (JSON or @file: params features.construct)")
    p.add_argument("--key", required=True, help="name of this construction (recorded as provenance)")
    p.add_argument("--work-dir", required=True, help="folder of finished chunks (resume)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_construct)


def cmd_construct(args: argparse.Namespace) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.features.build import construct_from_run
    from study.run_directory import owned_run

    device = select_device(args.device)
    set_threads(args.threads)
    owned_run(args.source_run)
    built = construct_from_run(args.kind, args.source_run, load_prepared(args.data), args.out, args.work_dir,
                               args.settings, args.key, device=device, progress=not args.no_progress)
    print(f"{args.kind}: {built.meta['constructed']['summary']} -> {args.out}", file=sys.stderr)
    return 0


PARSERS = (add_construct,)
