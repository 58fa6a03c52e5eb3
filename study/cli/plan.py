"""`study plan`, `study preflight` and `study comparisons`: what the configured study is, before
any rule runs (workflow/rules/common.smk plans with the same library; preflight.smk checks as
`study preflight` does)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from study.cli.args import SubParsers, add_params_args, load_params_args


def add_plan(sub: SubParsers) -> None:
    p = sub.add_parser("plan", help="list the runs of the configured study")
    add_params_args(p)
    p.add_argument("--json", action="store_true", help="print every run's resolved config as JSON")
    p.add_argument("--cost", action="store_true",
                   help="print the price: device-hours (2-core CPU, H100) and disk per experiment group and in total "
                        "(study.cost: workflow/throughput.yaml and the benchmark files of jobs that ran)")
    p.add_argument("--write", metavar="FILE",
                   help="with --cost: rewrite FILE's generated prices: the table of every preset (README.md) and each "
                        "'<!-- price of preset NAME: start -->' block (docs/usage.md)")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from study.config import plan_runs

    if args.write:
        if not args.cost:
            raise SystemExit("study plan: --write needs --cost (it writes the presets' price table)")
        from study.cost import rewrite_prices
        from study.io import atomic_write_text

        doc = Path(args.write)
        try:
            text = rewrite_prices(doc.read_text())
        except OSError as e:
            raise SystemExit(f"study plan --write: cannot read {doc}: {e.strerror}") from None
        except ValueError as e:
            raise SystemExit(f"study plan --write: {doc} has {e}") from None
        atomic_write_text(doc, text)
        print(f"wrote {doc}", file=sys.stderr)
        return 0
    params = load_params_args(args)
    runs = plan_runs(params)
    if args.cost:
        from study.config.zoo import plan_zoo
        from study.cost import price, render_cost

        jobs, table = price(params, runs, plan_zoo(params))
        print(render_cost(params.preset, jobs, table))
        return 0
    if args.json:
        print(json.dumps([{"run_id": r.run_id, "groups": r.groups, "evaluations": r.evaluations,
                           "checkpoints": r.checkpoints, "config": r.config} for r in runs], indent=2))
    else:
        from study.reproduction.power import families_text

        print(f"preset {params.preset}: {len(runs)} runs")
        for r in runs:
            print(f"  {r.run_id}  groups={','.join(r.groups)}  evals={','.join(r.evaluations)}")
        seeds = max(len(g.seeds) for g in params.experiments)
        # the report's rows are read on the preset's test images
        print(families_text(params.preset or "(none: params.yaml alone)", seeds, params.evaluate.test_per_class))
    return 0


def add_preflight(sub: SubParsers) -> None:
    p = sub.add_parser("preflight", help="what the plan needs before any job runs: present, to download, missing")
    add_params_args(p)
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args: argparse.Namespace) -> int:
    from study.config import plan_runs
    from study.config.zoo import plan_zoo
    from study.preflight import preflight, price_line, render

    params = load_params_args(args)
    runs, zoo = plan_runs(params), plan_zoo(params)
    print(render(params, preflight(params, runs, zoo), len(runs), len(zoo), price_line(params, runs, zoo)))
    return 0


def add_comparisons(sub: SubParsers) -> None:
    p = sub.add_parser("comparisons", help="every compared pair of methods and its declared difference, per preset")
    p.add_argument("--params", default="params.yaml", help="the study's params.yaml")
    p.add_argument("--presets-dir", default="workflow/presets")
    p.add_argument("--doc", default="docs/methods.md", help="the file whose marked list --write rewrites")
    p.add_argument("--write", action="store_true", help="rewrite the marked list in --doc (default: print it)")
    p.set_defaults(func=cmd_comparisons)


def cmd_comparisons(args: argparse.Namespace) -> int:
    from study.config.comparisons import comparisons_markdown, rewrite_doc

    section = comparisons_markdown(args.params, args.presets_dir)
    if args.write:
        doc = rewrite_doc(Path(args.doc), section)
        print(f"wrote {doc}", file=sys.stderr)
    else:
        print(section, end="")
    return 0


PARSERS = (add_plan, add_preflight, add_comparisons)
