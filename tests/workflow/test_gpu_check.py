"""`make gpu-check` and `make gpu-bundle` (tools/gpu/, docs/performance.md "On a GPU
machine"), without a GPU or the network: the one-line refusal without CUDA, the missing-module
report, the bundle's size limit and mirror lookup, and a report that keeps the parts that
finished when a later one runs out of time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gpu_tools import load_gpu_tool

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    return load_gpu_tool(name, "gpu")


check, common, bundle = _load("check"), _load("common"), _load("bundle")


def test_make_gpu_check_refuses_without_cuda_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: make gpu-check would run the check")
    done = subprocess.run(["make", "--no-print-directory", "gpu-check"], cwd=ROOT, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode != 0
    assert len(lines) == 1 and "CUDA" in lines[0], lines


def test_the_script_refuses_with_exit_code_2(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "no CUDA device" in err


def test_missing_modules_are_those_not_importable_and_the_line_names_their_wheels():
    importable = {"jsonschema"}.__contains__
    missing = common.missing_modules(is_importable=importable)
    assert missing == ["pyautoattack", "pytest"]
    assert common.missing_modules(["jsonschema"], importable) == []
    line = check.carry_line(missing)
    assert "pyautoattack==0.2.0" in line and "make gpu-bundle" in line and "\n" not in line


def test_bundle_size_is_summed_over_the_folder_and_held_to_40_mib(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a.whl").write_bytes(b"x" * 1000)
    (tmp_path / "b.tar.gz").write_bytes(b"y" * 24)
    assert common.folder_bytes(tmp_path) == 1024
    assert common.folder_bytes(tmp_path / "absent") == 0
    ok, line = common.size_line(common.folder_bytes(tmp_path))
    assert ok and "limit 40 MiB" in line
    ok, line = common.size_line(40 * 2**20 + 1)
    assert not ok and line == "gpu-bundle: 40.0 MiB is over the 40 MiB limit"


def test_the_archive_is_found_through_study_data_mirror_only(tmp_path):
    with pytest.raises(bundle.BundleError, match="STUDY_DATA_MIRROR is not set"):
        bundle.mirror_archive({})
    with pytest.raises(bundle.BundleError, match="no cifar10-jpeg/cifar10-jpeg.tar.gz"):
        bundle.mirror_archive({"STUDY_DATA_MIRROR": str(tmp_path)})
    archive = tmp_path / "cifar10-jpeg" / "cifar10-jpeg.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"")
    assert bundle.mirror_archive({"STUDY_DATA_MIRROR": str(tmp_path)}) == archive


def _part(name: str, budget: float, *codes: str):
    steps = [check.Step(f"step {i}", [sys.executable, "-c", code]) for i, code in enumerate(codes)]
    return check.Part(name, name, budget, steps)


def test_a_part_that_times_out_leaves_the_finished_ones_in_the_report(tmp_path):
    report = {"parts": []}
    check.run_part(_part("first", 10, "print('done')"), tmp_path, report)
    check.run_part(_part("second", 10, "import sys; sys.exit('broken: the last line')"), tmp_path, report)
    check.run_part(_part("third", 1.5, "import time; time.sleep(30)"), tmp_path, report)
    written = json.loads((tmp_path / "report.json").read_text())
    assert [(p["name"], p["outcome"]) for p in written["parts"]] == [
        ("first", "ok"), ("second", "failed"), ("third", "timed out")]
    assert written["parts"][1]["steps"][0]["tail"] == ["broken: the last line"]
    md = (tmp_path / "report.md").read_text()
    assert "## first: first" in md and "**ok**" in md and "**timed out**" in md and "broken: the last line" in md


def test_a_skipped_step_is_reported_with_its_reason(tmp_path):
    part = check.Part("bench", "bench", 5, [check.Step("bf16", None, "no --precision flag")])
    result = check.run_part(part, tmp_path, {"parts": []})
    assert result["steps"][0] == {"title": "bf16", "command": "", "budget_s": 5.0, "outcome": "skipped",
                                  "detail": "no --precision flag"}


def test_compile_modes_are_read_from_the_bench_help():
    assert check.compile_choices("[--compile {off,default,max,auto} ...]") == ("off", "default", "max")
    assert check.compile_choices("no such flag") == ("off", "default")


def test_the_classwise_table_stands_beside_xu_et_al(tmp_path):
    rows = ["eval,class_name,acc"] + [f"{ev},{name},{acc}" for ev, acc in (("clean", 0.9), ("pgd20", 0.5),
                                                                              ("autoattack", 0.45))
                                      for name in ("automobile", "cat")]
    (tmp_path / "classwise.csv").write_text("\n".join(rows) + "\n")
    section = check.classwise_section(tmp_path / "classwise.csv", epochs=5)
    assert "| automobile | 90 | 50 | 45 | 93 / 67 | 94 / 66 |" in section
    assert "| cat | 90 | 50 | 45 | 65 / 17 | 67 / 18 |" in section
    assert "Recipe difference" in section and "5 epochs" in section and "1,000 test images" in section


def test_the_bench_part_times_bf16_beside_fp32_once_the_bench_has_precision(tmp_path):
    """Read from the real `study bench --help`: bf16 is timed in the same run as fp32 (so that the
    bench compares the two), except on a CPU, which this check does not time bf16 on (`study bench
    --precision fp32 bf16` does, on a CPU with native bf16)."""
    assert check.precision_choices("[--precision {fp32,bf16} [{fp32,bf16} ...]]") == ("fp32", "bf16")
    assert check.precision_choices("no such flag") == ("fp32",)
    gpu = check.bench_part(check.Sizes(), 110, tmp_path)
    argvs = [s.argv for s in gpu.steps if s.argv]
    assert any(a[a.index("--precision"):a.index("--precision") + 3] == ["--precision", "fp32", "bf16"]
               for a in argvs if "--precision" in a)
    assert not [s for s in gpu.steps if s.argv is None]
    cpu = check.bench_part(check.SMOKE, 110, tmp_path)
    assert all("bf16" not in (s.argv or []) for s in cpu.steps)
    assert [s.skip for s in cpu.steps if s.argv is None] == ["bf16 is timed on a GPU in this check: not timed on cpu"]
