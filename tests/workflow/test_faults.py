"""Bad input through the `study` command, one row per fault: a non-zero exit, one line on
stderr that names the bad value (file, key path, value) and what is valid, no traceback,
and a state from which the corrected command succeeds (run here). Then interrupted jobs:
an evaluation, a corruption evaluation and a feature construction, each stopped part way
and rerun, end with the records of an uninterrupted run. docs/reliability.md lists the
messages seen here."""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from helpers.commands import run_study
from helpers.data_archives import (
    digest,
    make_cifar10_jpeg_archive,
    make_cifar10_official_archive,
    make_mnist_files,
    make_svhn_mat,
    make_tinyimagenet_zip,
)
from helpers.workflow import ROOT

from study.cli import build_parser, main
from study.config.spec import ConfigSpec
from study.data import cifar10, mnist, registry, svhn, tinyimagenet
from study.data.download import ArchiveSpec
from study.evaluate.records import read_records

PRESETS, SCHEMA = ROOT / "workflow/presets", ROOT / "workflow/schemas/params.schema.yaml"
# Set to a file path to collect every message seen (docs/reliability.md quotes them).
MESSAGE_LOG = os.environ.get("STUDY_FAULT_MESSAGES")


def _synthetic(params) -> dict:
    """The synthetic data's settings as `study prepare --synthetic` takes them (the keys params set)."""
    return params.data.synthetic.model_dump(exclude_unset=True)


