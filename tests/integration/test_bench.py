"""`study bench`: the report's shape on a tiny setting, argument checks, and the reference
loop's per-image transform (timings themselves are never asserted)."""

import json

import numpy as np
import pytest
import torch

from tools.bench import ALL_TASKS, run_bench
from tools.bench.reference import RandomCropFlip, crop_flip, to_tensor

TASKS = ("pgd10_at_epoch", "pgd20_eval", "autoattack_eval")




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
    assert report["failed"] == []


def test_bench_divides_by_the_peak_of_the_precision_computed_in(tiny_bench):
    """A CPU has no TF32: every side's basis is fp32, and the report says so."""
    out, report = tiny_bench
    assert report["peak"]["basis_used"] == ["fp32"] and "tf32" in report["peak"]["basis_rule"]
    for r in report["tasks"].values():
        assert r["engine"]["peak_basis"] == r["reference"]["peak_basis"] == "fp32"
        assert set(r["tf32"]) == {"cudnn", "matmul"}
    assert "- peak basis: fp32 (" in out.with_suffix(".md").read_text()


def test_autoattack_sides_share_the_seed_and_find_the_same_robust_samples(tiny_bench):
    out, report = tiny_bench
    r = report["tasks"]["autoattack_eval"]
    ps = r["per_sample"]
    assert ps["seed"] == {"engine": 0, "reference": 0} and r["attack"]["seed"] == 0
    assert ps["n"] == 20 and ps["disagreements"] == 0 and ps["identical"] is True
    assert ps["robust_engine"] == ps["robust_reference"] == round(20 * r["robust_accuracy"]["engine"])
    assert "0 of 20 samples' robust flags differ" in out.with_suffix(".md").read_text()


def test_bench_shows_the_epochs_evaluation_and_checkpoint_beside_the_loop(tiny_bench):
    out, report = tiny_bench
    b = report["tasks"]["pgd10_at_epoch"]["engine_epoch"]
    assert b["loop_seconds"] == report["tasks"]["pgd10_at_epoch"]["engine"]["seconds"]
    assert b["epoch_seconds"] == pytest.approx(b["loop_seconds"] + b["eval_and_checkpoint_seconds"])
    assert 0 < b["eval_and_checkpoint_fraction"] < 1 and b["eval_and_checkpoint_retimed_seconds"] > 0
    assert "| pgd10_at_epoch | " in out.with_suffix(".md").read_text().split("timed epoch in full")[1]


def test_a_failing_task_is_reported_and_the_others_kept(tmp_path, monkeypatch):
    from tools.bench import reference, run

    def boom(*args, **kwargs):
        raise RuntimeError("pyautoattack | broke")

    peak = {"flops": {"fp32": 1e12}, "method": "stub"}
    monkeypatch.setattr(run, "measure_peak", lambda dev: peak)  # the matmul peak costs seconds
    monkeypatch.setattr(reference, "eval_autoattack", boom)
    out = tmp_path / "f.json"
    report = run_bench(out, model="small_cnn", images=20, test_images=10, tasks=["pgd20_eval", "autoattack_eval"],
                       device="cpu", threads=1, progress=False, compile_modes=["off"])
    assert report["tasks"]["autoattack_eval"] == {"failed": True, "error": "RuntimeError: pyautoattack | broke"}
    assert report["tasks"]["pgd20_eval"]["engine"]["images_per_s"] > 0 and report["failed"] == ["autoattack_eval"]
    table = out.with_suffix(".md").read_text()
    assert "| autoattack_eval | failed: RuntimeError: pyautoattack / broke |" in table and "| pgd20_eval | " in table
    assert json.loads(out.read_text())["failed"] == ["autoattack_eval"]


def test_profile_counts_each_kernel_once():
    """On CUDA a kernel's time is both its own event's and its launching operator's self device time."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from tools.bench.extras import device_busy_us

    op = SimpleNamespace(device_type=DeviceType.CPU, self_device_time_total=30.0, self_cpu_time_total=5.0)
    kernel = SimpleNamespace(device_type=DeviceType.CUDA, self_device_time_total=30.0, self_cpu_time_total=0.0)
    nested = SimpleNamespace(device_type=DeviceType.CPU, self_device_time_total=0.0, self_cpu_time_total=2.0)
    assert device_busy_us([op, kernel, nested], on_device=True) == 30.0
    assert device_busy_us([op, kernel, nested], on_device=False) == 7.0


def test_concurrent_aggregate_spans_the_timed_loops_only():
    from tools.bench.extras import aggregate_windows

    # two processes started 5 s apart (start-up), their timed loops 10.0-12.0 and 10.5-13.0
    windows = [{"start": 10.0, "end": 12.0, "images": 100}, {"start": 10.5, "end": 13.0, "images": 100}]
    agg = aggregate_windows(windows)
    assert agg["span_seconds"] == 3.0 and agg["images_per_s"] == pytest.approx(200 / 3)
    assert agg["loop_seconds"] == [2.0, 2.5]


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




def test_bf16_is_refused_on_a_cpu_without_native_bf16_in_one_line_naming_the_device_and_fp32(tmp_path, capsys,
                                                                                           monkeypatch):
    """bf16 autocast needs a GPU or a CPU with native bf16 (study.device.train_autocast): a bench on
    another CPU refuses it before any work."""
    import tools.bench.run
    from study.cli import main

    monkeypatch.setattr(tools.bench.run, "cpu_supports_bf16", lambda: False)

    with pytest.raises(ValueError, match=r"device is cpu.*valid here: fp32"):
        run_bench(tmp_path / "x.json", tasks=["pgd20_eval"], device="cpu", precisions=["fp32", "bf16"],
                  progress=False)
    rc = main(["bench", "--out", str(tmp_path / "x.json"), "--tasks", "pgd20_eval", "--device", "cpu",
               "--precision", "bf16", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "--precision bf16" in err and "device is cpu" in err and "valid here: fp32" in err
    assert not (tmp_path / "x.json").exists()


def test_the_precision_reaches_the_engines_run_config():
    """bf16 goes through the pipeline's train.precision (run_config names it only where it is not fp32)."""
    from study.config.spec import ConfigSpec
    from study.data.synthetic import make_synthetic
    from tools.bench import ours

    params, _ = ours.load_bench_params()
    splits = make_synthetic(num_classes=10, train_per_class=2, test_per_class=1, image_size=32, seed=0)
    kw = {"per_class": 2, "epochs": 2, "batch_size": 8, "seed": 0}
    bf16 = ours.train_config(params, splits, "pgd10_at_epoch", "small_cnn", precision="bf16", **kw)
    fp32 = ours.train_config(params, splits, "pgd10_at_epoch", "small_cnn", precision="fp32", **kw)
    assert bf16["precision"] == "bf16" and "precision" not in fp32
    assert {k: v for k, v in bf16.items() if k != "precision"} == fp32
    assert ConfigSpec.parse(bf16).trained.precision == "bf16"


