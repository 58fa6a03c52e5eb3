"""`study bench`: time our engine and the plain reference loop on the same tasks, data,
model and initial weights, in one process, and write the result as JSON plus a table."""

from __future__ import annotations

import copy
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from study.config.evaluations import AnyEvaluation
from study.config.types import LossPolicy, RunConfig, parse
from study.data.prepared import load_prepared
from study.data.splits import Splits, stratified_subset
from study.data.synthetic import make_synthetic
from study.device import (
    PRECISIONS,
    cpu_supports_bf16,
    describe,
    eval_batch_size,
    select_device,
    set_threads,
    tf32_flags,
)
from study.io import atomic_write_json, atomic_write_text
from study.models.registry import MODEL_NAMES, build_model, count_flops
from study.provenance import provenance
from study.train.setup import build_run_model, channel_stats
from tools.bench import extras, ours, reference
from tools.bench.peak import (
    BASIS_RULE,
    FLOPS_CONVENTION,
    combine_peaks,
    hardware_peak,
    honest_peak,
    measure_peak,
    peak_basis,
    task_flops,
)
from tools.bench.report import (
    AGREEMENT_RULE,
    accuracy_check,
    add_fractions,
    classwise_accuracy,
    markdown,
    named_records,
    precision_agreement,
    side_record,
    timed_records,
)

ALL_TASKS = ("standard_epoch", "pgd10_at_epoch", "trades_epoch", "pgd20_eval", "autoattack_eval")
#: The cheap AutoAttack both sides run: APGD-CE alone, 10 iterations, 1 restart.
AUTOATTACK_CUSTOM = {"version": "custom", "attacks": ["apgd-ce"], "iterations": 10}
WARMUP_IMAGES = 2  # evaluations: one untimed call per side first, so neither pays first-call costs
EVALUATION_PRECISION_NOTE = ("evaluations are fp32 by design (study.predict, docs/methods.md: Precision): timed in "
                             "fp32 only, whatever --precision says")


def _check_precisions(precisions: Sequence[str], dev: torch.device | None = None) -> list[str]:
    """The precisions, each once, in the order given; bf16 only where study.device.train_autocast
    runs it (a GPU, or a CPU with native bf16): elsewhere it is refused before any work."""
    precisions = list(dict.fromkeys([precisions] if isinstance(precisions, str) else precisions))
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad or not precisions:
        raise ValueError(f"unknown precision(s) {bad or precisions}; valid: {', '.join(PRECISIONS)}")
    if dev is not None and dev.type != "cuda" and "bf16" in precisions and not cpu_supports_bf16():
        raise ValueError(f"--precision bf16: bf16 autocast needs a GPU or a CPU with native bf16 (AVX-512 BF16 "
                         f"or AMX) and the device is {describe(dev)}; valid here: fp32")
    return precisions


