# The headline command on a fresh machine (docs/reliability.md): before any job runs, one screen
# says what the plan costs (study.cost: device-hours and disk) and needs (study.preflight:
# present, to be downloaded, missing and how to supply it); a part whose hand-placed input is missing (ImageNet's validation set: its zoo models and
# their panels) is left out of the plan with one line, and comes back once the input is placed
# (the plan looks again on every invocation). The run ends, failed or not, with
# results/<preset>/run_summary.md (run_summary.py, beside this file): what was made, what was left out,
# which job failed and the error line its log ends with. The default profile (profiles/default)
# keeps independent jobs going past a failure.
import os
import sys

from study.preflight import left_out_lines, preflight, price_line, render

# Snakemake puts an included file's folder on sys.path: the module beside this file.
from run_summary import failed_jobs, write_summary

LEFT_OUT = left_out_lines(config, ZOO)
for _line in LEFT_OUT:  # at plan time, dry runs included: the plan is smaller than the preset says
    print(_line, file=sys.stderr)
if REMADE:  # (common.smk, gathered): outputs of a finished result set that a killed job left missing
    print(f"found missing from a finished result set: {len(REMADE)} files ({REMADE[0]}"
          f"{f' (+{len(REMADE) - 1} more)' if len(REMADE) > 1 else ''}): the jobs that make them run again",
          file=sys.stderr)
# a DVC stage (python -m study.stage --summary) names its own file, which it declares as an out
RUN_SUMMARY = os.environ.get("STUDY_RUN_SUMMARY") or f"{PRESET_RESULTS}/run_summary.md"


def run_summary(log, ok):
    """Write and print the run summary; `log`: Snakemake's log files, read for its failed jobs."""
    figures = {fig: figure_files(fig) for fig in config["figures"]}
    logs = [log] if isinstance(log, str) else list(log or [])
    text = write_summary(RUN_SUMMARY, figures, [*TABLES.values(), *ZOO_TARGETS], LEFT_OUT, failed_jobs(logs),
                         preset=config["preset"], ok=ok, remade=REMADE)
    print(f"\n{text}(written to {RUN_SUMMARY})", file=sys.stderr)


onstart:
    print(render(config, preflight(config, PLAN, ZOO), len(PLAN), len(ZOO), price_line(config, PLAN, ZOO)),
          file=sys.stderr)


onsuccess:
    run_summary(log, ok=True)


onerror:
    run_summary(log, ok=False)
