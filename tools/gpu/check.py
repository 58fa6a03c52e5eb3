"""`make gpu-check`: the checks that need a GPU, on a bare GPU machine, with its own Python
and nothing from the network (docs/performance.md, "On a GPU machine").

It refuses with one line (exit 2) where torch sees no CUDA device; installs the wheels of
gpu-bundle/ (`make gpu-bundle`) that the machine lacks into gpu-bundle/site, or says which
to carry (exit 3); then runs its parts in order, each a set of `study` (or pytest)
subprocesses under `timeout` with the part's own time budget, and rewrites
results/gpu-check/report.{md,json} after every step, so that what finished stays reported
when a later part runs out of time:

  setup   the bundle's wheels installed; CIFAR-10 (JPEG) prepared from gpu-bundle/mirror
  tests   pytest -m gpu tests/hardware/test_gpu*.py (CUDA against CPU, compile modes, batch invariance,
          AutoAttack, no host synchronisation)
  bench   study bench on the full JPEG CIFAR-10 training set, PreAct-ResNet-18, batch 128: every
          task, compile off/default/max, fp32 and, where the bench's --precision lists bf16, bf16 in
          the same run (so that its report compares the two: bf16_matches_fp32), then --concurrent 4
  preset  the reproduce preset's first epochs: the first run of each training kind (standard, PGD-10
          AT, TRADES) for 2 epochs on 500 images per class, timed, and the preset's GPU-hours from
          them (tools/gpu/preset_epochs.py)
  repro   PGD-10 AT of PreAct-ResNet-18 with Wong et al. 2020's cyclic schedule (short), then
          clean, PGD-20 and AutoAttack on 1,000 test images, class by class beside Xu et al.

Standard library only (torch only for the CUDA probe): it runs before anything is installed.
`--smoke` runs the same commands at toy sizes on any device, to check the script itself."""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MIRROR, NEEDED, ROOT, SITE, WHEELS, missing_modules  # noqa: E402

OUT = ROOT / "results" / "gpu-check"
DATA = ROOT / "data" / "prepared" / "cifar10-jpeg.pt"
#: seconds per part: 60 + 80 + 110 + 120 + 155 = 525 s, within 9 minutes with the startup
BUDGETS = {"setup": 60, "tests": 80, "bench": 110, "preset": 120, "repro": 155}
#: the preset whose first epochs part `preset` times
PRESET = "reproduce"
TAIL_LINES = 8
EPS, ALPHA = 8 / 255, 2 / 255


def cuda_refusal() -> str | None:
    """None where torch sees a CUDA device; otherwise the one line that says why not."""
    try:
        import torch
    except ImportError as e:
        return f"gpu-check: needs a CUDA device, and {sys.executable} cannot import torch ({e})"
    if not torch.cuda.is_available():
        return f"gpu-check: no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return None


# ---- installing the bundle ------------------------------------------------------------


