# All helper Python of the workflow: it maps the configured study onto files and command arguments.
# Science and the plan live in `study` (the plan: study.config; the figures: study.figures.catalog); the rules'
# own helpers (command-line words, wildcard constraints) are below, and the run summary is run_summary.py.
import copy
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Iterable, Mapping
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
from study.record_names import metrics_stem, record_name
from study.run_directory import training_setting

# ---- the words of a `study` command line and a rule's wildcard constraints, from values alone
# (no config, no path of the study)


def one_of(names: Iterable[str]) -> str:
    """A regex of exactly these names (one that never matches when there are none)."""
    return "|".join(re.escape(n) for n in sorted(names)) or r"(?!x)x"


def quoted_json(obj) -> str:
    return shlex.quote(json.dumps(obj, sort_keys=True))


def cli_options(options: Mapping) -> str:
    """`--name value...` of each option that has a value (a list gives several values)."""
    words = []
    for name, value in options.items():
        if value is not None:
            values = value if isinstance(value, list) else [value]
            words += [f"--{name.replace('_', '-')}", *(shlex.quote(str(v)) for v in values)]
    return " ".join(words)


def folder_of(name: str, of: str = "output") -> Callable:
    """A rule's param: the folder of its output (or input) file `name`, e.g. the --out-dir of a
    command that writes several tables, derived from the files rather than written twice."""
    if of == "input":
        return lambda wildcards, input: os.path.dirname(input[name])
    return lambda wildcards, output: os.path.dirname(output[name])


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
config.clear()
# the typed params go to every library call (PARAMS); the rules' own lookups read Snakemake's mapping
config.update(copy.deepcopy(dict(PARAMS.as_written)))

DATA, RESULTS = config["data"]["root"], "results"
# Every file that summarizes the preset (its tables, metrics, figures and their manifest, the
# reproduction report, the landing text, the run summary, the zoo's tables) lives in a folder of
# the preset's own, so that two presets never read or overwrite each other's; the runs, their
# evaluations, logs and benchmarks stay under RESULTS, keyed by their configuration, and are shared
# by every preset that plans the same run. The preset's name has a pattern in the schema.
# (not one of the shared folders' names, which it would clash with)
_SHARED = {"runs", "evaluations", "logs", "benchmarks", "zoo", "bench", "plots", "tables", "figures", "metrics"}
if config["preset"] is None or config["preset"] in _SHARED:
    raise WorkflowError(f"preset {config['preset']!r} cannot have a results folder of its own (results/"
                        f"{config['preset']} is shared by every preset): rename workflow/presets/{config['preset']}"
                        f".yaml; a preset's name may be any but {', '.join(sorted(_SHARED))}")
PRESET_RESULTS = f"{RESULTS}/{config['preset']}"
# The zoo's runs and their evaluations (records, checks, logs) live apart from the trained runs':
# the figures stage makes them, and every file a DVC stage writes is its own out (dvc.yaml).
ZOO_ROOT = f"{RESULTS}/zoo"
FRONT_PAGE = f"{PRESET_RESULTS}/report_front.rst"
FIGURES_DIR = f"{PRESET_RESULTS}/figures"  # a folder per figure, and the manifest `all`
REPRODUCTION = f"{PRESET_RESULTS}/reproduction"  # .md and .html
# (the jobs that summarize the preset write their logs and benchmarks under PRESET_RESULTS too)
# what the user's targets name: the preset selected's manifest and reproduction report (figures.smk)
SELECTED_FIGURES, SELECTED_REPRODUCTION = f"{RESULTS}/figures/all", f"{RESULTS}/reproduction.md"
PLAN = plan_runs(PARAMS)
try:  # a --config value of the train section that a run's own settings override: refused, not skipped
    check_train_overrides(PARAMS, coerce_overrides(CONFIG_OVERRIDES))
except ConfigError as err:
    raise WorkflowError(str(err)) from None
ZOO = plan_zoo(PARAMS)  # zoo models (RobustBench, torchvision) as runs that are evaluated, never trained (zoo.smk)


