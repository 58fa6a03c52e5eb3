"""A DVC stage's command: `python -m study.stage TARGET...` runs Snakemake on the targets with

* the profile that suits the machine: workflow/profiles/local (the GPU's) where torch sees a
  CUDA device, workflow/profiles/cpu otherwise (`--profile` names another);
* the values params.yaml sets (where it differs from the published settings: `dvc exp run -S`,
  an applied experiment, an edit) as `--config` overrides, which load_params merges after the
  preset as it merges them for plain Snakemake (study.config.overrides), so that the run trains
  what `dvc exp show` records;
* `STUDY_FRONT_END=dvc`: the records of the finished jobs go into git's index (study.versions)
  and a refusal names its ways out as `-S` options. `--report FILE` then writes Snakemake's
  report of the targets and records it.

It prints one line saying both, then Snakemake's output; a configuration it cannot run is one
line on stderr and exit status 2. `--write-params FILE` (the `resolve` stage of dvc.yaml) writes
the configuration that runs, params.yaml with its preset and the values set for this run merged,
under `run:`, so that the stages after it declare what ran as their params (`dvc exp show`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from study.config.core import ConfigError
from study.config.overrides import config_arguments, describe, run_overrides
from study.config.params import load_params
from study.config.reach import check_train_overrides
from study.config.types import Params

PROFILES = Path("workflow/profiles")


@dataclass(frozen=True)
class Profile:
    path: Path
    why: str  # what chose it, for the stage's line


@dataclass(frozen=True)
class StageRun:
    targets: tuple[str, ...]
    profile: Profile
    overrides: dict  # the values of params.yaml set for this run (nested, as load_params merges them)

    def argv(self) -> list[str]:
        """Snakemake's command line: the targets before `--config`, whose values run to the end."""
        config = config_arguments(self.overrides)
        # Snakemake of the Python running this (whose bin folder the rules put first on the jobs' PATH,
        # common.smk): DVC's shell may have another `snakemake`, or none, on its PATH
        return [sys.executable, "-m", "snakemake", "--profile", str(self.profile.path), *self.targets,
                *(["--config", *config] if config else [])]

    def summary(self) -> str:
        values = ", ".join(describe(self.overrides)) or "none (params.yaml as committed)"
        return f"study.stage: profile {self.profile.path} ({self.profile.why}); values set for this run: {values}"


def machine_profile(profiles: Path = PROFILES) -> Profile:
    """local where torch sees a CUDA device (the GPU's gpu_slots), cpu otherwise (one thread per job)."""
    import torch

    if torch.cuda.is_available():
        return Profile(profiles / "local", f"CUDA device {torch.cuda.get_device_name(0)}")
    return Profile(profiles / "cpu", "no CUDA device")


def _profile_arg(text: str) -> Profile:
    path = Path(text)
    if not (path / "config.yaml").is_file():
        valid = sorted(p.as_posix() for p in PROFILES.glob("*") if (p / "config.yaml").is_file())
        raise argparse.ArgumentTypeError(f"{text!r} is no Snakemake profile (no config.yaml); "
                                         f"valid: {', '.join(valid)}")
    return Profile(path, "--profile")


def build_parser() -> argparse.ArgumentParser:
    """The arguments of `python -m study.stage` (dvc.yaml's commands)."""
    parser = argparse.ArgumentParser(prog="python -m study.stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help="Snakemake targets (rules or files)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="the study's params.yaml")
    parser.add_argument("--profile", type=_profile_arg, default=None,
                        help="a Snakemake profile folder (default: local with a CUDA device, else cpu)")
    parser.add_argument("--dry-run", action="store_true", help="print the Snakemake command instead of running it")
    parser.add_argument("--summary", type=Path, default=None,
                        help="the run summary's file (the stage's own declared out; "
                             "default: results/<preset>/run_summary.md)")
    parser.add_argument("--report", type=Path, default=None, metavar="FILE",
                        help="then Snakemake's report of the targets, written to FILE and recorded (study.versions)")
    parser.add_argument("--outdates", nargs="+", default=[], metavar="PATH",
                        help="files or folders a later stage makes from what this one changes: their DVC records "
                             "(study.versions) are dropped before the run, so that an experiment that stops here "
                             "holds none of another configuration's")
    parser.add_argument("--write-params", type=Path, default=None, metavar="FILE",
                        help="write the resolved configuration (params.yaml, preset, values set for this run) here")
    return parser


#: the resolved file's one top-level key: its names (run.preset, run.train.batch_size) are not
#: params.yaml's, which DVC always lists too, so `dvc exp show` prints them without a file's name
RESOLVED_KEY = "run"


