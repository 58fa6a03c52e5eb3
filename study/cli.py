"""The `study` command: every step of the pipeline, runnable by hand with the same
arguments that the Snakemake rules pass."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from study.checkpoints import CHECKPOINTS


def _json_arg(text: str) -> dict:
    """Inline JSON, or @path to a JSON file."""
    try:
        if text.startswith("@"):
            return json.loads(Path(text[1:]).read_text())
        return json.loads(text)
    except (OSError, json.JSONDecodeError) as err:
        raise argparse.ArgumentTypeError(f"not valid JSON (or @file): {text[:80]!r}: {err}") from err


def _typed_json(kind: str, what: str):
    """An argument type: inline JSON (or @file) checked against a type of study.config.types,
    one line naming every bad key path otherwise. The mapping as given is what the command
    gets: its JSON is part of the records (and their hashes) the command writes."""
    def typed(text: str) -> dict:
        from study.config import types

        value = _json_arg(text)
        try:
            types.parse(getattr(types, kind), value, what)
        except types.ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return value

    typed.__name__ = kind  # argparse names the type in its messages
    return typed


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _add_params_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default="params.yaml", help="the study's params.yaml")
    p.add_argument("--preset", default=None, help="preset overlay (workflow/presets/NAME.yaml)")
    p.add_argument("--presets-dir", default="workflow/presets")
    p.add_argument("--schema", default="workflow/schemas/params.schema.yaml")
    p.add_argument("--config-overrides", type=_json_mapping, default={},
                   help="JSON of the values given with Snakemake's --config (as the workflow passes them), "
                        "merged after the preset as the workflow merged them")


def _json_mapping(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err.msg} at character {err.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of config values, got {text!r}")
    return value


def _load(args) -> dict:
    from study.config import load_params

    # --preset, then the --config values: load_params merges them after the preset, as the workflow does
    overrides = {**({"preset": args.preset} if args.preset else {}), **args.config_overrides}
    return load_params(args.params, overrides, presets_dir=args.presets_dir, schema_path=args.schema)


def cmd_plan(args) -> int:
    from study.config import plan_runs

    params = _load(args)
    runs = plan_runs(params)
    if args.json:
        print(json.dumps([{"run_id": r.run_id, "groups": r.groups, "evaluations": r.evaluations,
                           "checkpoints": r.checkpoints, "config": r.config} for r in runs], indent=2))
    else:
        print(f"preset {params['preset']}: {len(runs)} runs")
        for r in runs:
            print(f"  {r.run_id}  groups={','.join(r.groups)}  evals={','.join(r.evaluations)}")
    return 0


def cmd_preflight(args) -> int:
    from study.config import plan_runs
    from study.config.zoo import plan_zoo
    from study.preflight import preflight, render

    params = _load(args)
    runs, zoo = plan_runs(params), plan_zoo(params)
    print(render(params, preflight(params, runs, zoo), len(runs), len(zoo)))
    return 0


def cmd_prepare(args) -> int:
    from study.data.prepared import prepare_dataset

    splits = prepare_dataset(args.dataset, args.variant, Path(args.raw_dir), args.mirror, Path(args.out),
                             synthetic=args.synthetic, options=args.options, progress=not args.no_progress)
    print(f"prepared {args.dataset} ({args.variant}): {splits.train_x.shape[0]} train, "
          f"{splits.test_x.shape[0]} test images -> {args.out}", file=sys.stderr)
    return 0


def cmd_train(args) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.train.engine import train_run

    device = select_device(args.device)
    set_threads(args.threads)
    splits = load_prepared(args.data)
    result = train_run(args.run_config, splits, args.run_dir, device=device,
                       stop_after=args.stop_after, progress=not args.no_progress, init_from=args.init_from,
                       compile_mode=args.compile)
    return 0 if result.finished or args.stop_after is not None else 1


def cmd_evaluate(args) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.evaluate.run import evaluate_checkpoint

    if len(args.evaluation) != len(args.out):
        raise ValueError(f"{len(args.evaluation)} --evaluation but {len(args.out)} --out; "
                         "give one --out after each --evaluation")
    if args.shard and len(args.evaluation) > 1:
        raise ValueError(f"--shard evaluates one shard of one evaluation; got {len(args.evaluation)} evaluations")
    device = select_device(args.device)
    set_threads(args.threads)
    splits = load_prepared(args.data)
    # Several evaluations of one run in one process: the workflow's evaluate job of a run and
    # checkpoint, which pays torch's import and the model's load once.
    evaluate_checkpoint(args.run_dir, splits, list(zip(args.evaluation, args.out, strict=True)), device=device,
                        progress=not args.no_progress, shard=args.shard, checkpoint=args.checkpoint)
    return 0


def _shard_arg(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected SHARD/SHARDS like 0/4, got {text!r}") from err
    return i, n


def cmd_merge_shards(args) -> int:
    from study.evaluate.shards import merge_shards

    merge_shards(args.parts, args.out)
    return 0


def cmd_zoo_run(args) -> int:
    from study.runs import write_zoo_run

    run_dir = write_zoo_run(args.run_dir, args.run_config, args.weights_dir, download=args.download)
    print(f"{args.run_config['zoo']['name']}: {run_dir} names its weights", file=sys.stderr)
    return 0


def cmd_zoo_table(args) -> int:
    from study.tables import zoo_table

    print(f"zoo table: {zoo_table(args.classwise, args.out)}", file=sys.stderr)
    return 0


def cmd_tables(args) -> int:
    from study.tables import build_tables

    paths = build_tables(args.records, args.epochs, args.out_dir, args.metrics_dir, checks=args.checks)
    for name, path in paths.items():
        print(f"{name}: {path}", file=sys.stderr)
    return 0


def cmd_figure(args) -> int:
    from study.figures.catalog import make_figure

    written = make_figure(args.kind, args.table, args.out_stem, dataset=args.dataset, model=args.model,
                          method=args.method, evaluations=args.evaluations, runs=args.runs,
                          records=args.records, by=args.by, methods=args.methods,
                          threat_model=args.threat_model, reference=args.reference, preset=args.preset,
                          controls=args.controls)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_construct(args) -> int:
    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.features.build import build_constructed
    from study.runs import load_trained_model

    device = select_device(args.device)
    set_threads(args.threads)
    model, _ = load_trained_model(args.source_run, device)
    provenance = {"key": args.key, "source_run": Path(args.source_run).name}
    built = build_constructed(args.kind, model, load_prepared(args.data), args.out, args.work_dir, args.settings,
                              provenance, device=device, progress=not args.no_progress)
    print(f"{args.kind}: {built.meta['constructed']['summary']} -> {args.out}", file=sys.stderr)
    return 0


def cmd_features_figure(args) -> int:
    import pandas as pd

    from study.data.prepared import load_prepared
    from study.figures.features import (
        example_sets,
        feature_rows,
        features_title,
        plot_feature_classwise,
        plot_feature_examples,
        rows_class_names,
    )
    from study.figures.style import save_figure

    sources = dict(item.split("=", 1) for item in args.sources)
    rows = feature_rows(pd.read_csv(args.table), args.dataset, args.model, sources)
    variant = str(rows["data_variant"].iloc[0])
    title = features_title(args.dataset, args.model, variant)
    written = save_figure(plot_feature_classwise(rows, title), args.out_stem)

    examples = example_sets(load_prepared(args.data), [load_prepared(p) for p in args.constructed])
    written += save_figure(plot_feature_examples(examples, rows_class_names(rows), title.split(" | ")[0]),
                           args.examples_stem)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_manifest(args) -> int:
    from study.figures.manifest import write_manifest

    write_manifest(args.out, args.files)
    return 0


def cmd_check(args) -> int:
    from dataclasses import replace

    from study.data.prepared import load_prepared
    from study.device import select_device, set_threads
    from study.evaluate.check_run import check_run
    from study.evaluate.checks import DEFAULT_THRESHOLDS

    device = select_device(args.device)
    set_threads(args.threads)
    thresholds = replace(DEFAULT_THRESHOLDS, strong_steps=args.strong_steps, strong_restarts=args.strong_restarts)
    result = check_run(args.run_dir, load_prepared(args.data), args.records, args.pgd, args.out, args.table,
                       per_class=args.per_class, eps_factors=args.eps_factors, device=device,
                       checkpoint=args.checkpoint, thresholds=thresholds)
    return 1 if result["status"] == "fail" and args.strict else 0


def cmd_corruptions(args) -> int:
    from study.data.prepared import load_prepared
    from study.device import eval_batch_size, select_device, set_threads
    from study.evaluate.corruptions import evaluate_corruptions

    device = select_device(args.device)
    set_threads(args.threads)
    evaluate_corruptions(args.run_dir, load_prepared(args.data), args.corruptions, args.severities, args.out,
                         per_class=args.per_class, batch_size=eval_batch_size(args.batch_size, device),
                         seed=args.seed, device=device, source=args.source, raw_dir=args.raw_dir,
                         mirror=args.mirror)
    return 0


def cmd_robustness_tables(args) -> int:
    import pandas as pd

    from study.io import atomic_path
    from study.robustness_tables import corruption_table, robustness_tables

    paths = robustness_tables(args.records, args.checks, args.out_dir)
    # Written even with no corruption records (none configured), so the outputs are complete.
    paths["corruptions"] = Path(args.out_dir) / "corruptions.csv"
    table = corruption_table(args.corruptions) if args.corruptions else pd.DataFrame()
    with atomic_path(paths["corruptions"]) as tmp:
        table.to_csv(tmp, index=False)
    for name, path in paths.items():
        print(f"{name}: {path}", file=sys.stderr)
    return 0


def cmd_bench(args) -> int:
    from study.bench import run_bench
    from study.bench.run import ALL_TASKS
    from study.device import select_device

    select_device(args.device)  # an unavailable device fails here, before any data is made
    report = run_bench(args.out, data=args.data, model=args.model, images=args.images,
                       test_images=args.test_images, tasks=args.tasks or ALL_TASKS, device=args.device, seed=args.seed,
                       batch_size=args.batch_size, threads=args.threads, accuracy_epochs=args.accuracy_epochs,
                       progress=not args.no_progress, compile_modes=args.compile, profile=args.profile,
                       concurrent=args.concurrent, precisions=args.precision)
    print(f"wrote {args.out} and {Path(args.out).with_suffix('.md')} "
          f"(accuracy_ok: {report.get('accuracy_ok')}, bf16_matches_fp32: {report.get('bf16_matches_fp32')})",
          file=sys.stderr)
    return 0


def _device_args() -> argparse.ArgumentParser:
    """Where and how visibly a command that runs a model works."""
    device = argparse.ArgumentParser(add_help=False)
    device.add_argument("--device", default="auto", help="auto (the GPU if there is one), cpu, cuda or cuda:N")
    device.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    device.add_argument("--no-progress", action="store_true", help="no progress bars (log files)")
    return device


def _run_args() -> argparse.ArgumentParser:
    """The arguments every command that loads a run shares."""
    common = argparse.ArgumentParser(add_help=False, parents=[_device_args()])
    common.add_argument("--data", required=True, help="prepared dataset file (study prepare)")
    common.add_argument("--run-dir", required=True)
    return common


def _add_plan_and_data(sub) -> None:
    p = sub.add_parser("plan", help="list the runs of the configured study")
    _add_params_args(p)
    p.add_argument("--json", action="store_true", help="print every run's resolved config as JSON")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("preflight", help="what the plan needs before any job runs: present, to download, missing")
    _add_params_args(p)
    p.set_defaults(func=cmd_preflight)

    p = sub.add_parser("prepare", help="fetch (mirror or download), verify and prepare a dataset")
    p.add_argument("--dataset", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--raw-dir", default="data/raw")
    p.add_argument("--mirror", default=None, help="local mirror folder (default: $STUDY_DATA_MIRROR)")
    p.add_argument("--synthetic", type=_typed_json("SyntheticData", "synthetic"), default=None,
                   help="synthetic-data parameters (JSON: params data.synthetic)")
    p.add_argument("--options", type=_json_arg, default=None,
                   help="options of a hand-placed dataset's loader (JSON), e.g. imagenet per_class")
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (log files)")
    p.set_defaults(func=cmd_prepare)



def _add_training(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("train", parents=[common], help="train (or resume) one run")
    p.add_argument("--run-config", type=_json_arg, required=True, help="resolved run config (JSON or @file)")
    p.add_argument("--stop-after", type=int, default=None, help="end this call after this epoch")
    p.add_argument("--init-from", default=None,
                   help="model file of the parent run that a fine-tuning method (init_from) starts from")
    p.add_argument("--compile", default="off", choices=["off", "default", "auto"],
                   help="torch.compile of the training step (params.yaml speed.compile; docs/performance.md)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("construct", parents=[_device_args()],
                       help="build a robust / non-robust feature dataset (Ilyas et al.)")
    p.add_argument("--kind", required=True, help="d_r, d_nr, d_rand or d_det")
    p.add_argument("--data", required=True, help="prepared source dataset")
    p.add_argument("--source-run", required=True, help="run directory of the model to construct with")
    p.add_argument("--settings", type=_typed_json("Construct", "settings"), required=True,
                   help="construction settings (JSON or @file: params features.construct)")
    p.add_argument("--key", required=True, help="name of this construction (recorded as provenance)")
    p.add_argument("--work-dir", required=True, help="folder of finished chunks (resume)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_construct)



def _add_evaluation(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("evaluate", parents=[common], help="per-sample evaluation of a trained run")
    p.add_argument("--evaluation", type=_typed_json("EvaluationJob", "evaluation"), required=True, action="append",
                   help="resolved evaluation (JSON or @file); repeat with an --out each for several")
    p.add_argument("--out", required=True, action="append", help="parquet file of per-sample records")
    p.add_argument("--shard", type=_shard_arg, default=None, help="evaluate only shard I of N (I/N, from 0)")
    p.add_argument("--checkpoint", default="last", choices=list(CHECKPOINTS),
                   help="last (model.pt), best on validation (model_best.pt; recorded as <evaluation>@best) or "
                        "published (model_published.pt, the published protocol; <evaluation>@published)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("merge-shards", help="merge the shard records of one evaluation")
    p.add_argument("--out", required=True)
    p.add_argument("parts", nargs="+")
    p.set_defaults(func=cmd_merge_shards)

    p = sub.add_parser("check", parents=[common], help="checks against false robustness of one run")
    p.add_argument("--records", nargs="+", required=True, help="the run's per-sample evaluation records")
    p.add_argument("--pgd", type=_typed_json("PgdJob", "pgd"), required=True,
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

    p = sub.add_parser("corruptions", parents=[common], help="per-sample CIFAR-10-C evaluation")
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



def _add_front_page(sub) -> None:
    p = sub.add_parser("front-page", help="the report's landing text: the finding, read from the results")
    p.add_argument("--classwise", default="results/tables/classwise.csv")
    p.add_argument("--reproduction", default="results/reproduction.md")
    p.add_argument("--preset", required=True, help="the preset the results were made with (named on the page)")
    p.add_argument("--figures", nargs="*", default=[], help="figure 2's PNGs: the PGD-AT panel is linked")
    p.add_argument("--categories", nargs="*", default=[], help="the report's categories, in the study's order")
    p.add_argument("--out", default="results/report_front.rst")
    p.set_defaults(func=cmd_front_page)


def _add_figure(sub) -> None:
    from study.figures.catalog import FIGURE_KINDS

    p = sub.add_parser("figure", help="draw one figure from the tables or the per-sample records")
    p.add_argument("kind", choices=list(FIGURE_KINDS), help="the figure kind (study/figures/catalog.py)")
    p.add_argument("--table", default=None, help="the table the kind draws (results/tables/*.csv)")
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


def _add_tables_and_figures(sub) -> None:
    p = sub.add_parser("tables", help="aggregate run records into results/tables")
    p.add_argument("--records", nargs="+", required=True, help="per-sample evaluation records (parquet)")
    p.add_argument("--epochs", nargs="*", default=[], help="epochs.csv files of the runs")
    p.add_argument("--out-dir", default="results/tables")
    p.add_argument("--metrics-dir", default=None,
                   help="also write the headline metrics here, one JSON file per model (results/metrics, for DVC); "
                        "the folder is the metrics' own: a JSON file of a model no longer in the records is removed")
    p.add_argument("--checks", nargs="*", default=[],
                   help="checks.json files of the runs: flagged evaluations are marked and not counted")
    p.set_defaults(func=cmd_tables)

    p = sub.add_parser("robustness-tables", help="FRL, CFP, confusion, attack and check tables")
    p.add_argument("--records", nargs="+", required=True)
    p.add_argument("--checks", nargs="*", default=[])
    p.add_argument("--corruptions", nargs="*", default=[], help="corruption records (study corruptions)")
    p.add_argument("--out-dir", default="results/tables")
    p.set_defaults(func=cmd_robustness_tables)

    p = sub.add_parser("reproduction", help="our numbers beside the published ones (results/reproduction.md)")
    _add_params_args(p)
    p.add_argument("--tables-dir", default="results/tables", help="folder of classwise.csv (study tables)")
    p.add_argument("--out", default="results/reproduction.md")
    p.set_defaults(func=cmd_reproduction)

    _add_front_page(sub)

    _add_figure(sub)

    p = sub.add_parser("features-figure", help="figure 12: models trained on constructed feature datasets")
    p.add_argument("--table", required=True, help="results/tables/classwise.csv")
    p.add_argument("--dataset", required=True)
    p.add_argument("--model", required=True, help="model trained on the constructed datasets")
    p.add_argument("--sources", nargs="+", required=True,
                   help="role=run_id of the source runs, e.g. standard=<run> robust=<run>")
    p.add_argument("--constructed", nargs="+", required=True, help="constructed prepared datasets")
    p.add_argument("--data", required=True, help="the original prepared dataset")
    p.add_argument("--out-stem", required=True)
    p.add_argument("--examples-stem", required=True)
    p.set_defaults(func=cmd_features_figure)

    p = sub.add_parser("manifest", help="write the manifest of all figures")
    p.add_argument("--out", required=True)
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_manifest)



def _add_zoo(sub) -> None:
    p = sub.add_parser("zoo-run", help="the run directory of a zoo model (names its weights file)")
    p.add_argument("--run-config", type=_json_arg, required=True, help="the zoo run's config (study.config.zoo)")
    p.add_argument("--weights-dir", default=None, help="weights folder (default: $STUDY_WEIGHTS_DIR)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing weights into the folder first ($STUDY_WEIGHTS_URL_BASE, else robustbench's "
                        "own download; the workflow asks for it for its own folder data/zoo_weights only)")
    p.add_argument("--run-dir", required=True)
    p.set_defaults(func=cmd_zoo_run)

    p = sub.add_parser("zoo-table", help="the zoo's accuracies beside RobustBench's reported ones")
    p.add_argument("--classwise", required=True, help="the zoo's class-wise table (study tables)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_zoo_table)


def _add_bench(sub) -> None:
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
                        "headline; bf16: autocast, GPU only; evaluations are fp32); fp32 and bf16 together also "
                        "compare their class-wise robust accuracy (bf16_matches_fp32)")
    p.add_argument("--profile", action="store_true",
                   help="write a torch.profiler table of the PGD-10 AT step (per compile setting) beside --out")
    p.add_argument("--concurrent", type=int, default=None, metavar="K",
                   help="also time K training processes sharing the device against one alone")
    p.add_argument("--accuracy-epochs", type=int, default=2,
                   help="PGD-10 AT epochs before both sides' accuracy is compared (the last is timed)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_bench)


def cmd_front_page(args) -> int:
    from study.front_page import write_front_page

    path = write_front_page(args.classwise, args.reproduction, args.out, args.figures, args.categories, args.preset)
    print(f"wrote {path}")
    return 0


def cmd_reproduction(args) -> int:
    from study.reproduction import reproduction_report

    path = reproduction_report(args.tables_dir, _load(args), args.out)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_readme_numbers(args) -> int:
    from study.readme_numbers import readme_block, update_readme

    block = readme_block(Path(args.tables), Path(args.runs))
    if args.readme:
        update_readme(Path(args.readme), block)
        print(f"updated {args.readme}", file=sys.stderr)
    else:
        print(block)
    return 0


def _add_readme_numbers(sub) -> None:
    p = sub.add_parser("readme-numbers", help="the README's numbers from the results (its marked block)")
    p.add_argument("--tables", default="results/tables", help="folder of summary.csv, attacks.csv, checks.csv")
    p.add_argument("--runs", default="results/runs", help="run folders (their meta.json: commit and date)")
    p.add_argument("--readme", default=None, help="rewrite this file's marked block (default: print the block)")
    p.set_defaults(func=cmd_readme_numbers)


def cmd_comparisons(args) -> int:
    from study.config.comparisons import comparisons_markdown, rewrite_section
    from study.io import atomic_write_text

    section = comparisons_markdown(args.params, args.presets_dir)
    if args.write:
        doc = Path(args.doc)
        atomic_write_text(doc, rewrite_section(doc.read_text(), section))
        print(f"wrote {doc}", file=sys.stderr)
    else:
        print(section, end="")
    return 0


def _add_comparisons(sub) -> None:
    p = sub.add_parser("comparisons", help="every compared pair of methods and its declared difference, per preset")
    p.add_argument("--params", default="params.yaml", help="the study's params.yaml")
    p.add_argument("--presets-dir", default="workflow/presets")
    p.add_argument("--doc", default="docs/methods.md", help="the file whose marked list --write rewrites")
    p.add_argument("--write", action="store_true", help="rewrite the marked list in --doc (default: print it)")
    p.set_defaults(func=cmd_comparisons)


class _Parser(argparse.ArgumentParser):
    """A bad argument gives one line (which argument, what it got, where the valid ones are),
    not the usage block: the last line of a job's log says what went wrong."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the arguments)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="study", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    common = _run_args()
    _add_plan_and_data(sub)
    _add_training(sub, common)
    _add_evaluation(sub, common)
    _add_tables_and_figures(sub)
    _add_zoo(sub)
    _add_bench(sub)
    _add_readme_numbers(sub)
    _add_comparisons(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, RuntimeError) as err:
        # Known failure modes (bad config, missing file, diverged run) get one clear line.
        # One line, whatever the message holds, so that a log's last line is the whole story.
        if os.environ.get("STUDY_TRACEBACK"):
            raise
        message = " ".join(str(err).split())
        print(f"study {args.command}: error: {message} (STUDY_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
