# The workflow's glue: the configured study mapped onto files and command arguments, in Snakemake's
# namespace. Science and the plan live in `study` (the plan: study.config; the figures: study.figures.catalog;
# the plan-side helpers, tested there: study.workflow_plan); the run summary is run_summary.py.
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from study import resources as resources_estimate
from study.config import (ConfigError, EvaluationSpec, configured_mirror, constructions, load_params, plan_runs,
                          prepared_name, present_baseline, resolve_evaluation)
from study.config.params import coerce_overrides
from study.config.reach import check_train_overrides
from study.config.zoo import plan_zoo, zoo_checked, zoo_corrupted, zoo_imagenet_options, zoo_weights_dir
from study.preflight import price_refusal, reachable_plan
from study.checkpoints import CHECKPOINT_FILES, CHECKPOINTS
from study.figures.catalog import FIGURES, Study
from study.record_names import record_name
from study import workflow_plan as wp
from study.workflow_plan import cli_options, folder_of, gpu_resources, one_of, quoted_json  # the rules' words too

_BASE = Path(workflow.basedir) / "workflow"

envvars:
    "PATH",

# The jobs find the project's own commands (`study`) beside the Python that runs Snakemake, however it was
# started: an active environment, .venv/bin/snakemake without one, `python -m snakemake` (study.stage, DVC)
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
# the values given with --config (DVC's -S, through study.stage): a job that loads params.yaml
# itself is given them too (config_overrides_arg), so it reads the configuration planned here
CONFIG_OVERRIDES = dict(workflow.config_settings.overwrite_config or {})
try:  # params.yaml < preset overlay < command-line --config (so `--config preset=demo x=y` works)
    PARAMS = load_params(Path(workflow.basedir) / "params.yaml",  # not `config`: --config clobbers its keys
                            overrides=CONFIG_OVERRIDES,
                            presets_dir=_BASE / "presets", schema_path=_BASE / "schemas/params.schema.yaml")
except ConfigError as err:
    raise WorkflowError(str(err)) from None
# the typed params are the one carrier: every rule and library call reads PARAMS, none Snakemake's mapping
config.clear()

DATA, RESULTS = PARAMS.data.root, "results"
try:  # what summarizes the preset lives in a folder of its own; the runs are shared (preset_results)
    PRESET_RESULTS = wp.preset_results(RESULTS, PARAMS.preset)
except ValueError as err:
    raise WorkflowError(str(err)) from None
# The zoo's runs and their evaluations (records, checks, logs) live apart from the trained runs':
# the figures stage makes them, and every file a DVC stage writes is its own out (dvc.yaml).
ZOO_ROOT = f"{RESULTS}/zoo"
FRONT_PAGE = f"{PRESET_RESULTS}/report_front.rst"
FIGURES_DIR = f"{PRESET_RESULTS}/figures"  # a folder per figure, and the manifest `all`
REPRODUCTION = f"{PRESET_RESULTS}/reproduction"  # .md and .html
# what the user's targets name: the preset selected's manifest and reproduction report (figures.smk)
SELECTED_FIGURES, SELECTED_REPRODUCTION = f"{RESULTS}/figures/all", f"{RESULTS}/reproduction.md"
try:  # a run the plan refuses (what its training needs of its config: study.config.requirements) is one line
    PLAN = plan_runs(PARAMS)
except ConfigError as err:
    raise WorkflowError(str(err)) from None
try:  # a --config value of the train section that a run's own settings override: refused, not skipped
    check_train_overrides(PARAMS, coerce_overrides(CONFIG_OVERRIDES))
except ConfigError as err:
    raise WorkflowError(str(err)) from None
ZOO = plan_zoo(PARAMS)  # zoo models (RobustBench, torchvision) as runs that are evaluated, never trained (zoo.smk)

# ---- the machine and the network, before any job (study.preflight; the lines printed in preflight.smk)
# A job's own Snakemake process, and commands that run no job (a report, a listing), neither probe nor refuse;
# a dry run only reads the hosts' cached answers and warns of the price.
def _cores():
    try:
        return workflow.cores  # --cores (all: the machine's); None (or an error) under a cluster executor
    except WorkflowError:
        return None