# ---- the machine and the network, before any job (study.preflight; the lines printed in preflight.smk)
def _asked(flags, letter):
    """Whether Snakemake's command line holds one of `flags` (or `letter` among combined short flags)."""
    return any(a in flags or (letter and re.fullmatch(rf"-[A-Za-z]*{letter}[A-Za-z]*", a)) for a in sys.argv[1:])


# A job's own Snakemake process, and commands that run no job (a report, a listing), neither probe nor refuse;
# a dry run only reads the hosts' cached answers and warns of the price.
DRY_RUN = _asked({"--dry-run", "--dryrun", "--dry_run"}, "n")
def _on_this_machine():
    try:
        return workflow.cores is not None  # None (or an error) under a cluster executor: its nodes' price
    except WorkflowError:
        return False


RUNS_JOBS = _on_this_machine() and not (workflow.remote_exec or workflow.subprocess_exec or _asked(
    {"--report", "--list", "--list-rules", "--summary", "--detailed-summary", "--lint", "--unlock", "--touch",
     "--cleanup-metadata", "--list-target-rules", "--dag", "--rulegraph", "--filegraph"}, "l"))
# a plan priced over a week on this machine: refused in one line (a dry run: the same line, as a warning)
if RUNS_JOBS and (PRICE_REFUSAL := price_refusal(PARAMS, PLAN, ZOO, workflow.basedir)):
    print(f"{'warning (dry run): the run would be ' if DRY_RUN else ''}{PRICE_REFUSAL}", file=sys.stderr)
    if not DRY_RUN:
        sys.exit(1)
# a dataset or zoo model whose host does not answer: out of the plan, one line each (UNREACHABLE)
PRESET_PLAN = PLAN  # the preset's plan, checked whole (constructions) before parts are left out
PLAN, ZOO, UNREACHABLE = reachable_plan(PARAMS, PLAN, ZOO, workflow.basedir, probe=RUNS_JOBS and not DRY_RUN)
RUNS = {run.run_id: run for run in PLAN + ZOO}


def mitigation_controls(methods):
    """Each of figure 13's methods' control among them, from the configuration planned here (its
    --config values included)."""
    return {m: present_baseline(PARAMS, m, methods) for m in methods}


_PLANNED = {r.run_id for r in PLAN}
# a construction whose source run is left out (its dataset unreachable) is left out with it
CONSTRUCTIONS = {c.name: c for c in constructions(PARAMS, PRESET_PLAN)
                 if c.source_run.run_id in _PLANNED} if config.get("features") else {}
ROBUSTNESS = config["robustness"]


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
    root=f"{re.escape(RESULTS)}|{re.escape(ZOO_ROOT)}",


def config_overrides_arg():
    """`--config-overrides JSON` of a `study` command that loads params.yaml (empty without any)."""
    return f"--config-overrides {quoted_json(CONFIG_OVERRIDES)}" if CONFIG_OVERRIDES else ""


def lookup(table, name, what):
    """table[name], or an error that names the valid ones."""
    if name not in table:
        raise WorkflowError(f"{what} {name!r} is not part of preset {config['preset']!r}; valid: "
                            f"{', '.join(map(str, table)) or 'none'}")
    return table[name]


# ---------------------------------------------------------------- data and runs
def prepared_file(dataset, variant):
    return f"{DATA}/prepared/{prepared_name(dataset, variant)}.pt"

def data_mirror():
    """The local mirror: $STUDY_DATA_MIRROR when set (a user's explicit choice), else data.mirror."""
    return configured_mirror(PARAMS.data.mirror)

def source_args(wildcards):
    """Where `study prepare` finds a dataset: the local mirror first; synthetic data's parameters."""
    synthetic = json.dumps(config["data"]["synthetic"], sort_keys=True)
    return cli_options({"mirror": data_mirror(),
                        "synthetic": synthetic if wildcards.get("dataset") == "synthetic" else None})

def construction_of(wildcards):
    return lookup(CONSTRUCTIONS, wildcards.construction, "construction")

def run_of(wildcards):
    return lookup(RUNS, wildcards.run_id, "run (`study plan` lists them)")

ZOO_IDS = {r.run_id for r in ZOO}

