"""`study bench`: the command of workflow/rules/bench.smk (docs/performance.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.cli.args import SubParsers


def add_bench(sub: SubParsers) -> None:
    p = sub.add_parser("bench", help="time the engine against a plain reference loop (docs/performance.md)")
    p.add_argument("--out", default="results/bench/cpu.json", help="JSON report; the table goes beside it (.md)")
    p.add_argument("--data", default=None, help="prepared dataset file (default: synthetic CIFAR-sized data)")
    p.add_argument("--model", default="preact_resnet18")
    p.add_argument("--images", type=int, default=1024, help="training images (class-stratified)")
    p.add_argument("--test-images", type=int, default=256, help="test images of the evaluation tasks")
    p.add_argument("--tasks", nargs="+", default=None,
                   help="standard_epoch, pgd10_at_epoch, trades_epoch, pgd20_eval, autoattack_eval (default: all)")
    p.add_argument("--device", default="auto", help="auto (the GPU if there is one), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--compile", nargs="+", default=["auto"], choices=["off", "default", "auto"],
                   help="speed.compile settings to time the engine's training tasks with (the first is the headline)")
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"],
                   help="train.precision settings to time the engine's training tasks with (the first is the "
                        "headline; bf16: autocast, on a GPU or a CPU with native bf16 (AVX-512 BF16, AMX); "
                        "evaluations are fp32); fp32 and bf16 together also compare their class-wise robust "
                        "accuracy (bf16_matches_fp32)")
    p.add_argument("--profile", action="store_true",
                   help="write a torch.profiler table of the PGD-10 AT step (per compile setting) beside --out")
    p.add_argument("--concurrent", type=int, default=None, metavar="K",
                   help="also time K training processes sharing the device against one alone")
    p.add_argument("--accuracy-epochs", type=int, default=2,
                   help="PGD-10 AT epochs before both sides' accuracy is compared (the last is timed)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from study.cli.checkout import checkout_tool
    from study.device import select_device

    bench = checkout_tool("tools.bench")
    select_device(args.device)  # an unavailable device fails here, before any data is made
    report = bench.run_bench(args.out, data=args.data, model=args.model, images=args.images,
                             test_images=args.test_images, tasks=args.tasks or bench.ALL_TASKS, device=args.device,
                             seed=args.seed, batch_size=args.batch_size, threads=args.threads,
                             accuracy_epochs=args.accuracy_epochs, progress=not args.no_progress,
                             compile_modes=args.compile, profile=args.profile, concurrent=args.concurrent,
                             precisions=args.precision)
    print(f"wrote {args.out} and {Path(args.out).with_suffix('.md')} "
          f"(accuracy_ok: {report.get('accuracy_ok')}, bf16_matches_fp32: {report.get('bf16_matches_fp32')})",
          file=sys.stderr)
    return 0


PARSERS = (add_bench,)