def fails(capsys, argv: list[str], *named: str) -> str:
    """Run `study ARGV` in-process: non-zero exit, exactly one stderr line naming `named`."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as stop:  # an argument the parser refuses
        rc = stop.code
    err = capsys.readouterr().err
    assert rc != 0, err
    assert "Traceback" not in err
    # the error is the last line, and the only one; lines before it are the job's log
    lines = err.strip().splitlines()
    errors = [line for line in lines if re.match(r"study(?: [\w-]+)?: error: ", line)]
    assert len(errors) == 1 and errors[0] == lines[-1], f"expected one error line, last, got:\n{err}"
    for text in named:
        assert str(text) in errors[0], (text, errors[0])
    if MESSAGE_LOG:
        with open(MESSAGE_LOG, "a") as fh:
            fh.write(json.dumps({"argv": [str(a) for a in argv][:2], "message": errors[0]}) + "\n")
    return errors[0]


def succeeds(capsys, argv: list[str]) -> str:
    """Run `study ARGV` in-process: exit 0; returns what it printed."""
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


# --- archives ------------------------------------------------------------------------------

def _mnist(mirror: Path):
    _, md5s = make_mnist_files(mirror / "mnist", 20, 10)
    specs = tuple(ArchiveSpec(s.filename, None, md5=md5s[s.filename], mirror_subdirs=("mnist",),
                              gunzipped_checksums=True) for s in mnist.ARCHIVES)
    return ("mnist", "official"), specs, mnist.load_mnist, mirror / "mnist" / mnist.ARCHIVES[0].filename


def _cifar10_tar(mirror: Path):
    path, md5 = make_cifar10_official_archive(mirror / cifar10.OFFICIAL_ARCHIVE.filename, 2, 1)
    return ("cifar10", "official"), (ArchiveSpec(path.name, None, md5=md5),), cifar10.load_cifar10_official, path


def _cifar10_jpeg(mirror: Path):
    path, sha = make_cifar10_jpeg_archive(mirror / cifar10.JPEG_ARCHIVE.filename, 2, 1)
    return ("cifar10", "jpeg"), (ArchiveSpec(path.name, None, sha256=sha),), cifar10.load_cifar10_jpeg, path


def _svhn_mat(mirror: Path):
    mirror.mkdir(parents=True, exist_ok=True)
    names = (svhn.TRAIN_ARCHIVE.filename, svhn.TEST_ARCHIVE.filename)
    for seed, name in enumerate(names):
        make_svhn_mat(mirror / name, 10, seed=seed)
    specs = tuple(ArchiveSpec(name, None, md5=digest(mirror / name, "md5")) for name in names)
    return ("svhn", "official"), specs, svhn.load_svhn, mirror / names[0]


def _tiny_zip(mirror: Path):
    wnids = [f"n{i:08d}" for i in range(tinyimagenet.NUM_CLASSES)]
    path = make_tinyimagenet_zip(mirror / tinyimagenet.ARCHIVE.filename, wnids, {w: w for w in wnids}, 1, 1)
    return ("tinyimagenet", "official"), (ArchiveSpec(path.name, None, md5=digest(path, "md5")),), \
        tinyimagenet.load_tinyimagenet, path


FORMATS = {"gzip_idx": _mnist, "tar_pickle": _cifar10_tar, "tar_jpeg": _cifar10_jpeg, "mat": _svhn_mat,
           "zip_jpeg": _tiny_zip}


def _damage(path: Path, how: str) -> bytes:
    data = bytearray(path.read_bytes())
    if how == "flip":
        # inside the compressed stream / member data, past every format's header
        data[len(data) // 3] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    return bytes(data)


def _use(monkeypatch, key, specs, load):
    monkeypatch.setitem(registry.SOURCES, key, registry.DataSource(archives=tuple(specs), load=load))


def _prepare_argv(key, tmp_path: Path) -> list:
    return ["prepare", "--dataset", key[0], "--variant", key[1], "--raw-dir", tmp_path / "raw",
            "--mirror", tmp_path / "mirror", "--out", tmp_path / "out.pt", "--no-progress"]


@pytest.mark.parametrize("how", ["flip", "truncate"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_damaged_mirror_archive_is_refused_by_its_checksum(tmp_path, monkeypatch, capsys, fmt, how):
    key, specs, load, target = FORMATS[fmt](tmp_path / "mirror")
    _use(monkeypatch, key, specs, load)
    good = target.read_bytes()
    bad = _damage(target, how)
    spec = next(s for s in specs if s.filename == target.name)
    fails(capsys, _prepare_argv(key, tmp_path), "checksum mismatch", target, spec.describe_checksums().split()[1],
          "replace it with a good copy")
    assert target.read_bytes() == bad, "the mirror copy is left as it was"
    assert not (tmp_path / "raw" / target.name).exists() and not (tmp_path / "out.pt").exists()
    target.write_bytes(good)
    succeeds(capsys, _prepare_argv(key, tmp_path))
    assert (tmp_path / "out.pt").is_file()


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "gzip_idx"])  # gzip: checked on its content
def test_archive_matching_its_checksum_but_unreadable_is_named(tmp_path, monkeypatch, capsys, fmt):
    """A damaged file that its (wrong) checksum lets through: the loader's error names it."""
    key, specs, load, target = FORMATS[fmt](tmp_path / "mirror")
    good = target.read_bytes()
    _damage(target, "truncate")
    damaged = [ArchiveSpec(s.filename, None, md5=digest(target.parent / s.filename, "md5")) for s in specs]
    _use(monkeypatch, key, damaged, load)
    fails(capsys, _prepare_argv(key, tmp_path), f"{key[0]}/{key[1]}", tmp_path / "raw" / target.name,
          "replace it with a good copy")
    assert not (tmp_path / "out.pt").exists()
    target.write_bytes(good)
    _use(monkeypatch, key, specs, load)
    succeeds(capsys, _prepare_argv(key, tmp_path))  # the damaged raw copy is set aside as .corrupt
    assert (tmp_path / "raw" / f"{target.name}.corrupt").exists()


def test_gzip_stream_damage_is_a_checksum_error_not_a_zlib_error(tmp_path, monkeypatch, capsys):
    key, specs, load, target = _mnist(tmp_path / "mirror")
    _use(monkeypatch, key, specs, load)
    good = bytearray(target.read_bytes())
    bad = bytearray(good)
    bad[12:40] = bytes(28)  # the first deflate block: zlib raises zlib.error, which is no OSError
    target.write_bytes(bytes(bad))
    fails(capsys, _prepare_argv(key, tmp_path), target, "not readable gzip")
    assert not (tmp_path / "out.pt").exists()
    target.write_bytes(bytes(good))
    succeeds(capsys, _prepare_argv(key, tmp_path))
    assert (tmp_path / "out.pt").is_file()