def run_root(run_id):
    """Where a run's folders are: the zoo's own (ZOO_ROOT) for a zoo model, else results."""
    return ZOO_ROOT if run_id in ZOO_IDS else RESULTS

def run_dir(run_id):
    return f"{run_root(run_id)}/runs/{run_id}"

def run_model(checkpoint_file):
    """Input function: a run's model file (the zoo's under ZOO_ROOT, whatever the job's `root`)."""
    return lambda w: f"{run_dir(w.run_id)}/{checkpoint_file}"

def run_data(wildcards):
    run = run_of(wildcards)
    con = run.trained.constructed if run.trained is not None else None
    return f"{DATA}/constructed/{con.kind}-{con.key}.pt" if con else prepared_file(run.dataset, run.variant)

# (keeps model_best.pt, keeps model_published.pt) -> ids of those runs: the training rule of
# each combination declares exactly its files (train.smk)
KEPT_CHECKPOINTS = {}
for _run in PLAN:
    _kept = (bool(_run.trained.validation), bool(_run.trained.published_selection))
    KEPT_CHECKPOINTS.setdefault(_kept, []).append(_run.run_id)

def parent_checkpoint(wildcards):
    """The parent's checkpoint a fine-tuning method (FRL) starts from, as the run config names it
    (init_checkpoint): its best on validation (model_best.pt), or its last; None without a parent."""
    run = run_of(wildcards)
    name = "model_best.pt" if run.trained is not None and run.trained.init_checkpoint == "best" else "model.pt"
    return f"{run_dir(run.init_from)}/{name}" if run.init_from else None

def run_parent_model(wildcards):
    """The file `--init-from` reads, an input of the run's training job."""
    return [path] if (path := parent_checkpoint(wildcards)) else []

def init_from_arg(wildcards):
    return f"--init-from {shlex.quote(path)}" if (path := parent_checkpoint(wildcards)) else ""

# ---------------------------------------------------------------- model jobs' share of the machine
def _gpu_slots():
    """The profile's gpu_slots (`resources: gpu_slots: K`): K model jobs share the GPU; 1 if unset."""
    slots = workflow.global_resources.get("gpu_slots")
    slots = getattr(slots, "value", slots)
    return slots if isinstance(slots, int) and slots > 0 else 1


def _cores():
    try:
        return workflow.cores  # --cores (all: the machine's); None under a cluster executor
    except WorkflowError:
        return None


GPU_SLOTS = _gpu_slots()
# Every model rule's `threads:` (train, evaluate, check, corruptions, construct):
# --cores / gpu_slots, so K slots run K jobs at once (a profile's max-threads still caps it).
MODEL_THREADS = resources_estimate.slot_threads(_cores(), GPU_SLOTS)
# What each job's `study` process reads (study.device.share_gpu): how many jobs share the GPU, so
# that it takes 1/K of the GPU's memory (set_per_process_memory_fraction; STUDY_GPU_MEMORY_FRACTION
# overrides). Its torch.compile workers follow its --threads {threads} (study.device.set_threads).
os.environ.update({"STUDY_GPU_SLOTS": str(GPU_SLOTS)})


def gpu_resources(mem_mb, runtime):
    """The resources of each job that runs a model (train, evaluate, check, corruptions, construct:
    `**gpu_resources(...)`): one GPU, shared by gpu_slots jobs (one slot each; the profiles' limits), and
    the job's memory and minutes (numbers or functions of the wildcards)."""
    return {"gpu": 1, "gpu_slots": 1, "mem_mb": mem_mb, "runtime": runtime}


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
# One evaluate job per run and checkpoint writes the records of all its evaluations in one
# process (torch's import and the model's load once): <evaluation>.parquet (last checkpoint),
# <evaluation>@best.parquet (best on validation), <evaluation>@published.parquet (the published
# protocol's). A sharded evaluation of the last checkpoint runs a job per shard,
# shards/<evaluation>/<i>-of-<n>.parquet, joined by merge_shards.
EVALUATED = {e for run in PLAN + ZOO for e in run.evaluations}
SHARDED = {e for e in EVALUATED if e in PARAMS.evaluations and PARAMS.evaluations[e].shards > 1}
EVALUATION_SETS = {}  # (evaluations, checkpoint) -> ids of the runs whose evaluate job that is
for _run, _cp in ((r, c) for r in PLAN + ZOO for c in r.checkpoints):
    if _set := tuple(sorted(e for e in _run.evaluations if _cp != "last" or e not in SHARDED)):
        EVALUATION_SETS.setdefault((_set, _cp), []).append(_run.run_id)


