"""`study train`: the command of workflow/rules/train.smk."""

from __future__ import annotations

import argparse

from study.cli.args import SubParsers, run_args, spec_json


def add_train(sub: SubParsers) -> None:
    p = sub.add_parser("train", parents=[run_args()], help="train (or resume) one run")
    p.add_argument("--run-config", type=spec_json("ConfigSpec", "run config", zoo=False), required=True,
                   help="resolved run config (JSON or @file)")
    p.add_argument("--stop-after", type=int, default=None, help="end this call after this epoch")
    p.add_argument("--init-from", default=None,
                   help="model file of the parent run that a fine-tuning method (init_from) starts from")
    p.add_argument("--compile", default="off", choices=["off", "default", "auto"],
                   help="torch.compile of the training step (params.yaml speed.compile; docs/performance.md)")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.train.engine import train
    from study.versions import refuse_not_pulled

    refuse_not_pulled(f"{args.run_dir}/model.pt")
    device = select_device(args.device)
    set_threads(args.threads)
    splits = load_prepared(args.data)
    result = train(args.run_config, splits, args.run_dir, device=device,
                   stop_after=args.stop_after, progress=not args.no_progress, init_from=args.init_from,
                   compile_mode=args.compile)
    return 0 if result.finished or args.stop_after is not None else 1


PARSERS = (add_train,)
