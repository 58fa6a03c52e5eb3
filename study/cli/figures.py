"""`study figure`, `study features-figure` and `study manifest`: the commands of
workflow/rules/figures.smk (each figure's command: FIGURES in workflow/rules/common.smk)."""

from __future__ import annotations

import argparse
import sys

from study.cli.args import SubParsers


def add_figure(sub: SubParsers) -> None:
    from study.figures.catalog import FIGURE_KINDS

    p = sub.add_parser("figure", help="draw one figure from the tables or the per-sample records")
    p.add_argument("kind", choices=list(FIGURE_KINDS), help="the figure kind (study/figures/catalog.py)")
    p.add_argument("--table", default=None, help="the table the kind draws (results/<preset>/tables/*.csv)")
    p.add_argument("--dataset", default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--method", default=None)
    p.add_argument("--evaluations", nargs="*", default=None)
    # Explanation figures (4-6, 8-10):
    p.add_argument("--runs", nargs="*", default=None, help="run ids the figure draws (default: all in the table)")
    p.add_argument("--records", nargs="*", default=None, help="per-sample records (confusion, logit_similarity)")
    p.add_argument("--by", default=None, help="discrepancy: dataset, model or setting")
    p.add_argument("--methods", nargs="*", default=None, help="methods of a figure-13 panel (mitigation kinds)")
    p.add_argument("--preset", default=None,
                   help="figure 13 without --controls: the preset whose method definitions say what each method is "
                        "compared with")
    p.add_argument("--controls", nargs="*", default=None, metavar="METHOD=CONTROL",
                   help="figure 13: each method's control, as the workflow planned it (the figure rule passes them)")
    p.add_argument("--threat-model", default=None, help="RobustBench threat model of a zoo panel (Linf, L2)")
    p.add_argument("--reference", default=None,
                   help="the study's class-wise table, for our PGD-AT runs beside the zoo (zoo_ranks)")
    p.add_argument("--out-stem", required=True, help="output path without extension (.png and .pdf)")
    p.set_defaults(func=cmd_figure)


def cmd_figure(args: argparse.Namespace) -> int:
    from study.figures.catalog import make_figure

    written = make_figure(args.kind, args.table, args.out_stem, dataset=args.dataset, model=args.model,
                          method=args.method, evaluations=args.evaluations, runs=args.runs,
                          records=args.records, by=args.by, methods=args.methods,
                          threat_model=args.threat_model, reference=args.reference, preset=args.preset,
                          controls=args.controls)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def add_features_figure(sub: SubParsers) -> None:
    p = sub.add_parser("features-figure", help="figure 12: models trained on constructed feature datasets")
    p.add_argument("--table", required=True, help="results/<preset>/tables/classwise.csv")
    p.add_argument("--dataset", required=True)
    p.add_argument("--model", required=True, help="model trained on the constructed datasets")
    p.add_argument("--sources", nargs="+", required=True,
                   help="role=run_id of the source runs, e.g. standard=<run> robust=<run>")
    p.add_argument("--constructed", nargs="+", required=True, help="constructed prepared datasets")
    p.add_argument("--data", required=True, help="the original prepared dataset")
    p.add_argument("--out-stem", required=True)
    p.add_argument("--examples-stem", required=True)
    p.set_defaults(func=cmd_features_figure)


def cmd_features_figure(args: argparse.Namespace) -> int:
    from study.figures.catalog import FIGURES

    sources = dict(item.split("=", 1) for item in args.sources)
    written = FIGURES["fig12_features"].draw(args.table, args.dataset, args.model, sources, args.data, args.constructed,
                                   args.out_stem, args.examples_stem)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def add_manifest(sub: SubParsers) -> None:
    p = sub.add_parser("manifest", help="write the manifest of all figures")
    p.add_argument("--out", required=True)
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_manifest)


def cmd_manifest(args: argparse.Namespace) -> int:
    from study.figures.manifest import write_manifest

    write_manifest(args.out, args.files)
    return 0


PARSERS = (add_figure, add_features_figure, add_manifest)