def write_resolved(path: Path, params: Params) -> None:
    """The configuration that runs, as YAML, under RESOLVED_KEY: the file that the stages after the
    first declare as params."""
    import yaml

    from study.io import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Written by `python -m study.stage --write-params` (dvc.yaml's params stage): params.yaml, its\n"
              "# preset and the values set for this run, merged. Edit params.yaml, not this file.\n")
    atomic_write_text(path, header + yaml.safe_dump({RESOLVED_KEY: params.set_fields()}, sort_keys=False, width=120))


def restore_committed_params(params: Path) -> str | None:
    """Under `dvc exp run` (which writes the values of -S into params.yaml before the stages run,
    dropping its comments, and leaves the file so when the run fails), params.yaml put back as
    committed at the experiment's baseline; the baseline, or None outside an experiment (a
    user's own edit is theirs to fix, and is left as it is)."""
    from study.config.overrides import BASELINE_ENV
    from study.io import atomic_write_text

    rev = os.environ.get(BASELINE_ENV)
    if not rev:
        return None
    proc = subprocess.run(["git", "show", f"{rev}:./{params.name}"], cwd=params.resolve().parent,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    atomic_write_text(params, proc.stdout)
    return rev


def _refuse(err: ConfigError, params: Path, overrides: dict | None) -> int:
    rev = restore_committed_params(params)
    values = ", ".join(describe(overrides or {})) or "none"
    restored = (f"; {params} was put back as committed at {rev[:12]} (dvc exp run had written the values set "
                f"for this run into it: {values}): run `dvc exp run` again with valid values") if rev else ""
    print(f"study.stage: {' '.join(str(err).split())}{restored}", file=sys.stderr)
    return 2


def _snakemake(argv: list[str], env: dict) -> int:
    """Snakemake's exit status; on Ctrl-C (which reaches Snakemake too, in the same process
    group) Snakemake is given time to stop its jobs and release its lock, then 130."""
    proc = subprocess.Popen(argv, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        try:
            proc.wait(timeout=60)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        raise


def _report(run: StageRun, path: Path, env: dict) -> int:
    """Snakemake's report of the targets (the front page, every figure with its caption), then its
    record: no job makes it, so no Snakemake run records it (study.versions)."""
    rc = _snakemake([*run.argv()[:5], "--report", str(path), *run.argv()[5:]], env)
    if rc == 0 and Path(".dvc").is_dir():
        from study.versions import record

        record(Path("."), stage=True, also=[str(path)])
    return rc


def _run(args: argparse.Namespace) -> int:
    overrides = None
    try:
        overrides = run_overrides(args.params)
        run = StageRun(tuple(args.targets), args.profile or machine_profile(), overrides)
        # the configuration as the Snakefile will load it, checked before anything runs
        root = args.params.resolve().parent
        params = load_params(args.params, overrides, root / "workflow/presets",
                             root / "workflow/schemas/params.schema.yaml")
        check_train_overrides(params, overrides)
    except ConfigError as err:
        return _refuse(err, args.params, overrides)
    if args.write_params:
        write_resolved(args.write_params, params)
        print(f"study.stage: wrote {args.write_params} (preset {params.preset}; values set for this run: "
              f"{', '.join(describe(overrides)) or 'none'})", flush=True)
    if not args.targets:
        return 0
    print(run.summary(), flush=True)
    if args.dry_run:
        print(" ".join(run.argv()))
        return 0
    # STUDY_FRONT_END: the records of what ran go into git's index (study.versions: the experiment's commit holds
    # them), and a refusal names its ways out as -S options (study.preflight)
    env = {**os.environ, "STUDY_FRONT_END": "dvc", **({"STUDY_RUN_SUMMARY": str(args.summary)} if args.summary else {})}
    recording = Path(".dvc").is_dir()
    if recording and args.outdates:
        from study.versions import drop_under

        drop_under(Path("."), args.outdates, stage=True)
        # the records written when Snakemake ends leave them out too (preflight.smk)
        env["STUDY_OUTDATES"] = os.pathsep.join(args.outdates)
    rc = _snakemake(run.argv(), env)
    if rc == 0 and args.report:
        rc = _report(run, args.report, env)
    elif rc == 0 and recording:
        # Snakemake records its jobs when it ends, but calls no handler when it had nothing to do:
        # the records an earlier stage dropped of jobs still up to date come back here (--outdates)
        from study.versions import record

        record(Path("."), stage=True, skip=args.outdates)
    if rc == 0 and args.summary and not args.summary.exists():
        # Snakemake calls no onsuccess handler when it has nothing to do; the stage's summary (a
        # declared out, which DVC removed before the run) still says what the run found
        from study.io import atomic_write_text

        atomic_write_text(args.summary, f"# Run summary\n\n{' '.join(args.targets)}: nothing to be done, "
                                        "every output was up to date.\n")
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.targets and not args.write_params:
        parser.error("give Snakemake targets, --write-params FILE, or both")
    try:
        return _run(args)
    except KeyboardInterrupt:
        print("study.stage: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