DRY_RUN = wp.asked(sys.argv[1:], wp.DRY_RUN_FLAGS, "n")
RUNS_JOBS = _cores() is not None and not (workflow.remote_exec or workflow.subprocess_exec
                                          or wp.asked(sys.argv[1:], wp.NO_JOB_FLAGS, "l"))
# a plan priced over a week on this machine: refused in one line (a dry run: the same line, as a warning)
if RUNS_JOBS and (PRICE_REFUSAL := price_refusal(PARAMS, PLAN, ZOO, workflow.basedir)):
    print(f"{'warning (dry run): the run would be ' if DRY_RUN else ''}{PRICE_REFUSAL}", file=sys.stderr)
    if not DRY_RUN:
        sys.exit(1)
# a dataset or zoo model whose host does not answer: out of the plan, one line each (UNREACHABLE)
PRESET_PLAN = PLAN  # the preset's plan, checked whole (constructions) before parts are left out
PLAN, ZOO, UNREACHABLE = reachable_plan(PARAMS, PLAN, ZOO, workflow.basedir, probe=RUNS_JOBS and not DRY_RUN)
RUNS = {run.run_id: run for run in PLAN + ZOO}
LAYOUT = wp.Layout(DATA, RESULTS, ZOO_ROOT, PRESET_RESULTS, frozenset(r.run_id for r in ZOO))

def mitigation_controls(methods):
    """Each of figure 13's methods' control among them, from the configuration planned here (its
    --config values included)."""
    return {m: present_baseline(PARAMS, m, methods) for m in methods}

_PLANNED = {r.run_id for r in PLAN}
# a construction whose source run is left out (its dataset unreachable) is left out with it
CONSTRUCTIONS = {c.name: c for c in constructions(PARAMS, PRESET_PLAN)
                 if c.source_run.run_id in _PLANNED} if PARAMS.features is not None else {}
ROBUSTNESS = PARAMS.robustness

wildcard_constraints:
    run_id=r"[A-Za-z0-9_.\-]+",
    evaluation=r"[A-Za-z0-9_]+",
    dataset=r"[a-z0-9]+",
    variant=r"[a-z0-9]+",
    # no "__" inside a name: it separates the fields of a figure's file name
    model=r"[a-z0-9]+(?:_[a-z0-9]+)*",
    method=r"[a-z0-9]+(?:_[a-z0-9]+)*",
    group=r"[A-Za-z0-9_]+",
    # the folder of a run's evaluations and their logs: the study's, or the zoo's (run_root)
    root=one_of([RESULTS, ZOO_ROOT]),

def config_overrides_arg():
    """`--config-overrides JSON` of a `study` command that loads params.yaml (empty without any)."""
    return f"--config-overrides {quoted_json(CONFIG_OVERRIDES)}" if CONFIG_OVERRIDES else ""

def planned(table, name, what):
    """table[name], or a WorkflowError of one line that names the valid ones."""
    try:
        return wp.planned_entry(table, name, what, PARAMS.preset)
    except wp.NotPlannedError as err:
        raise WorkflowError(str(err)) from None

# ---------------------------------------------------------------- data and runs (study.workflow_plan.Layout)
prepared_file, run_root, run_dir = LAYOUT.prepared_file, LAYOUT.run_root, LAYOUT.run_dir
evaluations_dir, eval_file = LAYOUT.evaluations_dir, LAYOUT.eval_file

def data_mirror():
    """The local mirror: $STUDY_DATA_MIRROR when set (a user's explicit choice), else data.mirror."""
    return configured_mirror(PARAMS.data.mirror)

def source_args(wildcards):
    """Where `study prepare` finds a dataset: the local mirror first; synthetic data's parameters."""
    synthetic = json.dumps(PARAMS.data.synthetic.set_fields(), sort_keys=True)
    return cli_options({"mirror": data_mirror(),
                        "synthetic": synthetic if wildcards.get("dataset") == "synthetic" else None})

def construction_of(wildcards):
    return planned(CONSTRUCTIONS, wildcards.construction, "construction")

def run_of(wildcards):
    return planned(RUNS, wildcards.run_id, "run (`study plan` lists them)")

