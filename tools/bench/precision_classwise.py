"""bf16 against fp32, class by class, at the presets' own recipe: does bf16 autocast training
change the class-wise finding? (issue 43; docs/performance.md, "bf16 against fp32, class by class")

For each preset named, its baseline group's PGD-AT runs (every seed the preset lists) are trained
twice, in fp32 (the preset as it is) and in bf16 (`train.precision: bf16`, the same plan otherwise),
and each model is evaluated, in fp32 as every evaluation is, on the preset's clean and PGD-20
settings. A run shared by two presets (the demo's PGD-AT is the laptop's at seed 0) trains once and
is evaluated on each preset's test images. fp32 runs already trained and evaluated by the pipeline
(`--fp32-results`, a results folder) are reused where their records are the preset's.

Per class and metric: the mean accuracy over seeds of each arm, their difference (bf16 - fp32),
the seed spread (the standard deviation over seeds, pooled over the two arms) and the standard
error of the difference it gives; a class differs where the difference exceeds `z` standard
errors, z the Bonferroni bound of a 5% two-sided test over the classes (DIFFER_RULE). A preset
with one seed takes the spread of the preset with most seeds on the same recipe, widened for its
smaller test set (binomial sampling). The verdict: bf16 leaves the class-wise finding unchanged
where no class differs in any metric.

    python -m tools.bench.precision_classwise --presets demo laptop --data data/prepared/cifar10-jpeg.pt \
        --work results/bench/precision --out results/bench/precision_classwise
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import norm

METRICS = ("clean", "pgd20")
ARMS = ("fp32", "bf16")
FAMILY_LEVEL = 0.05
DIFFER_RULE = ("a class differs where |mean bf16 - mean fp32| over seeds exceeds z standard errors of the "
               "difference, SE = s * sqrt(1/n_fp32 + 1/n_bf16) with s the seed spread (standard deviation over "
               "seeds, pooled over both arms) and z the two-sided Bonferroni bound at 5% over the classes")


@dataclass(frozen=True)
class Case:
    """One preset's PGD-AT run at one seed, in one arm: its run id and config, and the preset's
    resolved evaluations (METRICS) it is evaluated on."""

    preset: str
    arm: str
    seed: int
    run_id: str
    config: Mapping
    evaluations: Mapping[str, Mapping]


def plan_cases(root: Path, presets: Sequence[str], group: str = "baseline", method: str = "pgd_at") -> list[Case]:
    """Every (preset, arm, seed) of `method` in `group` of each preset, the seeds the preset lists."""
    from study.config import load_params, plan_runs, resolve_evaluation

    cases = []
    for preset in presets:
        for arm in ARMS:
            overrides = {"preset": preset, **({"train.precision": arm} if arm != "fp32" else {})}
            params = load_params(root / "params.yaml", overrides, presets_dir=root / "workflow/presets",
                                 schema_path=root / "workflow/schemas/params.schema.yaml")
            runs = [r for r in plan_runs(params) if group in r.groups and r.run.method == method]
            if not runs:
                raise ValueError(f"preset {preset!r} has no {method!r} run in group {group!r}")
            for r in runs:
                missing = [m for m in METRICS if m not in r.evaluations]
                if missing:
                    raise ValueError(f"preset {preset!r}: run {r.run_id} is not evaluated on {missing}; "
                                     f"the comparison needs {', '.join(METRICS)}")
                evs = {m: resolve_evaluation(params, m, dataset=r.dataset) for m in METRICS}
                cases.append(Case(preset, arm, r.run.seed, r.run_id, dict(r.config), evs))
    return cases


# ------------------------------------------------------------------------ running the jobs
def _study(args: Sequence[str], log: Path) -> float:
    """Run a `study` subcommand (this interpreter's), its stderr to `log`; its wall seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "study.cli", *args]
    t0 = time.perf_counter()
    with log.open("w") as err:
        done = subprocess.run(cmd, stderr=err, stdout=subprocess.DEVNULL, check=False)
    if done.returncode:
        raise RuntimeError(f"{shlex.join(cmd[:4])} ... failed ({done.returncode}); see {log}")
    return time.perf_counter() - t0


def _record_matches(path: Path, evaluation: Mapping) -> bool:
    """Whether an existing record holds `evaluation` (its settings as the record's metadata names them)."""
    from study.evaluate.records import record_meta

    if not path.is_file():
        return False
    meta = record_meta(path)
    held = meta.get("evaluation") or {}
    # the settings that decide the records (not the name, batch size or checkpoint label)
    keys = ("type", "norm", "eps", "alpha", "steps", "restarts", "seed", "test_per_class")
    return all(held.get(k) == evaluation.get(k) for k in keys)


def run_case(case: Case, data: Path, work: Path, threads: int, fp32_results: Path | None,
             timings: dict) -> dict[str, Path]:
    """Train the case's run (once per run id) and evaluate it on the preset's METRICS; the records."""
    run_dir = work / "runs" / case.run_id
    if not (run_dir / "model.pt").is_file():
        reused = fp32_results / "runs" / case.run_id if fp32_results and case.arm == "fp32" else None
        if reused is not None and (reused / "model.pt").is_file():
            # the pipeline's own fp32 model of this run: its files, not a second training
            shutil.copytree(reused, run_dir, dirs_exist_ok=True)
            timings.setdefault("reused", []).append(case.run_id)
        else:
            seconds = _study(["train", "--data", str(data), "--run-dir", str(run_dir),
                              "--run-config", json.dumps(dict(case.config)), "--compile", "auto",
                              "--threads", str(threads), "--no-progress"],
                             work / "logs" / "train" / f"{case.run_id}.log")
            timings.setdefault("train_s", {})[case.run_id] = round(seconds, 1)
    records = {}
    todo = []
    for metric, ev in case.evaluations.items():
        out = work / "evaluations" / case.preset / case.run_id / f"{metric}.parquet"
        pipeline = fp32_results / "evaluations" / case.run_id / f"{metric}.parquet" if fp32_results else None
        if not out.is_file() and case.arm == "fp32" and pipeline is not None and _record_matches(pipeline, ev):
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(pipeline, out)
        if not out.is_file():
            todo += ["--evaluation", json.dumps(dict(ev)), "--out", str(out)]
        records[metric] = out
    if todo:
        seconds = _study(["evaluate", "--data", str(data), "--run-dir", str(run_dir), *todo, "--checkpoint", "last",
                          "--threads", str(threads), "--no-progress"],
                         work / "logs" / "evaluate" / case.preset / f"{case.run_id}.log")
        timings.setdefault("evaluate_s", {})[f"{case.preset}/{case.run_id}"] = round(seconds, 1)
    return records


# ------------------------------------------------------------------------ the comparison
def class_accuracies(path: Path, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, images) per class of one evaluation record."""
    from study.evaluate.records import read_records

    frame, _ = read_records(path)
    label = frame["label"].to_numpy()
    correct = (frame["pred"].to_numpy() == label).astype(float)
    n = np.bincount(label, minlength=num_classes).astype(float)
    hits = np.bincount(label, weights=correct, minlength=num_classes)
    return np.divide(hits, n, out=np.full(num_classes, np.nan), where=n > 0), n


def bonferroni_z(classes: int, level: float = FAMILY_LEVEL) -> float:
    """The two-sided z bound of a family of `classes` tests at family-wise `level`."""
    if classes < 1:
        raise ValueError(f"classes must be >= 1, got {classes}")
    return float(norm.ppf(1 - level / (2 * classes)))


def pooled_spread(fp32: np.ndarray, bf16: np.ndarray) -> np.ndarray | None:
    """Per class, the seed standard deviation pooled over the two arms (seeds x classes arrays);
    None where an arm has a single seed (no spread to measure)."""
    if len(fp32) < 2 or len(bf16) < 2:
        return None
    dof = len(fp32) + len(bf16) - 2
    return np.sqrt(((len(fp32) - 1) * fp32.var(axis=0, ddof=1) + (len(bf16) - 1) * bf16.var(axis=0, ddof=1)) / dof)


def widened_spread(spread: np.ndarray, accuracy: np.ndarray, images_measured: np.ndarray,
                   images_here: np.ndarray) -> np.ndarray:
    """A spread measured on `images_measured` test images per class, for an evaluation on fewer
    (`images_here`): the binomial variance the smaller set adds, p(1-p)(1/n_here - 1/n_measured)."""
    extra = accuracy * (1 - accuracy) * np.clip(1 / images_here - 1 / images_measured, 0, None)
    return np.sqrt(spread ** 2 + extra)


def compare(fp32: np.ndarray, bf16: np.ndarray, spread: np.ndarray, class_names: Sequence[str]) -> dict:
    """One metric of one preset: per class the arms' means, the difference, the spread, its
    standard error and whether the class differs (DIFFER_RULE); `fp32`, `bf16`: seeds x classes."""
    z = bonferroni_z(len(class_names))
    se = spread * math.sqrt(1 / len(fp32) + 1 / len(bf16))
    a, b = fp32.mean(axis=0), bf16.mean(axis=0)
    rows = [{"class": name, "fp32": float(a[i]), "bf16": float(b[i]), "difference": float(b[i] - a[i]),
             "seed_spread": float(spread[i]), "se": float(se[i]),
             "differs": bool(abs(b[i] - a[i]) > z * se[i])} for i, name in enumerate(class_names)]
    return {"z": z, "classes": rows, "differing": [r["class"] for r in rows if r["differs"]],
            "worst_fp32": class_names[int(np.argmin(a))], "worst_bf16": class_names[int(np.argmin(b))],
            "mean_fp32": float(a.mean()), "mean_bf16": float(b.mean())}


def analyse(accuracy: Mapping[tuple[str, str, str], np.ndarray], images: Mapping[tuple[str, str], np.ndarray],
            class_names: Sequence[str]) -> dict:
    """The comparison of every preset: `accuracy[(preset, arm, metric)]` seeds x classes,
    `images[(preset, metric)]` the test images per class. A preset with one seed per arm borrows
    the spread of the preset with most seeds (widened_spread)."""
    presets = list(dict.fromkeys(p for p, _, _ in accuracy))
    seeds = {p: min(len(accuracy[(p, arm, METRICS[0])]) for arm in ARMS) for p in presets}
    donor = max(presets, key=lambda p: seeds[p])
    if seeds[donor] < 2:
        raise ValueError(f"no preset has two seeds per arm ({seeds}); the seed spread cannot be measured")
    out = {}
    for p in presets:
        out[p] = {"seeds": seeds[p], "metrics": {}}
        for m in METRICS:
            a, b = accuracy[(p, "fp32", m)], accuracy[(p, "bf16", m)]
            spread = pooled_spread(a, b)
            if spread is None:
                donor_spread = pooled_spread(accuracy[(donor, "fp32", m)], accuracy[(donor, "bf16", m)])
                spread = widened_spread(donor_spread, np.concatenate([a, b]).mean(axis=0),
                                        images[(donor, m)], images[(p, m)])
                out[p]["spread_from"] = donor
            out[p]["metrics"][m] = compare(a, b, spread, class_names)
    out_verdict = all(not r["metrics"][m]["differing"] for r in out.values() for m in METRICS)
    return {"presets": out, "rule": DIFFER_RULE, "unchanged": out_verdict}


def verdict_line(result: Mapping) -> str:
    differing = [f"{p} {m}: {', '.join(r['metrics'][m]['differing'])}" for p, r in result["presets"].items()
                 for m in METRICS if r["metrics"][m]["differing"]]
    if result["unchanged"]:
        return ("Verdict: bf16 does not change the class-wise finding: no class of any preset differs between bf16 "
                "and fp32 by more than the seed spread allows (the rule above).")
    return "Verdict: bf16 changes the class-wise finding: " + "; ".join(differing) + "."


def markdown(result: Mapping, facts: Mapping) -> str:
    lines = ["# bf16 against fp32, class by class (PGD-AT, fp32 evaluations)", "",
             f"- hardware: {facts['hardware']}; torch {facts['torch']}; commit {facts['commit']}; {facts['date']}",
             f"- rule: {result['rule']}", ""]
    for preset, r in result["presets"].items():
        spread = (f"spread from {r['spread_from']}'s seeds, widened for this preset's test images"
                  if "spread_from" in r else "spread from this preset's seeds")
        for m in METRICS:
            c = r["metrics"][m]
            lines += [f"## {preset}: {m} ({r['seeds']} seed{'s' if r['seeds'] > 1 else ''} per arm; {spread}; "
                      f"z = {c['z']:.2f})", "",
                      "| class | fp32 | bf16 | bf16 - fp32 | seed spread | SE of difference | differs |",
                      "|---|---:|---:|---:|---:|---:|---|"]
            lines += [f"| {row['class']} | {row['fp32']:.3f} | {row['bf16']:.3f} | {row['difference']:+.3f} "
                      f"| {row['seed_spread']:.3f} | {row['se']:.3f} | {'yes' if row['differs'] else 'no'} |"
                      for row in c["classes"]]
            lines += ["", f"Mean over classes: fp32 {c['mean_fp32']:.3f}, bf16 {c['mean_bf16']:.3f}; worst class: "
                      f"fp32 {c['worst_fp32']}, bf16 {c['worst_bf16']}.", ""]
    lines.append(verdict_line(result))
    return "\n".join(lines) + "\n"


def _device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "cpu"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["demo", "laptop"])
    ap.add_argument("--data", required=True, help="the prepared dataset the presets' runs train on (study prepare)")
    ap.add_argument("--work", default="results/bench/precision", help="where the runs and records go")
    ap.add_argument("--fp32-results", default=None, help="a results folder whose fp32 runs and records to reuse")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="results/bench/precision_classwise", help="stem of the .json and .md written")
    ap.add_argument("--root", default=".", help="the project folder (params.yaml, workflow/presets)")
    args = ap.parse_args(argv)
    import torch

    from study.data.registry import get_dataset_info
    from study.device import cpu_supports_bf16
    from study.provenance import provenance

    if not cpu_supports_bf16() and not torch.cuda.is_available():
        raise SystemExit("this CPU has no native bf16 (AVX-512 BF16 or AMX) and there is no GPU: "
                         "bf16 cannot be trained")
    root, work = Path(args.root), Path(args.work)
    cases = plan_cases(root, args.presets)
    datasets = {c.config["dataset"] for c in cases}
    if len(datasets) != 1:
        raise ValueError(f"the presets' runs train on several datasets {sorted(datasets)}; compare one at a time")
    info = get_dataset_info(datasets.pop())
    class_names = list(info.class_names)
    timings: dict = {}
    acc: dict[tuple[str, str, str], list] = {}
    images: dict[tuple[str, str], np.ndarray] = {}
    # bf16 first: the fp32 arm's pipeline runs (--fp32-results) may still be training meanwhile
    for case in sorted(cases, key=lambda c: (c.arm != "bf16", c.seed, c.preset)):
        print(f"{case.preset} {case.arm} seed {case.seed}: {case.run_id}", flush=True)
        records = run_case(case, Path(args.data), work, args.threads,
                           Path(args.fp32_results) if args.fp32_results else None, timings)
        for m, path in records.items():
            a, n = class_accuracies(path, len(class_names))
            acc.setdefault((case.preset, case.arm, m), []).append(a)
            images[(case.preset, m)] = n
    result = analyse({k: np.array(v) for k, v in acc.items()}, images, class_names)
    prov = provenance(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    facts = {"hardware": f"{_device_name()}, {args.threads} thread(s)", "torch": torch.__version__,
             "commit": str(prov.get("commit") or prov.get("git_commit") or "unknown")[:7],
             "date": time.strftime("%Y-%m-%d")}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({**result, "facts": facts, "timings": timings,
                                                    "runs": sorted({c.run_id for c in cases})}, indent=2) + "\n")
    text = markdown(result, facts)
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