def test_every_timed_result_is_keyed_by_precision(tiny_bench):
    """A CPU bench is fp32 throughout; evaluations are fp32 by design whatever --precision says."""
    out, report = tiny_bench
    assert report["settings"]["precisions"] == ["fp32"] and report["settings"]["evaluation_precision"] == "fp32"
    assert all(r["precision"] == "fp32" for r in report["tasks"].values())
    assert report["tasks"]["pgd10_at_epoch"]["engine_by_precision"] == {}
    assert report["bf16_matches_fp32"] is None and report["accuracy"]["bf16_matches_fp32"] is None
    md = out.with_suffix(".md").read_text()
    assert "| pgd10_at_epoch | fp32 |" in md and "bf16_matches_fp32: n/a" in md


def test_the_report_shows_bf16_rows_and_its_agreement_with_fp32(tiny_bench):
    """The writer fed a result with a bf16 run beside fp32 (a GPU bench's shape)."""
    import copy

    from tools.bench.report import add_fractions, markdown, precision_agreement, side_record

    report = copy.deepcopy(tiny_bench[1])
    task = report["tasks"]["pgd10_at_epoch"]
    task["engine_by_precision"] = {"bf16": {"off": {**side_record(60, 0.5, 1e6, "bf16"), "speedup": 2.0}}}
    add_fractions(report["tasks"], {"fp32": 1e9, "bf16": 4e9})
    assert task["engine_by_precision"]["bf16"]["off"]["fraction_of_peak"] == pytest.approx(120e6 / 4e9)
    agreement = precision_agreement([0.5, 0.3], [0.45, 0.35], [100, 100], ["cat", "dog"])
    report["accuracy"].update(bf16_vs_fp32=agreement, bf16_matches_fp32=agreement["matches"])
    report["bf16_matches_fp32"] = agreement["matches"]
    md = markdown(report)
    assert "| pgd10_at_epoch, compile off | bf16 | 120 |" in md
    assert "| cat | 100 | 0.500 | 0.450 |" in md and "bf16_matches_fp32: true" in md


def test_bf16_agrees_with_fp32_when_every_class_is_within_the_others_wilson_interval():
    from tools.bench.report import classwise_accuracy, precision_agreement, wilson_interval

    lo, hi = wilson_interval(0.5, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    acc, n = classwise_accuracy(np.array([0, 1, 1, 2, 0, 2]), np.array([0, 0, 1, 1, 2, 2]), 3)
    assert acc == [0.5, 0.5, 0.5] and n == [2, 2, 2]
    same = precision_agreement([0.50, 0.30, 0.80], [0.46, 0.36, 0.75], [100, 100, 100])
    assert same["matches"] is True and all(c["agree"] for c in same["classes"])
    apart = precision_agreement([0.50, 0.30, 0.80], [0.48, 0.15, 0.79], [100, 100, 100])
    assert apart["matches"] is False
    assert [c["agree"] for c in apart["classes"]] == [True, False, True] and apart["worst_class"] == "1"
    assert "Wilson" in apart["rule"]


def test_identical_accuracies_at_0_and_1_agree():
    """A class every model gets right (or wrong) agrees with itself: the Wilson interval holds its
    own estimate, where rounding alone put 1.0 above the upper bound 0.9999999999999999."""
    from tools.bench.report import precision_agreement, wilson_interval

    for p in (0.0, 1.0):
        lo, hi = wilson_interval(p, 10)
        assert lo <= p <= hi
    assert precision_agreement([1.0, 0.0, 0.5], [1.0, 0.0, 0.5], [10, 10, 10])["matches"] is True


@pytest.mark.skipif(not __import__("study.device").device.cpu_supports_bf16(), reason="this CPU has no native bf16")
def test_a_cpu_bench_with_native_bf16_times_bf16_and_compares_it_with_fp32(tmp_path):
    report = run_bench(tmp_path / "x.json", model="small_cnn", tasks=["pgd10_at_epoch"], device="cpu",
                       precisions=["fp32", "bf16"], images=40, test_images=20, compile_modes=["off"], threads=1,
                       progress=False)
    assert report["settings"]["precisions"] == ["fp32", "bf16"]
    assert "bf16" in report["tasks"]["pgd10_at_epoch"]["engine_by_precision"]
    assert report["bf16_matches_fp32"] in (True, False)
    assert "bf16_matches_fp32: " in (tmp_path / "x.md").read_text()
