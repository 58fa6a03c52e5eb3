"""`make test-slurm`: the SLURM profile on a real single-node Slurm cluster, against a local run.

Starts MUNGE and a one-node Slurm cluster (slurmctld, slurmd) of this machine in a temporary
folder (its own slurm.conf, gres.conf with count-only fake GPUs, state, spool, sockets, ports),
runs the ci preset's DAG through workflow/profiles/slurm with the Snakemake SLURM executor
plugin in a copy of the project, runs the same targets with workflow/profiles/cpu in a second
copy, and compares the records: every per-sample evaluation parquet file and every run's
epochs.csv must hold equal values (timing columns and meta.json aside). It prints the sbatch
lines that the plugin submitted (a `sbatch` shim on PATH logs them) and stops every daemon it
started, also on failure or Ctrl-C.

What the test changes of the real profile, and why: job states come from `squeue` (this
cluster has no accounting database for `sacct`), the first status check comes after 2 s, not
40 s (short jobs), and every job gets one thread (`--max-threads 1`, as the cpu profile: a
2-core machine, and a CPU result is the same only at the same thread count). The partitions are
the profile's own (partitions.yaml), created here with those names.

    .venv/bin/python tools/slurm/check.py [--keep] [--targets T ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROFILE = ROOT / "workflow/profiles/slurm"
PROJECT_FILES = ["Snakefile", "params.yaml", "environment.yml", "workflow", ".gitignore"]
DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
INSTALL = "test-slurm needs Slurm and MUNGE: apt-get install slurm-wlm munge (as root)"
# columns of a record that measure time, not results
TIMING = re.compile(r"(^|_)(time|times|seconds|secs?|duration|elapsed|timestamp|date|wall|started|finished)($|_)|_s$")


def log(msg: str) -> None:
    print(f"[slurm-check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Cluster:
    """MUNGE, slurmctld and slurmd of a temporary folder; stop() ends each process it started."""

    def __init__(self, work: Path, partitions: dict[str, int]):
        self.work, self.partitions = work, partitions
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.conf = work / "etc/slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def _start(self, name: str, argv: list[str]) -> None:
        out = open(self.work / f"log/{name}.out", "w")
        # own session: a Ctrl-C of the terminal reaches this script, which stops the daemons in order
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.procs.append((name, proc))
        log(f"started {name} (pid {proc.pid})")

    def start(self) -> None:
        w = self.work
        for sub in ("etc", "log", "state", "spool", "munge", "dev"):
            (w / sub).mkdir(parents=True, exist_ok=True)
        key = w / "munge/munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = w / "munge/munge.socket"
        self._start("munged", ["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={w}/munge/munged.pid", f"--seed-file={w}/munge/munged.seed",
                               f"--log-file={w}/log/munged.log"])
        self._wait(lambda: sock.exists(), "munged's socket", 10)

        node = self._node_line()
        host = node.split()[0].split("=", 1)[1]
        gpus = max(self.partitions.values()) or 1
        # count-only GPUs: gres/gpu drops a GPU without a device file, so each is a character device
        # (/dev/null's numbers) in this folder; the jobs run on the CPU (CUDA_VISIBLE_DEVICES is ignored)
        for i in range(gpus):
            dev = w / f"dev/gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        ctl_port, d_port = _free_port(), _free_port()
        lines = [
            "ClusterName=check",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctl_port}",
            f"SlurmdPort={d_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={sock}",
            f"StateSaveLocation={w}/state",
            f"SlurmdSpoolDir={w}/spool",
            f"SlurmctldPidFile={w}/state/slurmctld.pid",
            f"SlurmdPidFile={w}/spool/slurmd.pid",
            f"SlurmctldLogFile={w}/log/slurmctld.log",
            f"SlurmdLogFile={w}/log/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU_Memory",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "MinJobAge=600",  # finished jobs stay in squeue's view long enough for the plugin's status checks
            "GresTypes=gpu",
            f"{node} Gres=gpu:{gpus} State=UNKNOWN",
        ]
        for i, name in enumerate(self.partitions):
            lines.append(f"PartitionName={name} Nodes={host} Default={'YES' if i == 0 else 'NO'} "
                         "MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (w / "etc/gres.conf").write_text(f"AutoDetect=off\nName=gpu File={w}/dev/gpu[0-{gpus - 1}]\n")

        self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._start("slurmd", ["slurmd", "-D", "-f", str(self.conf)])

        def idle():
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=self.env, capture_output=True, text=True)
            states = out.stdout.split()
            if any(s.startswith(("inval", "drain", "down")) and not s.endswith("*") for s in states):
                raise RuntimeError(f"node state {states}: " + self.tail("slurmctld.out"))
            return bool(states) and all(s in ("idle", "mix", "alloc") for s in states)
        self._wait(idle, "the node to be idle", 30)
        log(f"cluster up: {self.conf} (partitions {', '.join(self.partitions)}; {node}; {gpus} fake GPUs)")

    def _node_line(self) -> str:
        """This machine as slurmd sees it (`slurmd -C`): NodeName, CPUs, sockets, RealMemory."""
        out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
        line = next(line for line in out.splitlines() if line.startswith("NodeName="))
        return f"{line} NodeAddr=127.0.0.1"

    def _wait(self, ready, what: str, seconds: float) -> None:
        end = time.time() + seconds
        while time.time() < end:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}): {self.tail(name + '.out')}")
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}")

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.work / "log" / name
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        if any(n == "slurmctld" and p.poll() is None for n, p in self.procs):
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=self.env, capture_output=True)
            end = time.time() + 15  # let slurmd end the job steps it started
            while time.time() < end and subprocess.run(["squeue", "-h", "-t", "PD,R,CG"], env=self.env,
                                                         capture_output=True, text=True).stdout.strip():
                time.sleep(0.5)
        for name, proc in reversed(self.procs):  # slurmd, slurmctld, munged
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                log(f"stopped {name} (pid {proc.pid})")
        self.procs.clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def profile_partitions() -> dict[str, int]:
    """The partitions that the SLURM profile's partitions.yaml names: {name: max_gpu}."""
    import yaml

    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    spec = yaml.safe_load((PROFILE / profile["slurm-partition-config"]).read_text())["partitions"]
    # the CPU partition first: the cluster's default, as a site's usually is
    return dict(sorted(((name, int(limits.get("max_gpu", 0))) for name, limits in spec.items()),
                       key=lambda kv: kv[1]))


def copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in PROJECT_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def run_env(extra: dict | None = None) -> dict:
    env = {**os.environ, **(extra or {})}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STUDY_DATA_MIRROR", None)  # the ci preset's data are synthetic
    return env


def snakemake(args: list[str], cwd: Path, env: dict, logfile: Path) -> subprocess.Popen:
    with open(logfile, "w") as out:
        return subprocess.Popen([str(BIN / "snakemake"), *args], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def shims(work: Path, conf: Path) -> tuple[Path, Path]:
    """`sbatch` and `srun` first on PATH: the sbatch shim logs each call (one line) and runs the real
    one; the srun shim sets SLURM_CONF again, which snakemake-executor-plugin-slurm-jobstep drops
    from the environment of the srun that runs a job inside its allocation (with every SLURM_*
    variable not of the allocation): a cluster whose slurm.conf is in /etc/slurm or that is
    configless does not notice, this one has its slurm.conf in the temporary folder."""
    shim_dir, calls = work / "shim", work / "log/sbatch-calls.log"
    shim_dir.mkdir()
    sbatch, srun = shim_dir / "sbatch", shim_dir / "srun"
    # one line per call, written at once (calls come in parallel)
    sbatch.write_text(f'#!/bin/sh\nline=$(printf "%s " sbatch "$@" | tr "\\n" " ")\nprintf "%s\\n" "$line" >> {calls}\n'
                      f'exec {shutil.which("sbatch")} "$@"\n')
    srun.write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {shutil.which("srun")} "$@"\n')
    for shim in (sbatch, srun):
        shim.chmod(0o755)
    return shim_dir, calls


def short_sbatch(line: str) -> str:
    """An sbatch call without its job payload (the --wrap command), job name and output path; for
    a group job, how many jobs of which rules it runs (the payload's --target-jobs)."""
    jobs = re.search(r" --target-jobs (.*?) --[a-z]", line)
    short = re.sub(r" --(job-name|output) \S+", "", re.sub(r" --wrap=.*", "", line)).strip()
    rules = [job.split(":")[0] for job in shlex.split(jobs.group(1))] if jobs else []
    if len(rules) > 1 or "gpu_eval" in short:
        short += f"    # group job of {len(rules)}: {', '.join(rules)}"
    return short


# ---------------------------------------------------------------- what runs
# figures: one that draws a table, one its runs' per-sample records, one a robustness table (checks,
# CIFAR-10-C)
FIGURES = ("fig01_classwise_standard", "fig09_confusion", "fig03_frl_errors")


def subset_overrides(preset: str) -> list[str]:
    """`--config` settings that keep, of the preset's DAG, the part with a job of every kind: the
    experiment groups whose runs are checked and evaluated on corrupted data (their sharded
    evaluations: shards and merges), the group of a run that fine-tunes from its parent's best
    checkpoint on validation (model_best.pt, @best evaluations), the feature datasets built
    from them (construct), tables, robustness tables, reproduction, and three figures and their
    manifest. Its jobs are jobs of the preset's whole DAG (a run's id is its config's hash)."""
    import yaml

    from study.config import load_params, plan_runs

    params = load_params(ROOT / "params.yaml", {"preset": preset}, presets_dir=ROOT / "workflow/presets",
                         schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    rob = params.robustness
    groups = set(rob.checks.groups or rob.groups) | set((rob.corruptions.groups if rob.corruptions else None)
                                                         or rob.groups)
    tuned = [r for r in plan_runs(params)
             if r.trained is not None and r.init_from and r.trained.init_checkpoint == "best"]
    if tuned:  # its smallest group
        groups.add(min(tuned[0].groups, key=lambda g: sum(g in r.groups for r in plan_runs(params))))
    # the groups as --config values (a YAML dump of the keys each group sets)
    experiments = [g.model_dump(exclude_unset=True) for g in params.experiments if g.group in groups]
    figures = [f for f in FIGURES if f in params.figures]

    def flow(obj):
        return yaml.safe_dump(obj, default_flow_style=True, width=1 << 20).strip()
    return [f"experiments={flow(experiments)}", f"figures={flow(figures)}"]


# ---------------------------------------------------------------- comparison
def records(project: Path) -> dict[str, Path]:
    found = {str(p.relative_to(project)): p for p in (project / "results/evaluations").rglob("*.parquet")}
    found |= {str(p.relative_to(project)): p for p in (project / "results/runs").glob("*/epochs.csv")}
    return found


def compare(slurm: Path, local: Path) -> list[str]:
    import pandas as pd

    a, b = records(slurm), records(local)
    problems = [f"only in the SLURM run: {p}" for p in sorted(set(a) - set(b))]
    problems += [f"only in the local run: {p}" for p in sorted(set(b) - set(a))]
    for rel in sorted(set(a) & set(b)):
        read = pd.read_parquet if rel.endswith(".parquet") else pd.read_csv
        x, y = read(a[rel]), read(b[rel])
        keep = [c for c in x.columns if not TIMING.search(str(c).lower())]
        if list(x.columns) != list(y.columns):
            problems.append(f"{rel}: columns differ: {list(x.columns)} vs {list(y.columns)}")
            continue
        x, y = x[keep].reset_index(drop=True), y[keep].reset_index(drop=True)
        if x.shape != y.shape:
            problems.append(f"{rel}: {x.shape} rows x columns (SLURM) vs {y.shape} (local)")
            continue
        differ = ~((x == y) | (x.isna() & y.isna()))
        if differ.any().any():
            cols = [c for c in keep if differ[c].any()]
            rows = differ.any(axis=1)
            sample = pd.concat({"slurm": x.loc[rows, cols].head(5), "local": y.loc[rows, cols].head(5)}, axis=1)
            problems.append(f"{rel}: {int(rows.sum())} rows differ in {cols}:\n{sample.to_string()}")
    if not a:
        problems.append("the SLURM run wrote no records")
    return problems


# ---------------------------------------------------------------- main
def run_both(cluster: Cluster, work: Path, config: list[str], procs: list) -> int:
    """The SLURM run and the local run of the same targets (at once: the SLURM run waits on status
    polls and job starts, which the local run fills), their sbatch calls, then the comparison."""
    t0 = time.time()
    shim_dir, calls = shims(work, cluster.conf)
    slurm_dir, local_dir = copy_project(work / "slurm"), copy_project(work / "local")
    slurm_args = ["--profile", str(PROFILE.relative_to(ROOT)), "--slurm-status-command", "squeue",
                  "--slurm-init-seconds-before-status-checks", "2", "--max-threads", "1", *config]
    local_args = ["--profile", "workflow/profiles/cpu", "--cores", "2", *config]
    env = run_env({"SLURM_CONF": str(cluster.conf)})
    env["PATH"] = f"{shim_dir}{os.pathsep}{env['PATH']}"
    log(f"SLURM run (in {slurm_dir}): snakemake {shlex.join(slurm_args)}")
    log(f"local run (in {local_dir}): snakemake {shlex.join(local_args)}")
    runs = {"slurm": snakemake(slurm_args, slurm_dir, env, work / "log/snakemake-slurm.log"),
            "local": snakemake(local_args, local_dir, run_env(), work / "log/snakemake-local.log")}
    procs += runs.values()
    codes = {name: proc.wait() for name, proc in runs.items()}
    log(f"snakemake finished: {codes} after {time.time() - t0:.0f} s")

    submitted = calls.read_text().splitlines() if calls.exists() else []
    print(f"\n---- {len(submitted)} sbatch calls of the SLURM run (payload left out; in full: {calls}) ----")
    print("\n".join(short_sbatch(line) for line in submitted))
    print("----")
    for name, code in codes.items():
        if code:
            text = (work / f"log/snakemake-{name}.log").read_text(errors="replace").splitlines()
            print(f"\n---- the {name} run failed ({code}); its log's end ----\n" + "\n".join(text[-60:]))
    if any(codes.values()):
        return 1
    problems = compare(slurm_dir, local_dir)
    if problems:
        print("\n---- the SLURM run's records differ from the local run's ----")
        print("\n".join(problems))
        return 1
    log(f"OK: {len(submitted)} SLURM jobs; {len(records(slurm_dir))} record files (evaluation parquet, "
        f"epochs.csv) equal to the local run's")
    return 0


def stop_all(procs: list, cluster: Cluster) -> None:
    """Each Snakemake still running (interrupted: it cancels its SLURM jobs), then the daemons."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    parser.add_argument("--targets", nargs="+", default=["all"], help="Snakemake targets (default: all)")
    parser.add_argument("--preset", default="ci")
    parser.add_argument("--whole", action="store_true",
                        help="the preset's whole DAG, not the part with a job of every kind (subset_overrides)")
    args = parser.parse_args()
    missing = [c for c in DAEMONS if shutil.which(c) is None]
    if missing:
        print(f"{INSTALL} (missing: {' '.join(missing)})", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("test-slurm starts slurmd, which runs jobs as any user: run it as root", file=sys.stderr)
        return 2

    t0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="slurm-check-"))
    cluster, procs = Cluster(work, profile_partitions()), []

    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    # SIGINT too: started in the background, this process may inherit SIGINT ignored, which its
    # children (snakemake) would inherit as well and so not stop when told to
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupted)
    try:
        cluster.start()
        config = ["--config", f"preset={args.preset}", *([] if args.whole else subset_overrides(args.preset)),
                  "--", *args.targets]
        return run_both(cluster, work, config, procs)
    except KeyboardInterrupt as err:
        log(f"interrupted ({err}); stopping")
        return 130
    except Exception as err:  # the cluster did not come up: say why, with its logs
        log(f"failed: {err}")
        for name in ("munged.out", "slurmctld.out", "slurmd.out"):
            if text := cluster.tail(name):
                print(f"---- {name} ----\n{text}")
        return 1
    finally:
        stop_all(procs, cluster)
        if args.keep:
            log(f"kept {work} (logs: {work}/log)")
        else:
            shutil.rmtree(work, ignore_errors=True)
        log(f"{time.time() - t0:.0f} s in all")

if __name__ == "__main__":
    sys.exit(main())