def test_truncated_image_in_the_hand_placed_imagenet_folder_is_named(tmp_path, capsys):
    """The JPEG folder (`val/<wnid>/*.JPEG`, no checksum): the loader names the bad image."""
    import io

    from PIL import Image

    from study.data import imagenet

    buf = io.BytesIO()
    Image.new("RGB", (20, 20), (10, 20, 30)).save(buf, format="JPEG")
    val = tmp_path / "raw" / "imagenet" / "val"
    for k in range(imagenet.NUM_CLASSES):
        (val / f"n{k:08d}").mkdir(parents=True)
        (val / f"n{k:08d}" / f"ILSVRC2012_val_{k:08d}.JPEG").write_bytes(buf.getvalue())
    bad = next((val / "n00000007").iterdir())
    bad.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    argv = ["prepare", "--dataset", "imagenet", "--variant", "val", "--raw-dir", tmp_path / "raw", "--options",
            json.dumps({"per_class": 1, "image_size": 16}), "--out", tmp_path / "i.pt", "--no-progress"]
    fails(capsys, argv, bad, "is not a readable image")
    assert not (tmp_path / "i.pt").exists()
    bad.write_bytes(buf.getvalue())
    succeeds(capsys, argv)


def test_missing_mirror_file_says_where_to_put_it(tmp_path, monkeypatch, capsys):
    key, specs, load, target = _cifar10_tar(tmp_path / "elsewhere")
    _use(monkeypatch, key, specs, load)
    (tmp_path / "mirror").mkdir()
    fails(capsys, _prepare_argv(key, tmp_path), target.name, "is not available", tmp_path / "raw" / target.name,
          "STUDY_DATA_MIRROR")
    assert not (tmp_path / "out.pt").exists()
    shutil.copy(target, tmp_path / "mirror" / target.name)
    succeeds(capsys, _prepare_argv(key, tmp_path))
    assert (tmp_path / "out.pt").is_file()


def test_unknown_dataset_and_variant(tmp_path, capsys, ci_params):
    out = tmp_path / "x.pt"
    fails(capsys, ["prepare", "--dataset", "imagenet42", "--variant", "official", "--out", out],
          "'imagenet42'", *registry.DATASETS)
    fails(capsys, ["prepare", "--dataset", "synthetic", "--variant", "huge", "--out", out],
          "'huge'", *registry.DATASETS["synthetic"].variants)
    assert not out.exists()
    succeeds(capsys, ["prepare", "--dataset", "synthetic", "--variant", "default", "--out", out,
                      "--synthetic", json.dumps({**_synthetic(ci_params), "train_per_class": 2, "test_per_class": 1})])
    assert out.is_file()


# --- the study's configuration ---------------------------------------------------------------

def _plan_argv(presets: Path) -> list:
    return ["plan", "--params", ROOT / "params.yaml", "--preset", "ci", "--presets-dir", presets, "--schema", SCHEMA]


def _set(tree: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for key in parents:
        tree = tree.setdefault(key, {})
    tree[last] = value


CONFIG_FAULTS = {
    # key path in the ci preset -> (bad value, what the message must name)
    "negative eps": ("methods.pgd_at.adversary.eps", -0.1, ["methods.pgd_at.adversary.eps: -0.1 is not valid",
                                                             ">= 0"]),
    "NaN eps": ("evaluations.pgd3.eps", math.nan, ["evaluations.pgd3.eps: nan is not valid", "a number >= 0"]),
    "lr 0": ("train.optimizer.lr", 0, ["train.optimizer.lr: 0 is not valid", "a number > 0"]),
}


@pytest.mark.parametrize("fault", list(CONFIG_FAULTS))
def test_bad_value_in_the_configuration_names_its_key_path(tmp_path, capsys, fault):
    path, value, named = CONFIG_FAULTS[fault]
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets)
    preset = yaml.safe_load((presets / "ci.yaml").read_text())
    _set(preset, path, value)
    (presets / "ci.yaml").write_text(yaml.safe_dump(preset))
    fails(capsys, _plan_argv(presets), presets / "ci.yaml", *named)
    assert succeeds(capsys, _plan_argv(PRESETS)).startswith("preset ci: ")


def _group_fault(kind: str):
    """Edit the ci preset's first experiment group to use an unknown name of `kind`."""
    from study.models.registry import MODEL_NAMES

    bad = {"dataset": "imagenet42", "model": "resnet9000", "method": "magic_at", "evaluation": "pgd99"}[kind]
    valid = {"dataset": sorted(registry.DATASETS), "model": MODEL_NAMES, "method": ["pgd_at", "trades"],
             "evaluation": ["clean", "pgd3"]}[kind]

    def edit(group):
        if kind == "dataset":
            group["dataset"] = bad
        else:
            group.setdefault(f"{kind}s", ["clean"]).append(bad)
    return bad, valid, edit


