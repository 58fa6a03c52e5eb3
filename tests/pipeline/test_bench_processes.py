"""`study bench` for real: compile settings, profiles and concurrent runs in their own processes."""

import pytest

from tools.bench import run_bench

COMPILE_MODES = ["off", "default"]


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
    windows = c["k_processes"]["windows"]  # each process's own timed epoch, start-up excluded
    assert len(windows) == 2 and all(w["end"] > w["start"] for w in windows)
    span = max(w["end"] for w in windows) - min(w["start"] for w in windows)
    assert c["aggregate_images_per_s"] == pytest.approx(sum(w["images"] for w in windows) / span)
    assert span < c["k_processes_wall_seconds"]  # the processes' start-up is not in it
    md = out.with_suffix(".md").read_text()
    assert "standard_epoch, compile default" in md and "2 training processes at once" in md