def run_model(checkpoint_file):
    """Input function: a run's model file (the zoo's under ZOO_ROOT, whatever the job's `root`)."""
    return lambda w: f"{run_dir(w.run_id)}/{checkpoint_file}"

def run_data(wildcards):
    return LAYOUT.run_data(run_of(wildcards))

def run_parent_model(wildcards):
    """The parent's model file a fine-tuning run's training job reads (`--init-from`), if any."""
    return [path] if (path := LAYOUT.parent_model(run_of(wildcards))) else []

def init_from_arg(wildcards):
    return f"--init-from {shlex.quote(path)}" if (path := LAYOUT.parent_model(run_of(wildcards))) else ""

# ---------------------------------------------------------------- model jobs' share of the machine
# Every model rule's `threads:` (train, evaluate, check, corruptions, construct): --cores / gpu_slots, so
# K slots run K jobs at once; each job's `study` process takes 1/K of the GPU's memory (study.device.share_gpu).
GPU_SLOTS = wp.gpu_slots(workflow.global_resources.get("gpu_slots"))
MODEL_THREADS = resources_estimate.slot_threads(_cores(), GPU_SLOTS)
os.environ.update({"STUDY_GPU_SLOTS": str(GPU_SLOTS)})

def run_resource(estimate, **kwargs):
    """A resource of a run's job (study.resources: from the model's FLOPs, data size, epochs, attack steps)."""
    return lambda wildcards: estimate(run_of(wildcards).run, **kwargs)

# Training jobs start longest first, and a run that others fine-tune before any: its children,
# their evaluations and figure 13 wait on it (on two CPU cores, the demo's PGD-AT model).
FINE_TUNED = {r.init_from for r in PLAN if r.init_from}

def train_priority(wildcards):
    run = run_of(wildcards)
    return (1000 if run.run_id in FINE_TUNED else 0) + resources_estimate.train_minutes(run.run)

# ---------------------------------------------------------------- evaluations
# One evaluate job per run and checkpoint for all its evaluations; one per shard of a sharded evaluation
# of the last checkpoint, joined by merge_shards (study.workflow_plan.evaluation_sets)
SHARDED, EVALUATION_SETS = wp.evaluation_sets(PLAN + ZOO, PARAMS.evaluations)

def resolved_evaluation(wildcards, name=None):
    """As resolved for the run's dataset (per_dataset: MNIST's budget)."""
    dataset = run_of(wildcards).dataset if "run_id" in wildcards.keys() else None
    return resolve_evaluation(PARAMS, name or wildcards.evaluation, dataset=dataset)

def evaluation_args(evaluations):
    """`--evaluation JSON --out FILE` of each evaluation of an evaluate job."""
    return lambda w, output: " ".join(f"--evaluation {quoted_json(resolved_evaluation(w, e))} --out {shlex.quote(output[e])}"
                                      for e in evaluations)

def evaluate_runtime(evaluations, shards=1):
    # the evaluation typed where the workflow resolves it from params
    return lambda w: sum(resources_estimate.evaluate_minutes(run_of(w).run, EvaluationSpec.parse(resolved_evaluation(w, e)).config,
                                                             shards=shards) for e in evaluations)

def shard_files(wildcards):
    return LAYOUT.shard_files(wildcards.run_id, wildcards.evaluation, PARAMS.evaluations[wildcards.evaluation].shards)

TABLES = LAYOUT.tables(("classwise", "summary", "classwise_seeds", "epochs"))
METRICS_FILES = wp.metrics_files(PRESET_RESULTS, PLAN)
ROBUSTNESS_TABLES = LAYOUT.tables(("frl", "cfp", "confusion", "attacks", "checks", "corruptions"))
ZOO_TABLES = LAYOUT.tables(("classwise", "robustbench", "checks", "corruptions"), folder="zoo/tables", prefix="zoo_")

# ---------------------------------------------------------------- robustness (checks, CIFAR-10-C)
# Runs in figures 3 and 11; runs checked (every checkpoint); runs evaluated on CIFAR-10-C
_ROBUST = wp.robustness_runs(PLAN, ROBUSTNESS)
ROBUSTNESS_RUNS, CHECKED_RUNS, CORRUPTION_RUNS = _ROBUST.robustness, _ROBUST.checked, _ROBUST.corrupted