@pytest.mark.parametrize("kind", ["dataset", "model", "method", "evaluation"])
def test_unknown_name_in_an_experiment_group_lists_the_valid_ones(tmp_path, capsys, kind):
    bad, valid, edit = _group_fault(kind)
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets)
    preset = yaml.safe_load((presets / "ci.yaml").read_text())
    edit(preset["experiments"][0])
    (presets / "ci.yaml").write_text(yaml.safe_dump(preset))
    fails(capsys, _plan_argv(presets), presets / "ci.yaml", f"unknown {kind} {bad!r}", *valid)
    assert succeeds(capsys, _plan_argv(PRESETS)).startswith("preset ci: ")


def test_unknown_preset_lists_the_presets(capsys):
    argv = _plan_argv(PRESETS)
    argv[argv.index("ci")] = "nosuch"
    fails(capsys, argv, "'nosuch'", *(p.stem for p in PRESETS.glob("*.yaml")))
    assert succeeds(capsys, _plan_argv(PRESETS)).startswith("preset ci: ")


# --- training -------------------------------------------------------------------------------

def _tiny_run_config(ci_params) -> dict:
    """A one-epoch standard small CNN on a few synthetic images (about a second)."""
    from study.config import plan_runs

    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard"
               and r.config["model"] == "small_cnn").config
    return copy.deepcopy({**cfg, "epochs": 1, "train_per_class": 8, "epoch_eval": {**cfg["epoch_eval"],
                                                                                   "per_class": 2}})


@pytest.fixture()
def run_cfg(ci_params):
    return _tiny_run_config(ci_params)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, ci_params, synthetic_splits) -> Path:
    """A trained run that the interrupted jobs read (they never change it)."""
    from study.train.engine import train_run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = {**_tiny_run_config(ci_params), "train_per_class": 20}
    run_dir = tmp_path_factory.mktemp("tiny") / ConfigSpec.parse(cfg).run_id  # evaluated: named by its run id
    try:
        train_run(cfg, synthetic_splits, run_dir, device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)
    return run_dir


def _train_argv(data, run_dir, cfg, device="cpu") -> list:
    return ["train", "--data", data, "--run-dir", run_dir, "--run-config", json.dumps(cfg), "--device", device,
            "--threads", "1", "--no-progress"]


def _without(cfg, key):
    return {k: v for k, v in cfg.items() if k != key}


RUN_CONFIG_FAULTS = {
    # name -> (edit of the run config, what the message must name)
    "unknown model": (lambda c: {**c, "model": "resnet9000"}, ["model: 'resnet9000'", "small_cnn"]),
    "missing key": (lambda c: _without(c, "optimizer"), ["missing key(s) optimizer", "study plan --json"]),
    "lr 0": (lambda c: {**c, "optimizer": {**c["optimizer"], "lr": 0}}, ["optimizer.lr: 0", "> 0"]),
    "lr not a number": (lambda c: {**c, "optimizer": {**c["optimizer"], "lr": "fast"}},
                        ["optimizer.lr: 'fast'", "> 0"]),
    "negative eps": (lambda c: {**c, "epoch_eval": {**c["epoch_eval"], "attack": {
        **c["epoch_eval"]["attack"], "eps": -0.5}}}, ["epoch_eval.attack.eps: -0.5", ">= 0"]),
    "NaN eps": (lambda c: {**c, "method_config": {"adversary": {"type": "pgd", "eps": math.nan}}},
                ["method_config.adversary.eps: nan", "not a finite number"]),
    "zero epochs": (lambda c: {**c, "epochs": 0}, ["epochs: 0", "integer >= 1"]),
}


@pytest.mark.parametrize("preset", ["ci", "demo"])
def test_every_planned_run_config_passes_the_check(repo_root, preset):
    """The check refuses bad run configs, never one that the plan makes."""
    from study.config import ConfigSpec, load_params, plan_runs

    runs = plan_runs(load_params(repo_root / "params.yaml", {"preset": preset}, presets_dir=PRESETS,
                                 schema_path=SCHEMA))
    assert runs
    for run in runs:
        ConfigSpec.parse(run.config)