def install_bundle(wheels: Path = WHEELS, site: Path = SITE) -> str:
    """Every wheel of the bundle into `site` (pip --no-index, or unpacked where the Python
    has no pip); the line that says what was done."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        return f"no wheels in {_rel(wheels)}"
    site.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels), "--no-deps",
           "--target", str(site), "--upgrade", "--quiet", "--disable-pip-version-check", *map(str, found)]
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0:
        done = subprocess.run(pip, capture_output=True, text=True)
        if done.returncode == 0:
            return f"pip installed {len(found)} wheels into {_rel(site)}"
    for wheel in found:  # a wheel is a zip archive laid out as site-packages
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
    return f"unpacked {len(found)} wheels into {_rel(site)} (no usable pip)"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def carry_line(missing: list[str]) -> str:
    specs = " ".join(NEEDED[m] for m in missing)
    return (f"gpu-check: missing modules {', '.join(missing)}: run `make gpu-bundle` where PyPI is reachable and "
            f"let gpu-bundle/ travel with the checkout (its wheels: {specs} and their dependencies)")


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SITE), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---- parts, steps and the report -------------------------------------------------------


@dataclass
class Step:
    title: str
    argv: list[str] | None  # None: not run, `skip` says why
    skip: str = ""
    outputs: list[str] = field(default_factory=list)  # files whose contents go into the report
    weight: float = 1.0  # its share of what is left of the part's budget, against the steps after it


@dataclass
class Part:
    name: str
    title: str
    budget_s: float
    steps: list[Step]


def run_step(step: Step, seconds: float, log: Path, env: dict | None = None) -> dict:
    """The step as a subprocess under `timeout`: ok, failed (with the last lines of its
    output) or timed out."""
    record = {"title": step.title, "command": shlex.join(step.argv or []), "budget_s": round(seconds, 1)}
    if step.argv is None:
        return {**record, "outcome": "skipped", "detail": step.skip}
    if seconds < 1:
        return {**record, "outcome": "timed out", "detail": "the part's budget was spent before it started"}
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(["timeout", "-k", "5", str(int(seconds)), *step.argv], stdout=f,
                            stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode
    wall = time.monotonic() - start
    tail = log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    outcome = "ok" if rc == 0 else "timed out" if rc in (124, 137) else "failed"
    return {**record, "outcome": outcome, "rc": rc, "wall_s": round(wall, 1), "log": _rel(log),
            "tail": [] if rc == 0 else tail}


def run_part(part: Part, out: Path, report: dict, env: dict | None = None) -> dict:
    """Each step with its weight's share of what is left of the part's budget (a step that
    ends early leaves its rest to the next); the report rewritten after every step."""
    result = {"name": part.name, "title": part.title, "budget_s": part.budget_s, "steps": [], "outcome": "running"}
    report["parts"].append(result)
    deadline = time.monotonic() + part.budget_s
    for i, step in enumerate(part.steps):
        share = (deadline - time.monotonic()) * step.weight / sum(s.weight for s in part.steps[i:])
        result["steps"].append(run_step(step, share, out / "logs" / f"{part.name}-{i}.log", env))
        write_report(out, report)
    outcomes = {s["outcome"] for s in result["steps"]}
    result["outcome"] = next((o for o in ("failed", "timed out") if o in outcomes), "ok")
    result["wall_s"] = round(sum(s.get("wall_s", 0) for s in result["steps"]), 1)
    write_report(out, report)
    return result


def markdown(report: dict) -> str:
    lines = ["# GPU check", "", f"{report.get('device', '')}; started {report.get('started', '')}", ""]
    lines += [f"- {line}" for line in report.get("notes", [])] + [""]
    for part in report["parts"]:
        lines += [f"## {part['name']}: {part['title']}", "",
                  f"**{part['outcome']}** (budget {part['budget_s']:.0f} s, {part.get('wall_s', 0):.0f} s used)", ""]
        for step in part["steps"]:
            detail = f" ({step['detail']})" if step.get("detail") else ""
            lines += [f"- {step['title']}: **{step['outcome']}**{detail}, {step.get('wall_s', 0):.0f} s of "
                      f"{step['budget_s']:.0f} s", f"  `{step['command']}`" if step["command"] else ""]
            if step.get("tail"):
                lines += ["", "  ```", *[f"  {t}" for t in step["tail"]], "  ```"]
        for section in part.get("sections", []):
            lines += ["", section]
        lines.append("")
    return "\n".join(lines)


def write_report(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("report.json", json.dumps(report, indent=1)), ("report.md", markdown(report))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)


# ---- the parts' commands ---------------------------------------------------------------


def study(*args: str) -> list[str]:
    return [sys.executable, "-m", "study.cli", *args]


def help_text(command: str, env: dict | None = None) -> str:
    """`study COMMAND --help`: the bench's flags are read from it, not assumed."""
    return subprocess.run(study(command, "--help"), capture_output=True, text=True, cwd=ROOT, env=env).stdout


def compile_choices(help_: str) -> tuple[str, ...]:
    """The settings of --compile that a help text lists, but `auto` (default on a GPU)."""
    found = re.search(r"--compile \{([\w,]+)\}", help_)
    return tuple(c for c in (found.group(1) if found else "off,default").split(",") if c != "auto")


def precision_choices(help_: str) -> tuple[str, ...]:
    """The settings of --precision that a help text lists (fp32 alone where it has no such flag)."""
    found = re.search(r"--precision \{([\w,]+)\}", help_)
    return tuple(found.group(1).split(",")) if found else ("fp32",)


@dataclass
class Sizes:
    """The check's sizes: the real ones, or toy ones (--smoke)."""

    device: str = "cuda"
    images: int = 50000
    test_images: int = 1000
    train_per_class: int | None = None
    test_per_class: int = 100
    epochs: int = 5
    compile_modes: tuple[str, ...] = ()  # (): every one that `study bench --help` lists
    data: Path = DATA
    concurrent: int = 4
    pytest_env: dict = field(default_factory=dict)
    #: part preset: epochs and training images per class of each timed run, and its per-epoch
    #: evaluation's test images per class (None: the run's own)
    preset_epochs: int = 2
    preset_per_class: int = 500
    preset_eval_per_class: int | None = None


