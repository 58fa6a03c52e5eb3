# The headline command on a fresh machine (docs/reliability.md): before any job runs, one screen
# says what the plan costs (study.cost: device-hours and disk) and needs (study.preflight:
# present, to be downloaded, missing and how to supply it); a part whose hand-placed input is missing (ImageNet's validation set: its zoo models and
# their panels) is left out of the plan with one line, and comes back once the input is placed
# (the plan looks again on every invocation); so is a dataset or zoo model whose host does not answer
# (study.preflight.reachable_plan, in common.smk, where a plan priced over a week on this machine is
# refused before anything else). The run ends, failed or not, with
# results/<preset>/run_summary.md (run_summary.py, beside this file): what was made, what was left out,
# which job failed and the error line its log ends with. The default profile (profiles/default)
# keeps independent jobs going past a failure.
import os
import sys
from pathlib import Path

from study.preflight import item_lines, left_out_lines, left_out_parts, preflight, price_line, render

# Snakemake puts an included file's folder on sys.path: the module beside this file.
from run_summary import failed_jobs, write_summary

# what the plan leaves out: a host that does not answer (UNREACHABLE, common.smk), a hand-placed input
LEFT_OUT = [*item_lines(UNREACHABLE), *left_out_lines(PARAMS, ZOO)]
if FIGURES_LEFT_OUT:  # (common.smk) figures drawn only from runs left out
    LEFT_OUT.append(f"left out of the plan (offline): {len(FIGURES_LEFT_OUT)} figures whose runs are all left out "
                    f"({', '.join(FIGURES_LEFT_OUT)})"[:220])
LEFT_OUT_PARTS = [*UNREACHABLE, *left_out_parts(PARAMS, ZOO)]
for _line in LEFT_OUT:  # at plan time, dry runs included: the plan is smaller than the preset says
    print(_line, file=sys.stderr)
if UNREACHABLE and not PLAN and not ZOO and RUNS_JOBS and not DRY_RUN:  # (common.smk) nothing is left to run
    print(f"stopped: every run of preset {PARAMS.preset} is left out of the plan (above): supply what it "
          "names and run the same command again", file=sys.stderr)
    sys.exit(1)
if REMADE:  # (common.smk, gathered): outputs of a finished result set that a killed job left missing
    print(f"found missing from a finished result set: {len(REMADE)} files ({REMADE[0]}"
          f"{f' (+{len(REMADE) - 1} more)' if len(REMADE) > 1 else ''}): the jobs that make them run again",
          file=sys.stderr)
# a DVC stage (python -m study.stage --summary) names its own file, which it declares as an out
RUN_SUMMARY = os.environ.get("STUDY_RUN_SUMMARY") or f"{PRESET_RESULTS}/run_summary.md"


def run_summary(log, ok):
    """Write and print the run summary; `log`: Snakemake's log files, read for its failed jobs."""
    figures = {fig: figure_files(fig) for fig in PARAMS.figures}
    logs = [log] if isinstance(log, str) else list(log or [])
    text = write_summary(RUN_SUMMARY, figures, [*TABLES.values(), *ZOO_TARGETS], LEFT_OUT, failed_jobs(logs),
                         preset=PARAMS.preset, ok=ok, remade=REMADE, parts=LEFT_OUT_PARTS)
    print(f"\n{text}(written to {RUN_SUMMARY})", file=sys.stderr)


onstart:
    print(render(PARAMS, [*preflight(PARAMS, PLAN, ZOO), *UNREACHABLE], len(PLAN), len(ZOO),
                 price_line(PARAMS, PRESET_PLAN, ZOO)),  # the preset's price: a part left out may come back
          file=sys.stderr)


def record_versions():
    """DVC's record of every finished job (study.versions: versions/*.dvc), whichever front end ran
    Snakemake; none where the project is no DVC repository. Under `dvc exp run` / `dvc repro`
    (python -m study.stage) the records are added to git's index, so that the experiment's commit
    holds them; under plain Snakemake where DVC's core.autostage says so."""
    if DRY_RUN or not os.path.isdir(".dvc"):
        return
    from study.versions import record

    try:
        # (STUDY_OUTDATES: what a later DVC stage makes, left out of this stage's records: study.stage)
        done = record(Path("."), stage=True if os.environ.get("STUDY_FRONT_END") == "dvc" else None,
                      skip=[p for p in os.environ.get("STUDY_OUTDATES", "").split(os.pathsep) if p])
    except Exception as err:  # the results are made; a record missing leaves them untouched by DVC
        print(f"DVC's records (versions/) not written: {' '.join(str(err).split())}; the results are "
              "complete: `study record` writes them", file=sys.stderr)
        return
    print(f"DVC's records: {len(done.records)} jobs, {done.files} files (versions/)"
          + (f"; {len(done.dropped)} dropped (their inputs changed since)" if done.dropped else ""),
          file=sys.stderr)


onsuccess:
    run_summary(log, ok=True)
    record_versions()


onerror:
    run_summary(log, ok=False)
    record_versions()