def evaluations_dir(run_id, root=None):
    """A run's evaluations folder; `root` "{root}" makes it a rule's pattern (the wildcard `root`)."""
    return f"{root or run_root(run_id)}/evaluations/{run_id}"

def eval_file(run_id, evaluation, checkpoint="last", root=None):
    return f"{evaluations_dir(run_id, root)}/{record_name(evaluation, checkpoint)}.parquet"

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
    n = PARAMS.evaluations[wildcards.evaluation].shards
    return [f"{evaluations_dir(wildcards.run_id)}/shards/{wildcards.evaluation}/{i}-of-{n}.parquet"
            for i in range(n)]


TABLES = {name: f"{PRESET_RESULTS}/tables/{name}.csv" for name in ("classwise", "summary", "classwise_seeds", "epochs")}
# the headline metrics, a file per model of the plan (`dvc metrics show` prints a row per file)
METRICS_FILES = sorted({f"{PRESET_RESULTS}/metrics/"
                        f"{metrics_stem(r.dataset, r.run.model, r.run.method, training_setting(r.run)['train_data'])}.json"
                        for r in PLAN})
ROBUSTNESS_TABLES = {name: f"{PRESET_RESULTS}/tables/{name}.csv"
                     for name in ("frl", "cfp", "confusion", "attacks", "checks", "corruptions")}
ZOO_TABLES = {f"zoo_{n}": f"{PRESET_RESULTS}/zoo/tables/{n}.csv" for n in ("classwise", "robustbench", "checks", "corruptions")}


# ---------------------------------------------------------------- robustness (checks, CIFAR-10-C)
def runs_of_groups(groups):
    """Runs of these experiment groups, those trained on constructed data excluded."""
    return [r for r in PLAN if set(r.groups) & set(groups) and not (r.trained is not None and r.trained.constructed)]


# Runs in figures 3 and 11; runs checked (every checkpoint): those and every mitigation run;
# runs evaluated on CIFAR-10-C: those of the corruption groups trained on a dataset it corrupts.
_CC = ROBUSTNESS.get("corruptions") or {}
ROBUSTNESS_RUNS = runs_of_groups(ROBUSTNESS["groups"])
CHECKED_RUNS = (runs_of_groups(ROBUSTNESS["checks"]["groups"]) if "groups" in ROBUSTNESS["checks"] else
                ROBUSTNESS_RUNS + [r for r in PLAN if r not in ROBUSTNESS_RUNS and "mitigation" in r.kinds])
CORRUPTION_RUNS = [r for r in runs_of_groups(_CC.get("groups") or ROBUSTNESS["groups"])
                   if r.dataset in _CC.get("datasets", [])]
def checked_checkpoint(wildcards):
    """The checkpoint a check job checks: its `at` ('', '@best', '@published') names it."""
    return wildcards.at.removeprefix("@") or "last"

# the checks of every checked run and checkpoint: every table reads them (study.metrics.trust)
CHECK_FILES = [f"{evaluations_dir(r.run_id)}/{record_name('checks', c)}.json"
               for r in CHECKED_RUNS for c in r.checkpoints]
ZOO_CHECKED, ZOO_CORRUPTED, _ZF = zoo_checked(PARAMS, ZOO), zoo_corrupted(PARAMS, ZOO), (config.get("zoo") or {}).get("figure_evaluations", {})


def corruption_args(wildcards):  # the official archive: looked for in the mirror, then in data/raw
    return cli_options({"corruptions": _CC["names"], "severities": _CC["severities"], "seed": _CC["seed"],
                        "per_class": _CC.get("per_class") or None, "source": _CC.get("source", "auto"),
                        "raw_dir": f"{DATA}/raw", "mirror": data_mirror()})