SMOKE = Sizes(device="cpu", images=20, test_images=10, train_per_class=4, test_per_class=1, epochs=1,
              compile_modes=("off",), concurrent=2, pytest_env={"STUDY_GPU_TEST_DEVICE": "cpu"},
              preset_epochs=1, preset_per_class=50, preset_eval_per_class=1)


def setup_part(sizes: Sizes, budget: float) -> Part:
    prepare = study("prepare", "--dataset", "cifar10", "--variant", "jpeg", "--mirror", str(MIRROR),
                    "--out", str(sizes.data), "--no-progress")
    step = Step("prepare CIFAR-10 (JPEG) from gpu-bundle/mirror", prepare) if not sizes.data.exists() \
        else Step("prepare CIFAR-10 (JPEG)", None, f"{sizes.data} exists")
    return Part("setup", "data", budget, [step])


def tests_part(sizes: Sizes, budget: float) -> Part:
    argv = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/hardware/test_gpu.py",
            "tests/hardware/test_gpu_host_reads.py", "-p", "no:cacheprovider", "-rs"]
    if sizes.pytest_env:
        argv = ["env", *[f"{k}={v}" for k, v in sizes.pytest_env.items()], *argv]
    return Part("tests", "pytest -m gpu (tests/hardware/test_gpu*.py)", budget, [Step("the gpu marker's tests", argv)])


def bench_part(sizes: Sizes, budget: float, out: Path, env: dict | None = None) -> Part:
    help_ = help_text("bench", env)
    modes = sizes.compile_modes or compile_choices(help_)
    common = ["--data", str(sizes.data), "--model", "preact_resnet18", "--images", str(sizes.images),
              "--test-images", str(sizes.test_images), "--batch-size", "128", "--device", sizes.device,
              "--no-progress"]
    bench = out / "bench"
    if "bf16" in precision_choices(help_) and sizes.device != "cpu":
        # One run for both: the bench compares bf16 with fp32 of the same run, class by class.
        steps = [Step("fp32 and bf16, every task, compile " + "/".join(modes),
                      study("bench", "--out", str(bench / "fp32-bf16.json"), *common, "--compile", *modes,
                            "--precision", "fp32", "bf16"), outputs=[str(bench / "fp32-bf16.md")], weight=5)]
    else:
        steps = [Step("fp32, every task, compile " + "/".join(modes),
                      study("bench", "--out", str(bench / "fp32.json"), *common, "--compile", *modes),
                      outputs=[str(bench / "fp32.md")], weight=3),
                 Step("bf16", None, "bf16 is timed on a GPU in this check: not timed on cpu" if sizes.device == "cpu"
                      else "`study bench` has no --precision flag listing bf16: bf16 not timed")]
    steps.append(Step(f"--concurrent {sizes.concurrent} (PGD-10 AT epoch)",
                      study("bench", "--out", str(bench / "concurrent.json"), *common, "--tasks", "pgd10_at_epoch",
                            "--compile", "auto", "--concurrent", str(sizes.concurrent)),
                      outputs=[str(bench / "concurrent.md")]))
    return Part("bench", "study bench, full JPEG CIFAR-10, PreAct-ResNet-18, batch 128", budget, steps)


def preset_part(sizes: Sizes, budget: float, out: Path) -> Part:
    """The first run of each training kind of the reproduce preset, a few epochs, timed; the
    preset's projected GPU-hours from them (tools/gpu/preset_epochs.py)."""
    folder = out / "preset"
    argv = [sys.executable, str(ROOT / "tools" / "gpu" / "preset_epochs.py"), "--preset", PRESET,
            "--data", str(sizes.data), "--out", str(folder), "--epochs", str(sizes.preset_epochs),
            "--train-per-class", str(sizes.preset_per_class), "--device", sizes.device]
    if sizes.device != "cpu":
        # the current engine in both training precisions (the preset's price is given in each)
        argv += ["--precision", "fp32", "bf16"]
    if sizes.preset_eval_per_class is not None:
        argv += ["--eval-per-class", str(sizes.preset_eval_per_class)]
    step = Step(f"the {PRESET} preset's first runs: {sizes.preset_epochs} epochs on {sizes.preset_per_class} "
                "images per class each, timed", argv, outputs=[str(folder / "timing.md")])
    return Part("preset", f"the {PRESET} preset's first epochs and its price", budget, [step])


