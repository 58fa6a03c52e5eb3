"""`make gpu-check`'s part `preset` (tools/gpu/check.py, tools/gpu/preset_epochs.py), without a GPU:
the step's command, the first run of each training kind of the reproduce preset shortened to the
check's epochs and images, and the price it computes from a throughput."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gpu_tools import load_gpu_tool

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    return load_gpu_tool(name, "gpu_preset")


check, preset_epochs = _load("check"), _load("preset_epochs")


def test_the_gpu_check_runs_the_preset_part_by_default_within_its_budget():
    args = check.parse_args([])
    assert args.parts.split(",") == ["setup", "tests", "bench", "preset", "repro"]
    assert sum(check.BUDGETS.values()) == 525 and check.BUDGETS["preset"] > 0


def test_the_preset_step_calls_the_timing_tool_with_the_checks_sizes(tmp_path):
    part = check.build_parts(["preset"], check.SMOKE, check.BUDGETS, tmp_path, {})[0]
    (step,) = part.steps
    argv = step.argv
    assert argv[1] == str(ROOT / "tools" / "gpu" / "preset_epochs.py")
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert options == {"--preset": "reproduce", "--data": str(check.SMOKE.data), "--out": str(tmp_path / "preset"),
                       "--epochs": "1", "--train-per-class": "50", "--device": "cpu", "--eval-per-class": "1"}
    assert step.outputs == [str(tmp_path / "preset" / "timing.md")]
    full = check.build_parts(["preset"], check.Sizes(), check.BUDGETS, tmp_path, {})[0].steps[0].argv
    assert "--eval-per-class" not in full and full[full.index("--device") + 1] == "cuda"
    # on a GPU the current engine is timed in both training precisions
    assert full[full.index("--precision"):full.index("--precision") + 3] == ["--precision", "fp32", "bf16"]


def test_each_training_kind_of_the_reproduce_preset_is_timed_on_its_own_first_run(tmp_path):
    made = preset_epochs.commands("reproduce", Path("data/prepared/cifar10-jpeg.pt"), tmp_path, epochs=2,
                                  train_per_class=500, device="cuda")
    kinds = {kind: cfg for kind, cfg, _ in made}
    assert set(kinds) == {"standard", "pgd10-ce", "pgd10-trades"}
    assert [kinds[k]["method"] for k in ("standard", "pgd10-ce", "pgd10-trades")] == ["standard", "at",
                                                                                        "trades_normalized"]
    for kind, cfg, argv in made:
        assert (cfg["model"], cfg["epochs"], cfg["train_per_class"], cfg["data_variant"]) == (
            "preact_resnet18", 2, 500, "jpeg")
        assert argv[argv.index("--run-dir") + 1] == str(tmp_path / kind)
        assert json.loads(argv[argv.index("--run-config") + 1]) == cfg
        assert argv[argv.index("--device") + 1] == "cuda"
    # the rest of the run config is the preset's: the published optimizer and the PGD-10 adversary
    at = kinds["pgd10-ce"]
    assert at["optimizer"]["lr"] == 0.1 and at["schedule"]["name"] == "step"
    assert at["method_config"]["adversary"]["steps"] == 10
    assert all("precision" not in cfg for cfg in kinds.values())  # fp32, whatever the preset trains in


def test_each_kind_is_timed_in_each_precision_asked_for(tmp_path):
    made = preset_epochs.commands("reproduce", Path("d.pt"), tmp_path, epochs=1, train_per_class=10, device="cuda",
                                  precisions=("fp32", "bf16"))
    labels = {name: cfg for name, cfg, _ in made}
    assert set(labels) == {"standard", "pgd10-ce", "pgd10-trades", "standard-bf16", "pgd10-ce-bf16",
                           "pgd10-trades-bf16"}
    assert all(labels[n].get("precision", "fp32") == ("bf16" if n.endswith("-bf16") else "fp32") for n in labels)
    with pytest.raises(ValueError, match=r"unknown precision\(s\) \['fp16'\]; valid: fp32, bf16"):
        preset_epochs.commands("reproduce", Path("d.pt"), tmp_path, 1, 10, "cuda", precisions=("fp16",))


def test_the_price_is_epochs_times_images_at_the_measured_rate():
    rows, totals = preset_epochs.price("reproduce", {"standard": 1e-4, "pgd10-ce": 1e-3, "pgd10-trades": 1e-3,
                                                      "standard-bf16": 5e-5, "pgd10-ce-bf16": 5e-4,
                                                      "pgd10-trades-bf16": 5e-4}, ("fp32", "bf16"))
    by_kind = {r["kind"]: r for r in rows if r["precision"] == "fp32"}
    assert by_kind["standard"]["runs"] == 3 and by_kind["standard"]["epoch_images"] == 3 * 200 * 50000
    assert by_kind["pgd10-ce"]["runs"] == 6 and by_kind["pgd10-ce"]["epoch_images"] == 6 * 200 * 49000
    assert totals["fp32"] == pytest.approx((3 * 200 * 50000 * 1e-4 + 12 * 200 * 49000 * 1e-3) / 3600)
    assert totals["bf16"] == pytest.approx(totals["fp32"] / 2)


def test_the_dry_run_prints_one_command_per_kind():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / "preset_epochs.py"), "--data", "d.pt",
                           "--out", "o", "--dry-run"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["standard", "pgd10-ce", "pgd10-trades"]
    assert all(" -m study.cli train " in line for line in lines)


def test_the_timing_prices_the_preset_from_each_kinds_last_epoch(tmp_path, monkeypatch):
    """The runs replaced by stand-ins that write meta.json's epoch times: the report and the JSON
    hold each kind's throughput and the projected hours."""
    def fake_run(command, cwd):
        run_dir = Path(command[command.index("--run-dir") + 1])
        run_dir.mkdir(parents=True)
        (run_dir / "meta.json").write_text(json.dumps({"epoch_seconds": [30.0, 10.0 if "standard" in run_dir.name
                                                                         else 100.0]}))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(preset_epochs.subprocess, "run", fake_run)
    out = tmp_path / "preset"
    assert preset_epochs.main(["--data", "d.pt", "--out", str(out), "--epochs", "2", "--train-per-class", "500"]) == 0
    timing = json.loads((out / "timing.json").read_text())
    by_kind = {r["kind"]: r for r in timing["kinds"] if r["precision"] == "fp32"}
    # the last epoch over the run's training images: 5,000 (standard), 4,900 (2% held out)
    assert by_kind["standard"]["s_per_image"] == pytest.approx(10.0 / 5000)
    assert by_kind["pgd10-ce"]["s_per_image"] == pytest.approx(100.0 / 4900)
    assert timing["total_hours"] == {"fp32": pytest.approx(sum(r["hours"] for r in timing["kinds"]))}
    assert "Projected training" in (out / "timing.md").read_text()