# ---------------------------------------------------------------- figures
# The study's figures are the catalog's (study.figures.catalog.FIGURES: command, table read, panels,
# caption, report category, file names). A figure is drawn once per panel: its panel function returns
# {key: (run ids, options)} of the runs planned here; the key holds the fields of the panel's file
# name (`stem`), the options those of its `study` command; the files it reads (figure_inputs) are added here.

def features_panels():
    """Figure 12: the models trained on the constructed datasets, beside their source models."""
    if not CONSTRUCTIONS:
        return {}
    source = next(iter(CONSTRUCTIONS.values())).source_run
    key = (source.dataset, config["features"]["train"]["model"])
    roles = {f"{'robust' if c.kind == 'd_r' else 'standard'}={c.source_run.run_id}" for c in CONSTRUCTIONS.values()}
    return {key: ([], {"dataset": key[0], "model": key[1], "sources": sorted(roles),
                       "constructed": [f"{DATA}/constructed/{name}.pt" for name in CONSTRUCTIONS],
                       "data": prepared_file(source.dataset, source.variant),
                       "examples_stem": f"{FIGURES_DIR}/fig12_features/{'__'.join(key)}__examples"})}


STUDY = Study(plan=PLAN, robustness_runs=ROBUSTNESS_RUNS, corruption_runs=CORRUPTION_RUNS, zoo=ZOO,
              zoo_evaluations=_ZF, classwise_table=TABLES["classwise"], controls=mitigation_controls,
              features=features_panels)
FIGURE_PANELS, FIGURES_LEFT_OUT = {}, []  # a figure that needs runs left out (UNREACHABLE) is left out whole
for _fig in config["figures"]:
    try:
        FIGURE_PANELS[_fig] = lookup(FIGURES, _fig, "figure").panels(STUDY)
    except ValueError as err:
        if not UNREACHABLE:
            raise WorkflowError(f"preset {config['preset']!r}: {err}") from None
        FIGURE_PANELS[_fig] = {}
        FIGURES_LEFT_OUT.append(_fig)
STEM_FIELDS = {fig: re.findall(r"{(\w+)}", spec.stem) for fig, spec in FIGURES.items()}
# The report's categories in the study's order (its first figure's number; the reproduction table
# last), those this preset's results fill numbered in that order: the report lists its
# categories alphabetically.
_DRAWN = {FIGURES[fig].category for fig in config["figures"] if FIGURE_PANELS[fig]}
REPORT_CATEGORIES = [c for c in dict.fromkeys(spec.category for spec in FIGURES.values()) if c in _DRAWN]
REPORT_CATEGORIES.append("Reproduction")


def report_category(name):
    """A category as the report shows it: its place in the study's order, then its name (a figure
    this preset does not draw has no result in the report, and no place)."""
    return f"{REPORT_CATEGORIES.index(name) + 1:02d} · {name}" if name in REPORT_CATEGORIES else name


def present_categories():
    """The report's categories that this preset's results fill, in the study's order."""
    return [report_category(c) for c in REPORT_CATEGORIES]


def figure_files(fig):
    """The PNG and PDF files of every panel of a configured figure (the manifest lists them)."""
    suffixes = [".png", ".pdf", *(s for _, s, _ in FIGURES[fig].extra if s.endswith((".png", ".pdf")))]
    names = [FIGURES[fig].stem.format(**dict(zip(STEM_FIELDS[fig], key))) for key in FIGURE_PANELS[fig]]
    return [f"{FIGURES_DIR}/{fig}/{name}{suffix}" for name in names for suffix in suffixes]


# The figures' PNGs in a folder of their own, the one DVC draws as image plots (dvc.yaml):
# the figures' folder also holds PDFs, CSVs and the manifest, which `dvc plots show` cannot render.
FIGURE_IMAGES = f"{PRESET_RESULTS}/figure_images"