@pytest.mark.parametrize("fault", list(RUN_CONFIG_FAULTS))
def test_bad_run_config_leaves_nothing_that_blocks_the_rerun(tmp_path, capsys, synthetic_file, run_cfg, fault,
                                                             one_thread):
    edit, named = RUN_CONFIG_FAULTS[fault]
    run_dir = tmp_path / "run"
    fails(capsys, _train_argv(synthetic_file, run_dir, edit(run_cfg)), "run config", *named)
    assert not (run_dir / "config.json").exists()
    succeeds(capsys, _train_argv(synthetic_file, run_dir, run_cfg))
    assert (run_dir / "model.pt").is_file()


def test_nan_loss_names_the_learning_rate_and_the_rerun_succeeds(tmp_path, capsys, synthetic_file, run_cfg,
                                                                 one_thread):
    run_dir = tmp_path / "run"
    huge = {**run_cfg, "optimizer": {**run_cfg["optimizer"], "lr": 1e30}}
    fails(capsys, _train_argv(synthetic_file, run_dir, huge), "non-finite training loss in epoch 1",
          "optimizer.lr 1e+30", "nothing was trained")
    assert not (run_dir / "checkpoint.pt").exists()
    succeeds(capsys, _train_argv(synthetic_file, run_dir, run_cfg))  # same directory, corrected lr


def test_run_dir_of_another_config_is_refused_and_kept(tmp_path, capsys, synthetic_file, run_cfg, one_thread):
    run_dir = tmp_path / "run"
    succeeds(capsys, _train_argv(synthetic_file, run_dir, run_cfg))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    other = {**run_cfg, "model": "lenet"}
    fails(capsys, _train_argv(synthetic_file, run_dir, other), run_dir, "different config", "checkpoint.pt",
          "new run directory")
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    succeeds(capsys, _train_argv(synthetic_file, tmp_path / "lenet", other))


def test_model_file_of_another_run_is_refused(tmp_path, capsys, synthetic_file, run_cfg, one_thread):
    lenet = {**run_cfg, "model": "lenet"}
    own, other = tmp_path / ConfigSpec.parse(run_cfg).run_id, tmp_path / ConfigSpec.parse(lenet).run_id
    succeeds(capsys, _train_argv(synthetic_file, own, run_cfg))
    succeeds(capsys, _train_argv(synthetic_file, other, lenet))
    kept = (own / "model.pt").read_bytes()
    shutil.copy(other / "model.pt", own / "model.pt")
    argv = ["evaluate", "--data", synthetic_file, "--run-dir", own, "--evaluation",
            json.dumps({"name": "clean", "type": "clean"}), "--out", tmp_path / "clean.parquet", "--device", "cpu",
            "--no-progress"]
    fails(capsys, argv, own / "model.pt", "run key", own / "config.json")
    assert not (tmp_path / "clean.parquet").exists()
    (own / "model.pt").write_bytes(kept)
    succeeds(capsys, argv)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_fails_before_any_work(tmp_path, capsys, synthetic_file, run_cfg, one_thread):
    run_dir = tmp_path / "run"
    fails(capsys, _train_argv(synthetic_file, run_dir, run_cfg, device="cuda"), "--device 'cuda'",
          "no CUDA GPU", "auto, cpu")
    assert not run_dir.exists()
    succeeds(capsys, _train_argv(synthetic_file, run_dir, run_cfg, device="auto"))


def _subcommands_with_device():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {name: p for name, p in sub.choices.items() if any("--device" in a.option_strings for a in p._actions)}


@functools.cache
def _typed_examples() -> dict[str, dict]:
    """A valid value of each typed JSON argument (named by its type), from the ci preset."""
    from study.config import load_params, plan_runs, resolve_evaluation

    ci = load_params(overrides={"preset": "ci"})
    return {"RunConfig": dict(plan_runs(ci)[0].config),
            "EvaluationJob": resolve_evaluation(ci, "clean"), "PgdJob": resolve_evaluation(ci, "pgd3"),
            "Construct": ci.features.construction.model_dump(exclude_unset=True),
            "SyntheticData": ci.data.synthetic.model_dump(exclude_unset=True)}


def _dummy_argv(name, sub_parser) -> list[str]:
    from study.cli.args import json_arg

    typed = _typed_examples()
    argv = [name]
    for action in sub_parser._actions:
        if action.required and action.option_strings:
            kind = getattr(action.type, "__name__", "")
            value = json.dumps(typed[kind]) if kind in typed else "{}" if action.type is json_arg else "x"
            argv += [action.option_strings[0], value]
        elif not action.option_strings and action.dest != "help":
            argv.append("x")
    return argv