#: Wong et al. 2020's recipe as far as the check keeps it: SGD (momentum 0.9, weight decay
#: 5e-4), one cyclic rise and fall of the learning rate to 0.2, batch 128, mixed precision
#: (theirs fp16 via apex, ours bf16 autocast); PGD-10 AT (theirs: FGSM + random start, 15 epochs).
def repro_config(sizes: Sizes) -> dict:
    attack = {"type": "pgd", "norm": "linf", "eps": EPS, "alpha": ALPHA, "steps": 10, "restarts": 1}
    return {
        "dataset": "cifar10", "data_variant": "jpeg", "train_per_class": sizes.train_per_class,
        "model": "preact_resnet18", "method": "pgd_at",
        "method_config": {"adversary": {**attack, "random_start": True, "bn_mode": "train",
                                        "bn_stats": ["adv", "step", "clean"]}},
        "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9, "weight_decay": 5e-4, "nesterov": False},
        "schedule": {"name": "cyclic", "milestones": [0.5, 0.75], "gamma": 0.1},
        "epochs": sizes.epochs, "batch_size": 128, "augment": {"crop_padding": 4, "flip": True},
        "epoch_eval": {"per_class": sizes.test_per_class, "attack": {**attack, "seed": 0}},
        "seed": 0, "precision": "bf16",
    }


def evaluations(sizes: Sizes) -> dict[str, dict]:
    common = {"test_per_class": sizes.test_per_class, "batch_size": "auto", "seed": 0}
    return {
        "clean": {"type": "clean", "name": "clean", **common},
        "pgd20": {"type": "pgd", "norm": "linf", "eps": EPS, "alpha": ALPHA, "steps": 20, "restarts": 1,
                  "name": "pgd20", **common},
        "autoattack": {"type": "autoattack", "version": "standard", "norm": "linf", "eps": EPS,
                       "name": "autoattack", **common},
    }


def repro_part(sizes: Sizes, budget: float, out: Path) -> Part:
    run_dir, evals = out / "repro" / "run", out / "repro" / "evaluations"
    cfg = repro_config(sizes)
    evaluate = study("evaluate", "--data", str(sizes.data), "--run-dir", str(run_dir), "--device", sizes.device,
                     "--no-progress")
    for name, ev in evaluations(sizes).items():
        evaluate += ["--evaluation", json.dumps(ev), "--out", str(evals / f"{name}.parquet")]
    steps = [
        Step(f"train: PGD-10 AT, cyclic lr to 0.2, {sizes.epochs} epochs, bf16",
             study("train", "--data", str(sizes.data), "--run-dir", str(run_dir), "--run-config", json.dumps(cfg),
                   "--device", sizes.device, "--compile", "off", "--no-progress"), weight=6),
        Step(f"evaluate: clean, PGD-20, AutoAttack on {10 * sizes.test_per_class} test images", evaluate, weight=4),
        Step("tables", study("tables", "--records", *[str(evals / f"{n}.parquet") for n in evaluations(sizes)],
                             "--epochs", str(run_dir / "epochs.csv"), "--out-dir", str(out / "repro" / "tables")),
             weight=0.5),
    ]
    return Part("repro", "PGD-10 AT with Wong et al. 2020's cyclic schedule, class by class", budget, steps)


# ---- what the parts wrote, into the report ---------------------------------------------


def xu_values() -> dict[tuple[str, str], float]:
    """(class, clean|pgd) -> Xu et al. 2021's published accuracy (study/published.py)."""
    try:
        from study.published import PUBLISHED
    except ImportError:
        return {}
    return {(p.class_name, p.recipe.kind): p.value for p in PUBLISHED if p.paper == "xu2021" and p.statistic == "class"}


#: Xu et al. 2021, Fig. 1(b), PGD-AT PreAct-ResNet18: 1 - the standard / robust error as one
#: reader read them off the figure (docs/study.md: about 6% / 34% and 33% / 82%), not the authors' numbers
XU_FIGURE = {("automobile", "clean"): 0.94, ("automobile", "pgd"): 0.66, ("cat", "clean"): 0.67, ("cat", "pgd"): 0.18}


