"""study.workflow_plan: what common.smk computes from the plan, on the ci preset's plan (the
workflow's dry runs, tests/workflow, see the same values as job counts and files)."""

import os
import re

import pytest

from study.config import plan_runs
from study.workflow_plan import (
    SHARED_FOLDERS,
    Layout,
    NotPlannedError,
    asked,
    cli_options,
    evaluation_sets,
    figure_files,
    one_of,
    planned_entry,
    preset_results,
    report_categories,
    report_category,
    robustness_runs,
    touch_stamp,
)


@pytest.fixture(scope="module")
def ci_plan(ci_params):
    return plan_runs(ci_params)


def test_one_of_matches_exactly_its_names_and_nothing_when_there_are_none():
    pattern = one_of(["b.1", "a"])
    assert pattern == r"a|b\.1"
    assert re.fullmatch(pattern, "b.1") and not re.fullmatch(pattern, "bx1") and not re.fullmatch(pattern, "ab")
    assert not re.fullmatch(one_of([]), "") and not re.fullmatch(one_of([]), "x")


def test_cli_options_quote_values_skip_none_and_repeat_a_list():
    assert cli_options({"raw_dir": "a b", "mirror": None, "severities": [1, 2]}) == "--raw-dir 'a b' --severities 1 2"


def test_asked_finds_a_flag_or_its_letter_among_combined_short_flags():
    assert asked(["-pn", "all"], frozenset({"--dry-run"}), "n")
    assert asked(["--dry-run"], frozenset({"--dry-run"}), "n")
    assert not asked(["--cores", "2", "-p"], frozenset({"--dry-run"}), "n")


def test_a_name_the_preset_does_not_plan_is_one_line_naming_the_valid_ones():
    with pytest.raises(NotPlannedError, match=r"^run 'x' is not part of preset 'ci'; valid: a, b$"):
        planned_entry({"a": 1, "b": 2}, "x", "run", "ci")
    assert planned_entry({"a": 1}, "a", "run", "ci") == 1


@pytest.mark.parametrize("preset", sorted(SHARED_FOLDERS))
def test_a_preset_named_like_a_shared_folder_has_no_folder_of_its_own(preset):
    with pytest.raises(ValueError, match=rf"^preset '{preset}' cannot have a results folder of its own"):
        preset_results("results", preset)
    assert preset_results("results", "ci") == "results/ci"


def test_every_run_and_checkpoint_is_evaluated_by_one_job_but_a_sharded_last(ci_params, ci_plan):
    sharded, sets = evaluation_sets(ci_plan, ci_params.evaluations)
    planned = {e for r in ci_plan for e in r.evaluations}
    assert sharded == {e for e in planned if ci_params.evaluations[e].shards > 1} != set()
    jobs = [(rid, cp, names) for (names, cp), rids in sets.items() for rid in rids]
    assert len(jobs) == len({(rid, cp) for rid, cp, _ in jobs})  # one job per run and checkpoint
    for run in ci_plan:
        for cp in run.checkpoints:
            want = sorted(e for e in run.evaluations if cp != "last" or e not in sharded)
            got = [list(names) for rid, c, names in jobs if rid == run.run_id and c == cp]
            assert got == ([want] if want else []), (run.run_id, cp)


def test_the_checked_runs_hold_the_robustness_runs_and_no_constructed_one(ci_params, ci_plan):
    runs = robustness_runs(ci_plan, ci_params.robustness)
    ids = {r.run_id for r in runs.checked}
    assert runs.robustness and {r.run_id for r in runs.robustness} <= ids
    assert runs.corrupted and all(r.dataset in ci_params.robustness.corruptions.datasets
                                  for r in runs.corrupted)
    assert not [r for r in runs.checked + runs.corrupted if r.config.get("constructed")]


def test_the_layout_names_a_run_s_data_parent_model_and_records(ci_plan):
    layout = Layout("data", "results", "results/zoo", "results/ci", frozenset({"zoo-x"}))
    assert layout.run_dir("zoo-x") == "results/zoo/runs/zoo-x" and layout.run_dir("r") == "results/runs/r"
    assert layout.eval_file("r", "pgd3", "best") == "results/evaluations/r/pgd3@best.parquet"
    assert layout.eval_file("r", "pgd3", root="{root}") == "{root}/evaluations/r/pgd3.parquet"
    constructed = next(r for r in ci_plan if r.config.get("constructed"))
    con = constructed.config["constructed"]
    assert layout.run_data(constructed) == f"data/constructed/{con['kind']}-{con['key']}.pt"
    tuned = next(r for r in ci_plan if r.init_from)
    name = "model_best.pt" if tuned.config.get("init_checkpoint") == "best" else "model.pt"
    assert layout.parent_model(tuned) == f"results/runs/{tuned.init_from}/{name}"
    assert layout.parent_model(next(r for r in ci_plan if not r.init_from)) is None
    assert layout.tables(["checks"], "zoo/tables", "zoo_") == {"zoo_checks": "results/ci/zoo/tables/checks.csv"}


def test_the_report_numbers_the_categories_drawn_in_the_study_s_order():
    categories = report_categories(["fig13_mitigation", "fig01_classwise_standard"])
    assert categories[-1] == "Reproduction" and len(categories) == 3
    assert report_category(categories, categories[0]) == f"01 · {categories[0]}"
    assert report_category(categories, "not drawn") == "not drawn"
    files = figure_files("fig01_classwise_standard", [("cifar10", "small_cnn", "standard")], "F")
    assert files[:2] == ["F/fig01_classwise_standard/cifar10__small_cnn__standard.png",
                         "F/fig01_classwise_standard/cifar10__small_cnn__standard.pdf"]


def test_a_stamp_changes_only_where_an_input_is_missing_and_every_output_exists(tmp_path):
    stamp, out, made = tmp_path / "s" / "tables.stamp", tmp_path / "out.csv", tmp_path / "in.parquet"
    assert touch_stamp(stamp, [str(made)], [str(out)]) == []  # no output yet: nothing to finish
    assert os.stat(stamp).st_mtime == 0 and stamp.read_text() == ""  # new, and older than any output
    out.touch()
    assert touch_stamp(stamp, {"records": [[str(made)]]}, str(out)) == [str(made)]
    assert stamp.read_text().splitlines()[1:] == [str(made)]
    made.touch()
    before = stamp.read_text()
    assert touch_stamp(stamp, [str(made)], [str(out)]) == [] and stamp.read_text() == before