def figure_images():
    """{PNG of FIGURES_DIR: its copy under FIGURE_IMAGES} of every configured figure."""
    return {f: f"{FIGURE_IMAGES}/{Path(f).relative_to(FIGURES_DIR).as_posix()}"
            for fig in config["figures"] for f in figure_files(fig) if f.endswith(".png")}


def figure_outputs(fig):
    """A figure rule's outputs: its PNG (in the report, with its caption and category), PDF and extras."""
    spec, fields = FIGURES[fig], STEM_FIELDS[fig]
    stem = f"{FIGURES_DIR}/{{fig}}/{spec.stem}"

    def in_report(path, caption, label):
        return report(path, caption=f"../report/{caption}.rst", category=report_category(spec.category),
                      subcategory="{dataset}" if "dataset" in fields else None,
                      labels={"figure": label, **{f: f"{{{f}}}" for f in fields if f != "dataset"}})
    out = {"png": in_report(f"{stem}.png", spec.caption, "{fig}"), "pdf": f"{stem}.pdf"}
    for name, suffix, caption in spec.extra:
        out[name] = in_report(stem + suffix, caption, f"{{fig}} ({name})") if caption else stem + suffix
    return out


def figure_panel(wildcards):
    """The options of the panel a figure job draws, the files it reads among them."""
    spec, key = FIGURES[wildcards.fig], tuple(wildcards[f] for f in STEM_FIELDS[wildcards.fig])
    figure_panels = lookup(FIGURE_PANELS, wildcards.fig, "figure (params figures)")
    ids, options = lookup(figure_panels, key, f"{wildcards.fig} panel")
    if spec.reads == "records":
        return {"records": [eval_file(rid, ev) for rid in ids for ev in RUNS[rid].evaluations], **options}
    return {"table": {**TABLES, **ROBUSTNESS_TABLES, **ZOO_TABLES}[spec.reads], **options}


def figure_inputs(wildcards):
    return {k: v for k, v in figure_panel(wildcards).items() if k in ("table", "records", "constructed", "data", "reference")}


def figure_args(wildcards, output):
    """`study` arguments of a figure job: the figure's command, the panel's options, the out stem."""
    return f"{FIGURES[wildcards.fig].command} {cli_options(figure_panel(wildcards))} --out-stem {shlex.quote(output.png[:-4])}"


# ---------------------------------------------------------------- bench
def bench_setting(wildcards):
    return lookup(config.get("bench", {}).get("settings", {}), wildcards.name, "bench setting (params bench.settings)")


# ---------------------------------------------------------------- a killed update, finished by the same command
# Snakemake remakes a missing file only for a target, or for a job that has to run anyway: a job
# killed during an update of a finished result set (its outputs removed before it started, the
# gathering job downstream up to date) would stay missing, the next run "Nothing to be done".
# Each gathering rule (the tables, the figures' manifest) reads a stamp of its own, touched here,
# at plan time, when one of its inputs is missing while its outputs exist: the rule's input has
# changed and it runs again, and with it every job that makes a missing input. The run
# summary lists what was found missing (REMADE).
STAMPS = Path(".snakemake/study-stamps") / config["preset"]  # the gathering rules are the preset's
REMADE = []


def _files(inputs):
    values = inputs.values() if isinstance(inputs, Mapping) else inputs
    for value in values:
        yield from ([value] if isinstance(value, str) else _files(value))


def gathered(name, inputs, outputs):
    """The stamp of gathering rule `name`, an input of it beside `inputs` (files, lists or a
    mapping of them): touched where an input is missing and every one of `outputs` exists."""
    stamp = STAMPS / f"{name}.stamp"
    if not stamp.exists():
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        os.utime(stamp, (0, 0))  # older than any output: a new stamp makes nothing run
    missing = [f for f in _files(inputs) if not os.path.exists(f)]
    if missing and all(os.path.exists(f) for f in _files(outputs)):
        # new content, not only a new time: Snakemake counts a newer input as changed only where
        # its checksum differs from the one it recorded when the job last ran
        stamp.write_text(f"{time.time_ns()}\n" + "\n".join(missing) + "\n")
        REMADE.extend(f for f in missing if f not in REMADE)
    return str(stamp)