def classwise_section(classwise_csv: Path, epochs: int, per_class: int = 100) -> str:
    """Our class accuracies beside Xu et al.'s published ones, with the recipe difference."""
    rows = list(csv.DictReader(open(classwise_csv)))
    acc = {(r["class_name"], r["eval"]): float(r["acc"]) for r in rows}
    names = list(dict.fromkeys(r["class_name"] for r in rows))
    xu = xu_values()
    lines = [f"### Class by class (accuracy %, {per_class} test images per class)", "",
             "| class | clean | PGD-20 | AutoAttack | Xu et al. 2021, abstract: clean / PGD | "
             "Xu et al. 2021, Fig. 1(b) as read: clean / PGD |", "|---|---|---|---|---|---|"]

    def pct(v: float | None) -> str:
        return "" if v is None or v != v else f"{100 * v:.0f}"

    def pair(values: dict, name: str) -> str:
        return f"{pct(values[(name, 'clean')])} / {pct(values[(name, 'pgd')])}" if (name, "clean") in values else ""

    for name in names:
        lines.append(f"| {name} | {pct(acc.get((name, 'clean')))} | {pct(acc.get((name, 'pgd20')))} | "
                     f"{pct(acc.get((name, 'autoattack')))} | {pair(xu, name)} | {pair(XU_FIGURE, name)} |")
    lines += ["", f"Recipe difference: ours is PreAct-ResNet-18 on the JPEG variant of CIFAR-10, PGD-10 AT for "
              f"{epochs} epochs with one cyclic rise and fall of the learning rate to 0.2 (Wong et al. 2020's "
              f"schedule, shortened; bf16 autocast), evaluated on {10 * per_class:,} test images; Xu et al.'s "
              "abstract values (ICML version) are a PGD-AT ResNet18 on the official CIFAR-10, epochs and "
              "checkpoint not stated, PGD L-inf 8/255 on the whole test set; their Fig. 1(b) is a PGD-AT "
              "PreAct-ResNet18, its values one reader's reading of the figure (docs/study.md). Not compared as "
              "equal."]
    return "\n".join(lines)


def attach_outputs(part: Part, result: dict, sizes: Sizes, out: Path) -> None:
    sections = []
    for step in part.steps:
        sections += [Path(p).read_text() for p in step.outputs if Path(p).is_file()]
    classwise = out / "repro" / "tables" / "classwise.csv"
    if part.name == "repro" and classwise.is_file():
        sections.append(classwise_section(classwise, sizes.epochs, sizes.test_per_class))
    result["sections"] = sections


# ---- main ------------------------------------------------------------------------------


def build_parts(names: list[str], sizes: Sizes, budgets: dict, out: Path, env: dict) -> list[Part]:
    makers = {"setup": lambda b: setup_part(sizes, b), "tests": lambda b: tests_part(sizes, b),
              "bench": lambda b: bench_part(sizes, b, out, env), "preset": lambda b: preset_part(sizes, b, out),
              "repro": lambda b: repro_part(sizes, b, out)}
    return [makers[n](budgets[n]) for n in names]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="setup,tests,bench,preset,repro", help="comma-separated, in this order")
    p.add_argument("--budget", action="append", default=[], metavar="PART=SECONDS",
                   help=f"a part's time budget (defaults: {BUDGETS})")
    p.add_argument("--epochs", type=int, default=None, help="training epochs of the reproduction (default 5)")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--data", default=str(DATA), help="the prepared CIFAR-10 (JPEG), made by part setup if missing")
    p.add_argument("--smoke", action="store_true", help="toy sizes on any device (checks this script)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    sizes = replace(sizes, data=Path(args.data).resolve(), epochs=args.epochs or sizes.epochs)
    if not args.smoke and (line := cuda_refusal()):
        print(line, file=sys.stderr)
        return 2
    sys.path.insert(0, str(SITE))
    notes = []
    if missing := missing_modules():
        notes.append(install_bundle())
        importlib.invalidate_caches()
        if missing := missing_modules():
            print(carry_line(missing), file=sys.stderr)
            return 3
    budgets = {**BUDGETS, **{k: float(v) for k, v in (b.split("=", 1) for b in args.budget)}}
    out, env = Path(args.out).resolve(), child_env()
    report = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "device": device_line(),
              "notes": notes, "parts": []}
    for part in build_parts(args.parts.split(","), sizes, budgets, out, env):
        result = run_part(part, out, report, env)
        attach_outputs(part, result, sizes, out)
        write_report(out, report)
        print(f"gpu-check: {part.name}: {result['outcome']} ({result['wall_s']:.0f} s of {part.budget_s:.0f} s)")
    print(f"gpu-check: report in {out / 'report.md'}")
    return 0 if all(p["outcome"] == "ok" for p in report["parts"]) else 1


def device_line() -> str:
    import torch

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    return f"{name}, torch {torch.__version__}, Python {sys.version.split()[0]}"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":  # the Makefile's one-line refusal
        print(cuda_refusal() or "", end="")
        sys.exit(0)
    sys.exit(main())