def checked_checkpoint(wildcards):
    """The checkpoint a check job checks: its `at` ('', '@best', '@published') names it."""
    return wildcards.at.removeprefix("@") or "last"

CHECK_FILES = [LAYOUT.check_file(r.run_id, c) for r in CHECKED_RUNS for c in r.checkpoints]
ZOO_CHECKED, ZOO_CORRUPTED, _ZF = zoo_checked(PARAMS, ZOO), zoo_corrupted(PARAMS, ZOO), (PARAMS.zoo.figure_evaluations.set_fields() if PARAMS.zoo is not None else {})

def corruption_args(wildcards):
    return cli_options(wp.corruption_options(ROBUSTNESS.corruptions, f"{DATA}/raw", data_mirror()))

# ---------------------------------------------------------------- figures (the catalog's, drawn once per panel)
def features_panels():
    return wp.features_panels(CONSTRUCTIONS, PARAMS.features.train.model, DATA, FIGURES_DIR) if CONSTRUCTIONS and PARAMS.features else {}

STUDY = Study(plan=PLAN, robustness_runs=ROBUSTNESS_RUNS, corruption_runs=CORRUPTION_RUNS, zoo=ZOO,
              zoo_evaluations=_ZF, classwise_table=TABLES["classwise"], controls=mitigation_controls,
              features=features_panels)
for _fig in PARAMS.figures:
    planned(FIGURES, _fig, "figure")
try:  # a figure that needs runs left out (UNREACHABLE) is left out whole
    FIGS = wp.FigurePlan.of(PARAMS.figures, STUDY, bool(UNREACHABLE), FIGURES_DIR, f"{PRESET_RESULTS}/figure_images")
except ValueError as err:
    raise WorkflowError(f"preset {PARAMS.preset!r}: {err}") from None
FIGURE_PANELS, FIGURES_LEFT_OUT, FIGURE_IMAGES = FIGS.panels, FIGS.left_out, FIGS.images_dir  # (DVC's image plots)
report_category, present_categories, figure_files, figure_images = (FIGS.category, FIGS.present_categories,
                                                                    FIGS.files, FIGS.images)

def figure_outputs(fig):
    return FIGS.outputs(fig, report)

def figure_panel(wildcards):
    """The options of the panel a figure job draws, the files it reads among them."""
    panels = planned(FIGURE_PANELS, wildcards.fig, "figure (params figures)")
    panel = planned(panels, tuple(wildcards[f] for f in wp.stem_fields(wildcards.fig)), f"{wildcards.fig} panel")
    return wp.panel_inputs(wildcards.fig, panel, {**TABLES, **ROBUSTNESS_TABLES, **ZOO_TABLES},
                           lambda rid: [eval_file(rid, ev) for ev in RUNS[rid].evaluations])

def figure_inputs(wildcards):
    return {k: v for k, v in figure_panel(wildcards).items() if k in ("table", "records", "constructed", "data", "reference")}

def figure_args(wildcards, output):
    """`study` arguments of a figure job: the figure's command, the panel's options, the out stem."""
    return f"{FIGURES[wildcards.fig].command} {cli_options(figure_panel(wildcards))} --out-stem {shlex.quote(output.png[:-4])}"

# ---------------------------------------------------------------- bench
def bench_setting(wildcards):
    return planned(PARAMS.bench.settings if PARAMS.bench is not None else {}, wildcards.name,
                   "bench setting (params bench.settings)").set_fields()

# ---------------------------------------------------------------- a killed update, finished by the same command
# (study.workflow_plan.touch_stamp); the run summary lists the inputs found missing (REMADE)
STAMPS = Path(".snakemake/study-stamps") / PARAMS.preset  # the gathering rules are the preset's
REMADE = []

def gathered(name, inputs, outputs):
    """The stamp of gathering rule `name`, an input of it beside `inputs` (files, lists or a mapping of them)."""
    stamp = STAMPS / f"{name}.stamp"
    REMADE.extend(f for f in wp.touch_stamp(stamp, inputs, outputs) if f not in REMADE)
    return str(stamp)