def _check_args(tasks: Sequence[str], model: str, accuracy_epochs: int, batch_size: int) -> list[str]:
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    bad = [t for t in tasks if t not in ALL_TASKS]
    if bad or not tasks:
        raise ValueError(f"unknown task(s) {bad or tasks}; valid tasks: {', '.join(ALL_TASKS)}")
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model {model!r}; valid models: {', '.join(MODEL_NAMES)}")
    if "pgd10_at_epoch" in tasks and accuracy_epochs < 2:
        raise ValueError(f"accuracy_epochs must be >= 2 (the second epoch is the timed one), got {accuracy_epochs}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    # Canonical order: the PGD-AT model is trained before the evaluations that use it.
    return [t for t in ALL_TASKS if t in tasks]


def _load(data: str | Path | None, images: int, test_images: int, seed: int) -> Splits:
    if data is not None:
        return load_prepared(data)
    return make_synthetic(num_classes=10, train_per_class=max(1, math.ceil(images / 10)),
                          test_per_class=max(1, math.ceil(test_images / 10)), image_size=32, seed=seed)


def _hardware(dev: torch.device) -> dict:
    cpu = platform.processor() or ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name")) or cpu
    except (OSError, StopIteration):
        pass
    return {"device": str(dev), "device_name": describe(dev), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "cpu_model": cpu,
            "cuda_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
            "cuda_version": torch.version.cuda, "provenance": provenance(dev),
            # Other processes on the machine slow both sides; the load says how busy it was.
            "load_average_1min_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


def per_sample_identity(engine_pred: np.ndarray, reference_pred: np.ndarray, labels: np.ndarray,
                        seed: int) -> dict:
    """Whether the two sides found the same robust set: each sample's robust flag (its prediction
    on the attacked input equals its label) from the engine's cascade (`predict`) and from
    pyautoattack's run_standard_evaluation, both with AutoAttack seed `seed`."""
    eng, ref = np.asarray(engine_pred) == labels, np.asarray(reference_pred) == labels
    differ = np.flatnonzero(eng != ref)
    return {"compared": "per-sample robust flags: engine predict (study.attacks.autoattack cascade) against "
                        "pyautoattack run_standard_evaluation", "seed": {"engine": seed, "reference": seed},
            "n": int(len(labels)), "robust_engine": int(eng.sum()), "robust_reference": int(ref.sum()),
            "disagreements": int(differ.size), "identical": bool(differ.size == 0),
            "disagreeing_samples": differ[:50].tolist()}


def _epoch_breakdown(eng: dict) -> dict:
    """The engine's timed (second) epoch in full: its training loop, the whole epoch, and what
    the epoch adds to the loop (the per-epoch evaluation and the checkpoint write), measured
    in the same run, with the re-timed overhead beside it."""
    loop, whole = float(eng["seconds"]), float(eng["epoch_seconds"][1])
    return {"loop_seconds": loop, "epoch_seconds": whole, "eval_and_checkpoint_seconds": whole - loop,
            "eval_and_checkpoint_fraction": (whole - loop) / whole if whole > 0 else None,
            "eval_and_checkpoint_retimed_seconds": float(eng["overhead"])}


def _attempt(name: str, fn: Callable[[], dict], progress: bool) -> dict:
    """fn()'s result, or a record of its failure ({failed, error}): one failing task (or extra)
    costs its own row of the report, not the report."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - any failure of one task is reported, the others kept
        if progress:
            traceback.print_exc()
        print(f"{name}: failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return {"failed": True, "error": f"{type(err).__name__}: {' '.join(str(err).split())}"}


def _ratio(n_a: int, sec_a: float, n_b: int, sec_b: float) -> float | None:
    """(n_a / sec_a) / (n_b / sec_b); None where a time is not positive."""
    return (n_a / sec_a) / (n_b / sec_b) if sec_a > 0 and sec_b > 0 else None


class _Bench:
    """State shared by the tasks of one bench run."""

    def __init__(self, splits: Splits, model: str, per_class: int, test_per_class: int, *, dev: torch.device,
                 seed: int, batch_size: int, accuracy_epochs: int, progress: bool, tmp: Path,
                 compile_modes: Sequence[str] = ("auto",), precisions: Sequence[str] = ("fp32",)):
        self.compile_modes, self.precisions = list(compile_modes), list(precisions)
        # the engine model compared with the reference (which trains in fp32), and evaluated
        self.engine_precision = "fp32" if "fp32" in self.precisions else self.precisions[0]
        self.splits, self.model_name, self.per_class = splits, model, per_class
        self.dev, self.seed, self.batch_size = dev, seed, batch_size
        self.accuracy_epochs, self.progress, self.tmp = accuracy_epochs, progress, tmp
        self.params, self.params_path = ours.load_bench_params()
        self.train_idx = stratified_subset(splits.train_y, per_class)
        test_idx = stratified_subset(splits.test_y, test_per_class)
        self.test_x, self.test_y = splits.test_x[test_idx], splits.test_y[test_idx]
        self.test_hwc, self.test_np = reference.hwc_numpy(self.test_x), self.test_y.numpy()
        self.peak = measure_peak(dev)
        self.forward = count_flops(self._fresh_model(), splits.image_shape)
        self.at_models: dict[str, torch.nn.Module] = {}  # side -> model after PGD-10 AT
        self.precision_models: dict[str, torch.nn.Module] = {}  # precision -> engine model after PGD-10 AT
        self.cache: dict[str, np.ndarray] = {}  # engine predictions reused by the accuracy check
        self.same_init: bool | None = None

    def _fresh_model(self) -> torch.nn.Module:
        """The engine's architecture and initial weights (build_run_model after manual_seed)."""
        mean, std = channel_stats(self.splits.train_x[self.train_idx])
        torch.manual_seed(self.seed)
        s = self.splits
        return build_model(self.model_name, s.num_classes, in_channels=s.image_shape[0],
                           image_size=s.image_shape[1], mean=tuple(mean), std=tuple(std))

    def _sides(self, task: str, engine: tuple[int, float], ref: tuple[int, float], flops: float,
               accounting: str, precision: str = "fp32", **extra) -> dict:
        # Both sides ran under the switches in effect now (a training task's run sets them: train.tf32);
        # the engine in `precision` (the reference always in fp32).
        tf32 = tf32_flags()
        sides = {side: side_record(n, sec, flops, peak_basis(self.dev, tf32, p))
                 for side, (n, sec), p in (("engine", engine, precision), ("reference", ref, "fp32"))}
        speedup = sides["engine"]["images_per_s"] / sides["reference"]["images_per_s"]
        return {**sides, "speedup": speedup, "flops_accounting": accounting, "tf32": tf32, "precision": precision,
                **extra}

    def _run_dir(self, task: str, precision: str, mode: str) -> Path:
        if (precision, mode) == (self.precisions[0], self.compile_modes[0]):
            return self.tmp / task
        return self.tmp / f"{task}-{precision}-{mode}"

    def _engine_runs(self, task: str, epochs: int) -> tuple[dict[str, dict], dict[tuple[str, str], dict]]:
        """(run config by precision, timed run by (precision, compile setting)): the same run once per
        precision (train.precision) and compile setting, timed the same way, the headline first."""
        cfgs = {p: ours.train_config(self.params, self.splits, task, self.model_name, per_class=self.per_class,
                                     epochs=epochs, batch_size=self.batch_size, seed=self.seed, precision=p)
                for p in self.precisions}
        runs = {(p, mode): ours.train_task(cfgs[p], self.splits, self._run_dir(task, p, mode), self.dev,
                                           self.progress, mode)
                for p in self.precisions for mode in self.compile_modes}
        return cfgs, runs

    def train(self, task: str) -> dict:
        epochs = self.accuracy_epochs if task == "pgd10_at_epoch" else 2
        head = (self.precisions[0], self.compile_modes[0])
        cfgs, runs = self._engine_runs(task, epochs)
        cfg, eng = cfgs[head[0]], runs[head]

        model = self._fresh_model()
        torch.manual_seed(self.seed)
        run = parse(RunConfig, cfg, "bench run config")
        engine_init, _ = build_run_model(run.model, self.splits, self.splits.train_x[self.train_idx])
        self.same_init = all(torch.equal(a, b) for a, b in
                             zip(model.state_dict().values(), engine_init.state_dict().values(), strict=True))
        method = run.method_config
        adversary = method.adversary
        torch.manual_seed(self.seed)  # the reference's shuffling, augmentation and random starts
        ref_seconds = reference.train_reference(
            model.to(self.dev), reference.hwc_numpy(self.splits.train_x[self.train_idx]),
            self.splits.train_y[self.train_idx].numpy(), method=ours.TRAIN_METHODS[task], epochs=epochs,
            batch_size=self.batch_size, optimizer=run.optimizer, schedule=run.schedule,
            adversary=adversary, beta=(method.loss or LossPolicy()).beta, device=self.dev,
            padding=run.augment.crop_padding, flip=run.augment.flip)
        if task == "pgd10_at_epoch":
            self.precision_models = {p: ours.trained_model(self._run_dir(task, p, head[1]), self.dev)
                                     for p in self.precisions}
            self.at_models = {"engine": self.precision_models[self.engine_precision], "reference": model.eval()}
        flops, accounting = task_flops(task, self.forward, steps=adversary.steps if adversary is not None else 0)
        n = eng["images"]

        def record(p: str, mode: str) -> dict:
            e = runs[(p, mode)]
            return {**side_record(n, e["seconds"], flops, peak_basis(self.dev, precision=p)),
                    "speedup": (n / e["seconds"]) / (n / ref_seconds[1])}

        return self._sides(task, (n, eng["seconds"]), (n, ref_seconds[1]), flops, accounting, precision=head[0],
                           compile=head[1], engine_by_compile={m: record(head[0], m) for m in self.compile_modes[1:]},
                           engine_by_precision={p: {m: record(p, m) for m in self.compile_modes}
                                                for p in self.precisions[1:]},
                           epochs=epochs, timed_epoch=2, engine_epoch_seconds=eng["epoch_seconds"],
                           reference_epoch_seconds=ref_seconds, method=run.method,
                           adversary=adversary.model_dump(exclude_unset=True) if adversary is not None else None,
                           same_initial_weights=self.same_init, engine_epoch_overhead_seconds=eng["overhead"],
                           speedup_whole_epoch=_ratio(n, float(eng["epoch_seconds"][1]), n, ref_seconds[1]),
                           engine_epoch=_epoch_breakdown(eng),
                           note="engine time: the second epoch's training batches (meta.json train_loop_seconds), "
                                "as the reference's; its whole epoch adds the per-epoch clean evaluation of 1 "
                                "image per class and the checkpoint write (engine_epoch: the loop beside the "
                                "whole epoch and their difference; speedup_whole_epoch; the two re-timed as "
                                "engine_epoch_overhead_seconds)")

    def _eval_models(self) -> tuple[torch.nn.Module, torch.nn.Module, str]:
        if "engine" in self.at_models:
            m = self.at_models["engine"]
            return m, copy.deepcopy(m), (f"the engine's PGD-10 AT model after {self.accuracy_epochs} epochs "
                                         f"(trained in {self.engine_precision})")
        m = self._fresh_model().to(self.dev).eval()
        return m, copy.deepcopy(m), f"untrained (seed {self.seed}): run pgd10_at_epoch too for a trained one"

    def evaluate(self, task: str) -> dict:
        eng_model, ref_model, which = self._eval_models()
        x, y, hwc, ynp, dev = self.test_x, self.test_y, self.test_hwc, self.test_np, self.dev
        batch = eval_batch_size(ours.evaluation(self.params, "pgd20").batch_size, dev)
        w = WARMUP_IMAGES
        if task == "pgd20_eval":
            ev = ours.evaluation(self.params, "pgd20")

            def ref_run(n):
                return reference.eval_pgd(ref_model, hwc[:n], ynp[:n], eps=ev.eps, alpha=ev.alpha,
                                          steps=ev.steps, batch_size=batch, device=dev)
        else:
            # One seed for both sides (pyautoattack's), and pyautoattack's batches of the same size.
            ev = ours.evaluation(self.params, "autoattack", **AUTOATTACK_CUSTOM, seed=self.seed)
            aa_batch = eval_batch_size(ev.batch_size, dev)

            def ref_run(n):
                return reference.eval_autoattack(ref_model, hwc[:n], ynp[:n], attack=ev,
                                                 batch_size=aa_batch, device=dev, seed=ev.seed)
        ours.timed_predict(eng_model, x[:w], y[:w], ev, device=dev, seed=self.seed)
        ref_run(w)
        eng_s, eng_pred = ours.timed_predict(eng_model, x, y, ev, device=dev, seed=self.seed)
        ref_s, ref_pred = ref_run(len(y))
        if task == "pgd20_eval":
            self.cache["engine_pgd20"] = eng_pred.pred
            flops, accounting = task_flops(task, self.forward, steps=ev.steps)
        else:
            attacked = float(np.mean(eng_pred.broken_by != "clean"))
            flops, accounting = task_flops(task, self.forward, iterations=ev.iterations, attacked=attacked)
        n = len(y)
        extra = {"per_sample": per_sample_identity(eng_pred.pred, ref_pred, ynp, ev.seed)} \
            if task == "autoattack_eval" else {}
        return self._sides(task, (n, eng_s), (n, ref_s), flops, accounting, evaluated_model=which,
                           precision_note=EVALUATION_PRECISION_NOTE,
                           attack=ev.model_dump(exclude_unset=True, exclude={"shards", "test_per_class"}),
                           robust_accuracy={"engine": ours.accuracy(eng_pred.pred, y),
                                            "reference": ours.accuracy(ref_pred, y)}, **extra)

    def _pgd20(self, model: torch.nn.Module, ev: AnyEvaluation) -> np.ndarray:
        return ours.timed_predict(model, self.test_x, self.test_y, ev, device=self.dev, seed=self.seed)[1].pred

    def accuracy(self) -> dict:
        """Clean and PGD-20 accuracy of the two PGD-AT models, both through `predict`; and, where
        this run trained both, the bf16 engine model against the fp32 one, class by class."""
        ev = ours.evaluation(self.params, "pgd20")
        accs, robust = {}, {}
        for side, model in self.at_models.items():
            clean = ours.timed_predict(model, self.test_x, self.test_y, None, device=self.dev, seed=self.seed)[1]
            cached = self.cache.get("engine_pgd20") if side == "engine" else None
            robust[side] = cached if cached is not None else self._pgd20(model, ev)
            accs[side] = {"clean": ours.accuracy(clean.pred, self.test_y),
                          "pgd20": ours.accuracy(robust[side], self.test_y)}
        out = accuracy_check(accs["engine"], accs["reference"], len(self.test_y))
        out["engine_precision"] = self.engine_precision
        agreement = None
        if {"fp32", "bf16"} <= set(self.precision_models):  # the engine side is then the fp32 model
            k = self.splits.num_classes
            fp32, counts = classwise_accuracy(robust["engine"], self.test_np, k)
            bf16, _ = classwise_accuracy(self._pgd20(self.precision_models["bf16"], ev), self.test_np, k)
            agreement = precision_agreement(fp32, bf16, counts, self.splits.class_names)
        return {**out, "bf16_vs_fp32": agreement, "bf16_matches_fp32": agreement["matches"] if agreement else None}


def _run_tasks(bench: _Bench, tasks: Sequence[str], progress: bool) -> dict:
    """Each task's record; a task that fails is recorded as failed (its error) and the others run."""
    results = {}
    for task in tasks:
        results[task] = _attempt(task, lambda t=task: bench.train(t) if t in ours.TRAIN_METHODS else bench.evaluate(t),
                                 progress)
        r = results[task]
        if progress and not r.get("failed"):
            print(f"{task}: engine {r['engine']['images_per_s']:.3g} img/s, reference "
                  f"{r['reference']['images_per_s']:.3g} img/s, {r['speedup']:.1f}x", file=sys.stderr, flush=True)
    return results


def _extras(bench: _Bench, out: Path, threads: int | None, profile: bool, concurrent: int | None) -> dict:
    """The profile tables and the concurrent throughput, on a PGD-10 AT run (each failure recorded)."""
    if not profile and not concurrent:
        return {}
    cfg = ours.train_config(bench.params, bench.splits, "pgd10_at_epoch", bench.model_name, per_class=bench.per_class,
                            epochs=1, batch_size=bench.batch_size, seed=bench.seed, precision=bench.precisions[0])
    found: dict = {}
    if profile:
        found["profile"] = [
            {"compile": mode, **_attempt(f"profile {mode}", lambda m=mode: extras.profile_steps(
                cfg, bench.splits, bench.tmp / f"profile-{m}", str(bench.dev), m,
                out.with_name(f"{out.stem}.profile-{m}.txt")), bench.progress)}
            for mode in bench.compile_modes]
    if concurrent:
        found["concurrent"] = _attempt("concurrent", lambda: extras.concurrent_throughput(
            cfg, bench.splits, bench.tmp, str(bench.dev), bench.compile_modes[0], concurrent, threads), bench.progress)
    return found


def run_bench(out: str | Path, *, data: str | Path | None = None, model: str = "preact_resnet18",
              images: int = 1024, test_images: int = 256, tasks: Sequence[str] = ALL_TASKS,
              device: str = "auto", seed: int = 0, batch_size: int = 128, threads: int | None = None,
              accuracy_epochs: int = 2, progress: bool = True, compile_modes: Sequence[str] = ("auto",),
              profile: bool = False, concurrent: int | None = None, precisions: Sequence[str] = ("fp32",)) -> dict:
    """Time each task for the engine and the reference; write `out` (JSON) and `out`.md.

    Training tasks use the first `images` training images (class-stratified), evaluations
    the first `test_images` test images; `data` is a prepared dataset file, None for
    synthetic CIFAR-sized data. Nothing about the timings is asserted.

    `compile_modes` (speed.compile values) times the engine's training tasks once per mode,
    the first being the headline; `profile` writes a torch.profiler table of the PGD-10 AT
    step per mode beside `out`; `concurrent` K times K training processes sharing the device
    against one alone.

    `precisions` (train.precision values; bf16 on a GPU or a CPU with native bf16) times the engine's training tasks
    once per precision and compile setting, the first precision being the headline; evaluations
    are fp32 by design. Where both fp32 and bf16 train the PGD-10 AT model, the accuracy check
    compares their class-wise PGD-20 accuracy (`bf16_matches_fp32`, report.AGREEMENT_RULE)."""
    tasks = _check_args(tasks, model, accuracy_epochs, batch_size)
    precisions = _check_precisions(precisions)
    dev = select_device(device)
    _check_precisions(precisions, dev)  # before anything is set or made
    set_threads(threads)
    started = time.time()
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    splits = _load(data, images, test_images, seed)
    per_class, test_per_class = images // splits.num_classes, test_images // splits.num_classes
    if per_class < 1 or test_per_class < 1:
        raise ValueError(f"images and test_images must be >= the number of classes ({splits.num_classes}); "
                         f"got {images} and {test_images}")
    with tempfile.TemporaryDirectory(prefix="study-bench-") as tmp:
        bench = _Bench(splits, model, per_class, test_per_class, dev=dev, seed=seed, batch_size=batch_size,
                       accuracy_epochs=accuracy_epochs, progress=progress, tmp=Path(tmp), compile_modes=compile_modes,
                       precisions=precisions)
        results = _run_tasks(bench, tasks, progress)
        acc = _attempt("accuracy", bench.accuracy, progress) if bench.at_models else None
        extras = _extras(bench, Path(out), threads, profile, concurrent)
        # no fraction of peak above 1: the hardware's, the matmul's or the fastest task's (peak.honest_peak)
        peak = honest_peak(combine_peaks(bench.peak, measure_peak(dev)),
                           hardware_peak(torch.get_num_threads()) if dev.type == "cpu" else None,
                           named_records(results))
        add_fractions(results, peak["flops"])
        peak["basis_used"] = sorted({rec["peak_basis"] for r in results.values() if not r.get("failed")
                                     for rec in timed_records(r)})
        peak["basis_rule"] = BASIS_RULE
        if acc and progress:
            print(f"accuracy after PGD-10 AT: engine {acc.get('engine')}, reference {acc.get('reference')}, "
                  f"ok {acc.get('ok')}; bf16_matches_fp32 {acc.get('bf16_matches_fp32')}", file=sys.stderr, flush=True)
    hardware = _hardware(dev)
    hardware["load_average_1min_start"] = load_start
    settings = {"data": str(data) if data is not None else "synthetic", "model": model,
                "train_images": int(bench.train_idx.numel()), "test_images": int(bench.test_y.numel()),
                "tasks": tasks, "device": device, "seed": seed, "batch_size": batch_size,
                "precisions": precisions, "evaluation_precision": "fp32", "precision_agreement_rule": AGREEMENT_RULE,
                "threads": threads, "accuracy_epochs": accuracy_epochs, "params": bench.params_path,
                "autoattack_custom": AUTOATTACK_CUSTOM, "eval_warmup_images": WARMUP_IMAGES,
                "seeds": {"data": seed, "model_init": seed, "engine_runs": seed, "reference": seed,
                          "evaluations": seed, "autoattack": seed}}
    report = {
        "format": "study.bench/1",
        "settings": settings,
        "hardware": hardware,
        "peak": peak,
        "flops_convention": FLOPS_CONVENTION,
        "model": {"name": model, "forward_flops": bench.forward,
                  "parameters": sum(p.numel() for p in bench._fresh_model().parameters())},
        "tasks": results,
        "failed": [name for name, r in {**results, **extras}.items() if isinstance(r, dict) and r.get("failed")]
                  + [f"profile {p.get('compile')}" for p in extras.get("profile", []) if p.get("failed")]
                  + (["accuracy"] if acc and acc.get("failed") else []),
        "accuracy": acc,
        "accuracy_ok": acc.get("ok") if acc else None,
        "bf16_matches_fp32": acc.get("bf16_matches_fp32") if acc else None,
        **extras,
        "wall_seconds": time.time() - started,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
    }
    out = Path(out)
    atomic_write_json(out, report)
    atomic_write_text(out.with_suffix(".md"), markdown(report))
    return report
