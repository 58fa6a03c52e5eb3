"""`study bench`: the report's shape on a tiny setting, argument checks, and the reference
loop's per-image transform (timings themselves are never asserted)."""

import json

import numpy as np
import pytest
import torch

from study.bench import ALL_TASKS, run_bench
from study.bench.reference import RandomCropFlip, crop_flip, to_tensor

TASKS = ("pgd10_at_epoch", "pgd20_eval", "autoattack_eval")


COMPILE_MODES = ["off", "default"]


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "cpu.json"
    report = run_bench(out, model="small_cnn", images=64, test_images=20, tasks=TASKS, device="cpu",
                       threads=1, progress=False, compile_modes=["off"])
    return out, report


def test_bench_writes_json_and_markdown_with_every_task(tiny_bench):
    out, report = tiny_bench
    assert json.loads(out.read_text()) == json.loads(json.dumps(report, default=str))
    table = out.with_suffix(".md").read_text()
    assert list(report["tasks"]) == list(TASKS)
    for task, r in report["tasks"].items():
        assert f"| {task} |" in table
        assert r["speedup"] > 0
        for side in ("engine", "reference"):
            assert r[side]["images_per_s"] > 0 and r[side]["seconds"] > 0
            assert r[side]["flops_per_image"] > 0
            assert 0 < r[side]["fraction_of_peak"] <= 1.5
    assert report["model"]["forward_flops"] > 0
    assert report["peak"]["flops"]["fp32"] > 0
    assert report["tasks"]["pgd10_at_epoch"]["same_initial_weights"] is True
    assert report["settings"]["train_images"] == 60 and report["settings"]["test_images"] == 20
    assert report["hardware"]["threads"] == 1


def test_bench_reports_the_accuracy_check(tiny_bench):
    _, report = tiny_bench
    acc = report["accuracy"]
    assert acc["n"] == 20
    for metric in ("clean", "pgd20"):
        for side in ("engine", "reference"):
            assert 0 <= acc[side][metric] <= 1
        m = acc["metrics"][metric]
        assert m["tolerance"] >= 0.02
        assert m["ok"] == (abs(m["difference"]) <= m["tolerance"])
    assert report["accuracy_ok"] is acc["ok"]
    assert isinstance(report["accuracy_ok"], bool)


def test_unknown_task_or_model_names_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="valid tasks: " + ", ".join(ALL_TASKS)):
        run_bench(tmp_path / "x.json", tasks=["standard_epoch", "pgd7_epoch"], progress=False)
    with pytest.raises(ValueError, match="valid models: .*preact_resnet18"):
        run_bench(tmp_path / "x.json", model="resnet9000", progress=False)
    assert not (tmp_path / "x.json").exists()


def _image() -> np.ndarray:
    """A 4 x 5 x 3 image whose pixel (r, c) holds 1 + 10 r + c in every channel (no zeros)."""
    r, c = np.meshgrid(np.arange(4), np.arange(5), indexing="ij")
    return np.repeat((1 + 10 * r + c)[:, :, None], 3, axis=2).astype(np.uint8)


def test_flip_reverses_columns():
    img = _image()
    out = crop_flip(img, top=2, left=2, flip=True, padding=2)  # centred crop: no shift
    np.testing.assert_array_equal(out, img[:, ::-1])
    np.testing.assert_array_equal(crop_flip(img, 2, 2, False, 2), img)


def test_crop_with_padding_shifts_content_and_fills_zeros():
    img = _image()
    out = crop_flip(img, top=0, left=3, flip=False, padding=2)  # content moves down 2, left 1
    assert out.shape == img.shape
    np.testing.assert_array_equal(out[:2], 0)  # the top padding came in
    np.testing.assert_array_equal(out[2:, :4], img[:2, 1:])
    np.testing.assert_array_equal(out[2:, 4], 0)  # the right padding came in


def test_random_transform_gives_float_chw_in_unit_range():
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    torch.manual_seed(0)
    outs = [RandomCropFlip(padding=4)(img) for _ in range(20)]
    for x in outs:
        assert x.shape == (3, 32, 32) and x.dtype == torch.float32
        assert 0 <= float(x.min()) and float(x.max()) <= 1
    assert any(not torch.equal(outs[0], x) for x in outs[1:])  # the draws vary
    assert torch.equal(to_tensor(img), torch.from_numpy(img).permute(2, 0, 1).float() / 255)


def test_cli_bench_writes_the_report(tmp_path, capsys):
    from study.cli import main

    out = tmp_path / "b" / "cli.json"
    threads = torch.get_num_threads()  # --threads sets them for the process: keep the other tests' count
    try:
        rc = main(["bench", "--out", str(out), "--model", "small_cnn", "--images", "20", "--test-images", "10",
                   "--tasks", "pgd20_eval", "--device", "cpu", "--threads", "1", "--no-progress"])
    finally:
        torch.set_num_threads(threads)
    assert rc == 0
    report = json.loads(out.read_text())
    assert list(report["tasks"]) == ["pgd20_eval"] and report["settings"]["model"] == "small_cnn"
    assert "| pgd20_eval |" in out.with_suffix(".md").read_text()
    assert "accuracy_ok: None" in capsys.readouterr().err  # no PGD-AT task, so no accuracy check


def test_cli_bench_names_the_valid_tasks(tmp_path, capsys):
    from study.cli import main

    rc = main(["bench", "--out", str(tmp_path / "x.json"), "--tasks", "pgd7_epoch", "--no-progress"])
    assert rc == 2
    assert "valid tasks: standard_epoch, pgd10_at_epoch" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_bench_times_compile_settings_profiles_and_concurrent_runs(tmp_path, monkeypatch):
    """--compile, --profile and --concurrent on the standard epoch: what each writes, not how fast."""
    # Capture without code generation keeps this cheap; the compiled path is the same.
    monkeypatch.setenv("STUDY_COMPILE_BACKEND", "aot_eager")
    out = tmp_path / "cpu.json"
    report = run_bench(out, model="small_cnn", images=40, test_images=10, tasks=["standard_epoch"], device="cpu",
                       threads=1, progress=False, compile_modes=COMPILE_MODES, profile=True, concurrent=2,
                       batch_size=16)
    task = report["tasks"]["standard_epoch"]
    assert task["compile"] == COMPILE_MODES[0] and set(task["engine_by_compile"]) == set(COMPILE_MODES[1:])
    assert all(r["images_per_s"] > 0 for r in task["engine_by_compile"].values())
    assert [p["compile"] for p in report["profile"]] == COMPILE_MODES
    for p in report["profile"]:
        table = out.with_name(f"cpu.profile-{p['compile']}.txt").read_text()
        assert "Self CPU" in table and p["host_seconds_per_step"] > 0
    c = report["concurrent"]
    assert c["k"] == 2 and c["aggregate_images_per_s"] > 0 and c["one_images_per_s"] > 0
    md = out.with_suffix(".md").read_text()
    assert "standard_epoch, compile default" in md and "2 training processes at once" in md