def test_every_model_command_takes_device_auto_and_resolves_it_first(monkeypatch, capsys):
    """`--device auto` means the GPU if there is one, in every subcommand that runs a model."""
    import study.device

    commands = _subcommands_with_device()
    assert {"train", "evaluate", "construct", "check", "corruptions", "bench"} <= set(commands)
    asked = []

    def spy(name="auto"):
        asked.append(name)
        raise RuntimeError("device chosen")

    monkeypatch.setattr(study.device, "select_device", spy)
    for name, sub_parser in commands.items():
        assert sub_parser.parse_args(_dummy_argv(name, sub_parser)[1:]).device == "auto"  # the default
        asked.clear()
        fails(capsys, [*_dummy_argv(name, sub_parser), "--device", "auto"], "device chosen")
        assert asked == ["auto"], name
    monkeypatch.undo()
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert study.device.select_device("auto").type == want


def test_bad_arguments_give_one_line_not_the_usage(tmp_path, capsys, ci_params, tiny_run, synthetic_file):
    synthetic = json.dumps({**_synthetic(ci_params), "train_per_class": 2, "test_per_class": 1})
    prepare = ["prepare", "--dataset", "synthetic", "--variant", "default", "--out", tmp_path / "s.pt", "--synthetic"]
    fails(capsys, [*prepare, "{broken"], "argument --synthetic", "not valid JSON", "'{broken'",
          "study prepare --help")
    succeeds(capsys, [*prepare, synthetic])
    assert (tmp_path / "s.pt").is_file()
    fails(capsys, ["trian"], "invalid choice: 'trian'", "'train'")
    assert succeeds(capsys, _plan_argv(PRESETS)).startswith("preset ci: ")
    evaluate = ["evaluate", "--data", synthetic_file, "--run-dir", tiny_run, "--evaluation",
                json.dumps({"name": "clean", "type": "clean", "test_per_class": 1}), "--out", tmp_path / "c.parquet",
                "--device", "cpu", "--no-progress", "--checkpoint"]
    fails(capsys, [*evaluate, "middle"], "argument --checkpoint", "'middle'", "'last', 'best'")
    assert not (tmp_path / "c.parquet").exists()
    succeeds(capsys, [*evaluate, "last"])
    assert (tmp_path / "c.parquet").is_file()


def test_the_real_command_prints_one_line_and_no_traceback(repo_root):
    proc = run_study("plan", "--preset", "nosuch", cwd=repo_root, check=False)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    presets = sorted(p.stem for p in (repo_root / "workflow/presets").glob("*.yaml"))
    assert presets and "unknown preset 'nosuch'" in proc.stderr and ", ".join(presets) in proc.stderr


# --- interrupted jobs -----------------------------------------------------------------------

class Killed(Exception):
    """Stands for the job being killed (not an error `study` catches)."""


