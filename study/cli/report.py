"""`study reproduction`, `study front-page` and `study readme-numbers`: what the results say
beside the published numbers, on the report's landing page and in the README
(reproduction and front-page run in workflow/rules/evaluate.smk; readme-numbers by hand)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from study.cli.args import SubParsers, add_params_args, load_params_args


def add_reproduction(sub: SubParsers) -> None:
    p = sub.add_parser("reproduction", help="our numbers beside the published ones (results/<preset>/reproduction.md)")
    add_params_args(p)
    p.add_argument("--tables-dir", default=None,
                   help="folder of classwise.csv (study tables; default: results/<preset>/tables)")
    p.add_argument("--out", default=None, help="default: results/<preset>/reproduction.md")
    p.add_argument("--html", default=None, help="also write the report as an HTML page here (the one the study's "
                   "HTML report shows: results/<preset>/reproduction.html)")
    p.set_defaults(func=cmd_reproduction)


def cmd_reproduction(args: argparse.Namespace) -> int:
    from study.reproduction import reproduction_report

    params = load_params_args(args)
    preset_dir = Path("results") / str(params.preset)  # the preset's own results (workflow/rules/common.smk)
    path = reproduction_report(args.tables_dir or preset_dir / "tables", params,
                               args.out or preset_dir / "reproduction.md", args.html)
    print(f"wrote {path}" + (f" and {args.html}" if args.html else ""), file=sys.stderr)
    return 0


def add_front_page(sub: SubParsers) -> None:
    p = sub.add_parser("front-page", help="the report's landing text: the finding, read from the results")
    p.add_argument("--classwise", default=None, help="default: results/<preset>/tables/classwise.csv")
    p.add_argument("--reproduction", default=None, help="default: results/<preset>/reproduction.md")
    p.add_argument("--reproduction-page", default=None, help="the reproduction report's HTML page that the "
                   "landing text links (results/<preset>/reproduction.html)")
    p.add_argument("--preset", required=True, help="the preset the results were made with (named on the page)")
    p.add_argument("--figures", nargs="*", default=[], help="figure 2's PNGs: the PGD-AT panel is linked")
    p.add_argument("--categories", nargs="*", default=[], help="the report's categories, in the study's order")
    p.add_argument("--out", default=None, help="default: results/<preset>/report_front.rst")
    p.set_defaults(func=cmd_front_page)


def cmd_front_page(args: argparse.Namespace) -> int:
    from study.front_page import write_front_page

    preset_dir = Path("results") / args.preset  # the preset's own results (workflow/rules/common.smk)
    path = write_front_page(args.classwise or preset_dir / "tables/classwise.csv",
                            args.reproduction or preset_dir / "reproduction.md",
                            args.out or preset_dir / "report_front.rst",
                            args.figures, args.categories, args.preset, args.reproduction_page)
    print(f"wrote {path}", file=sys.stderr)  # the job's log (its rule keeps stderr), not its stdout
    return 0


def add_readme_numbers(sub: SubParsers) -> None:
    p = sub.add_parser("readme-numbers", help="the README's numbers from the results (its marked block)")
    # the README quotes the demo's numbers (`make demo`)
    p.add_argument("--tables", default="results/demo/tables", help="folder of summary.csv, attacks.csv, checks.csv")
    p.add_argument("--runs", default="results/runs", help="run folders (their meta.json: commit and date)")
    p.add_argument("--readme", default=None, help="rewrite this file's marked block (default: print the block)")
    p.set_defaults(func=cmd_readme_numbers)


def cmd_readme_numbers(args: argparse.Namespace) -> int:
    from study.cli.checkout import checkout_tool

    numbers = checkout_tool("tools.readme_numbers")
    block = numbers.readme_block(Path(args.tables), Path(args.runs))
    if args.readme:
        numbers.update_readme(Path(args.readme), block)
        print(f"updated {args.readme}", file=sys.stderr)
    else:
        print(block)
    return 0


def add_plots_template(sub: SubParsers) -> None:
    p = sub.add_parser("plots-template", help="the page template that makes `dvc plots show` draw offline "
                       "(vega inline, no CDN): dvc plots show --html-template PATH")
    p.add_argument("--out", default="results/plots/template.html")
    p.set_defaults(func=cmd_plots_template)


def cmd_plots_template(args: argparse.Namespace) -> int:
    from study.figures.plots_page import write_plots_template

    path = write_plots_template(args.out)
    print(f"wrote {path}: dvc plots show --html-template {path}", file=sys.stderr)
    return 0


PARSERS = (add_reproduction, add_front_page, add_readme_numbers, add_plots_template)
