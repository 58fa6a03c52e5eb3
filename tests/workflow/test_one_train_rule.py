"""One rule trains every run and declares every file of the checkpoint table (study.checkpoints),
named from it; the evaluations and checks read only the checkpoints their run lists (a stand-in,
workflow/rules/train.smk, is never read as a chosen model)."""

from helpers.workflow import plan_preset

from study.checkpoints import CHECKPOINT_FILES

_CHECKPOINT_OF = {file: name for name, file in CHECKPOINT_FILES.items()}


def test_one_rule_trains_every_run_and_declares_its_every_checkpoint_file(project, ci_dry_run):
    _, runs, _ = plan_preset(project, "ci")
    trained = {job.wildcards["run_id"]: job for job in ci_dry_run.of("train")}
    assert set(trained) == {r.run_id for r in runs}
    assert [rule for rule in ci_dry_run.counts if rule.startswith("train")] == ["train"]
    for run_id, job in trained.items():
        assert {f"results/runs/{run_id}/{file}" for file in CHECKPOINT_FILES.values()} <= set(job.output), run_id


def test_a_run_s_chosen_checkpoint_is_read_only_where_the_run_lists_or_keeps_it(project, ci_dry_run):
    _, runs, _ = plan_preset(project, "ci")
    planned = {r.run_id: r for r in runs}
    read = set()
    for job in ci_dry_run.jobs:
        for path in job.input:
            parts = path.split("/")
            if parts[:2] != ["results", "runs"] or _CHECKPOINT_OF.get(parts[-1], "last") == "last":
                continue
            run, checkpoint = planned[parts[2]], _CHECKPOINT_OF[parts[-1]]
            read.add((job.rule == "train", checkpoint))
            if job.rule == "train":  # a fine-tuning run starts from its parent's best: kept, not a stand-in
                assert checkpoint == "best" and "validation" in run.config, (job.rule, path)
            else:
                assert checkpoint in run.checkpoints, (job.rule, path)
    # the ci DAG has them all: @best and @published evaluations, and FRL from its parent's best
    assert read == {(False, "best"), (False, "published"), (True, "best")}