def _kill_on_call(monkeypatch, module, name: str, call: int) -> list:
    """Make `module.name` raise Killed on its `call`-th call; returns the list of calls."""
    real = getattr(module, name)
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise Killed(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def _same_records(a: Path, b: Path, volatile=("seconds",)) -> None:
    frame_a, meta_a = read_records(a)
    frame_b, meta_b = read_records(b)
    pd.testing.assert_frame_equal(frame_a, frame_b)
    assert {k: v for k, v in meta_a.items() if k not in volatile} == {
        k: v for k, v in meta_b.items() if k not in volatile}


def _no_temporary_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*.tmp")], list(folder.rglob("*"))


def test_interrupted_evaluation_reruns_to_the_same_records(tmp_path, monkeypatch, capsys, tiny_run,
                                                           synthetic_file, ci_params, one_thread):
    import study.predict
    from study.config import resolve_evaluation

    evaluation = {**resolve_evaluation(ci_params, "pgd3"), "test_per_class": 2, "batch_size": 10}
    argv = ["evaluate", "--data", synthetic_file, "--run-dir", tiny_run, "--evaluation", json.dumps(evaluation),
            "--device", "cpu", "--no-progress", "--out"]
    succeeds(capsys, [*argv, tmp_path / "straight" / "pgd3.parquet"])
    out = tmp_path / "killed" / "pgd3.parquet"
    calls = _kill_on_call(monkeypatch, study.predict, "run_attack_detailed", call=2)
    with pytest.raises(Killed):
        main([str(a) for a in [*argv, out]])
    assert len(calls) == 2 and not out.exists()
    _no_temporary_files(out.parent)
    monkeypatch.undo()
    succeeds(capsys, [*argv, out])
    _same_records(tmp_path / "straight" / "pgd3.parquet", out)


def test_interrupted_corruption_evaluation_reuses_its_parts(tmp_path, monkeypatch, capsys, tiny_run,
                                                            synthetic_file, one_thread):
    import study.evaluate.corruptions as module

    corruptions, severities = ["gaussian_noise", "brightness"], ["1", "3"]
    argv = ["corruptions", "--data", synthetic_file, "--run-dir", tiny_run, "--corruptions", *corruptions,
            "--severities", *severities, "--per-class", "3", "--source", "regenerated", "--device", "cpu",
            "--no-progress", "--out"]
    succeeds(capsys, [*argv, tmp_path / "straight" / "corruptions.parquet"])
    out = tmp_path / "killed" / "corruptions.parquet"
    _kill_on_call(monkeypatch, module, "predict", call=2)
    with pytest.raises(Killed):
        main([str(a) for a in [*argv, out]])
    assert len(list((out.parent / "corruptions.parts").glob("*.parquet"))) == 1 and not out.exists()
    monkeypatch.undo()
    calls = _kill_on_call(monkeypatch, module, "predict", call=0)  # counts, never kills
    succeeds(capsys, [*argv, out])
    assert len(calls) == len(corruptions) * len(severities) - 1, "the finished part is reused"
    _same_records(tmp_path / "straight" / "corruptions.parquet", out)
    _no_temporary_files(out.parent)


def test_corruption_parts_of_another_model_are_not_reused(tmp_path, monkeypatch, capsys, tiny_run,
                                                          synthetic_file, one_thread):
    """A part left by an interrupted job is reused only by the same model file: a run trained
    again (same run directory) gets new parts."""
    import study.evaluate.corruptions as module
    from study.io import atomic_torch_save, load_torch

    run = tmp_path / tiny_run.name
    shutil.copytree(tiny_run, run)
    argv = ["corruptions", "--data", synthetic_file, "--run-dir", run, "--corruptions", "contrast",
            "--severities", "2", "--per-class", "2", "--source", "regenerated", "--device", "cpu", "--no-progress",
            "--out", tmp_path / "corruptions.parquet"]
    succeeds(capsys, argv)
    blob = load_torch(run / "model.pt")
    blob["state_dict"] = {k: torch.zeros_like(v) if v.is_floating_point() else v for k, v in blob["state_dict"].items()}
    atomic_torch_save(blob, run / "model.pt")
    calls = _kill_on_call(monkeypatch, module, "predict", call=0)
    succeeds(capsys, argv)
    assert len(calls) == 1, "the old model's part was made again"


def test_interrupted_construction_resumes_to_the_same_dataset(tmp_path, monkeypatch, capsys, tiny_run,
                                                              synthetic_file, one_thread):
    import study.features.build as module
    from study.data.prepared import load_prepared

    settings = {"per_class": 2, "chunk_size": 6, "seed": 0, "representation": {"steps": 5, "step_size": 0.1},
                "relabel": {"eps": 1.0, "step_size": 0.5, "steps": 3}}
    n_chunks = math.ceil(settings["per_class"] * 10 / settings["chunk_size"])

    def argv(name):
        return ["construct", "--kind", "d_rand", "--data", synthetic_file, "--source-run", tiny_run,
                "--settings", json.dumps(settings), "--key", "k", "--work-dir", tmp_path / name / "chunks",
                "--out", tmp_path / name / "d_rand.pt", "--device", "cpu", "--no-progress"]

    succeeds(capsys, argv("straight"))
    calls = _kill_on_call(monkeypatch, module, "construct_chunk", call=2)
    with pytest.raises(Killed):
        main([str(a) for a in argv("killed")])
    assert len(calls) == 2 and not (tmp_path / "killed" / "d_rand.pt").exists()
    monkeypatch.undo()
    calls = _kill_on_call(monkeypatch, module, "construct_chunk", call=0)
    succeeds(capsys, argv("killed"))
    assert len(calls) == n_chunks - 1, "the finished chunk is reused"
    a, b = load_prepared(tmp_path / "straight" / "d_rand.pt"), load_prepared(tmp_path / "killed" / "d_rand.pt")
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.train_y, b.train_y) and a.meta == b.meta
    _no_temporary_files(tmp_path / "killed")
