"""The report compares as the plan declares (study.reproduction.matching): every difference or
claim row sets a method against the control of one declared comparison, in the experiment group
that runs both (across groups only where a group declares it); runs of two groups are never
pooled; claims read the study's own checkpoint; a claim its source cannot tell from noise is
context; the summary counts claims. Each preset's table here holds every run its plan makes (real
run ids, evaluations and checkpoints; random accuracies)."""

import shutil
from pathlib import Path

import pytest
import yaml
from helpers.class_rows import plan_classwise

from study.config import read_yaml
from study.config.comparisons import comparisons, preset_params
from study.config.params import available_presets
from study.published import BY_ID, CLAIM_EPOCHS, PUBLISHED, Published
from study.reproduction import compare
from study.reproduction.comparison import CONTEXT, Row
from study.reproduction.matching import (
    STAND_IN,
    annotate,
    candidate_epochs,
    checkpoint_order,
    equivalent_methods,
    index_sd,
    plan_index,
)
from study.reproduction.render import table, verdict_summary
from study.reproduction.statistics import Estimate

ROOT = Path(__file__).resolve().parents[2]
PRESETS = available_presets(ROOT / "workflow/presets")
_REPORTS: dict[str, tuple] = {}


def _report(preset: str) -> tuple[dict, object, list[Row], list[Row]]:
    """(params, table, value rows, difference rows) of a preset, computed once per test session."""
    if preset not in _REPORTS:
        params = preset_params(preset, ROOT / "params.yaml", ROOT / "workflow/presets")
        frame = plan_classwise(params)
        _REPORTS[preset] = (params, frame, *compare(frame, params))
    return _REPORTS[preset]


def _has_runs(table, params, group: str, method: str, p: Published) -> bool:
    """Whether the group evaluates `method` as the published row needs (its kind or the stand-in,
    at a checkpoint the row may read)."""
    kinds = {p.recipe.kind, STAND_IN.get(p.recipe.kind)}
    rows = table[(table["group"] == group) & (table["method"] == method) & table["kind"].isin(kinds)
                 & table["checkpoint"].isin(checkpoint_order(p))]
    return not rows.empty


def _expected_pairs(params, table, declared) -> dict[str, set[str]]:
    """Published difference and claim rows -> the declared pairs that can stand for them: a pair whose
    method has the row's policies, both arms evaluated as the row needs."""
    out: dict[str, set[str]] = {}
    for p in PUBLISHED:
        if not (p.direction or p.baseline):
            continue
        for c in declared:
            if (c.method in equivalent_methods(params, [c.method], (p.method,))
                    and _has_runs(table, params, c.group, c.method, p)
                    and _has_runs(table, params, c.control_group, c.baseline, p)):
                out.setdefault(p.id, set()).add(c.name)
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_every_paired_row_comes_from_a_declared_comparison_and_every_expected_pair_is_formed(preset):
    params, frame, values, deltas = _report(preset)
    declared = {c.name: c for c in comparisons(params)}
    formed: dict[str, set[str]] = {}
    for row in values + deltas:
        if not row.difference_of or row.estimate is None:
            continue
        assert row.pair.startswith("declared pair "), (row.published.id, row.pair)
        name = row.pair.removeprefix("declared pair ").split(" (across groups")[0]
        assert name in declared, (row.published.id, name)
        c = declared[name]
        assert row.setting.startswith(f"group {c.group}, ") and f"{c.method} minus {c.baseline}" in row.setting
        assert (" (across groups" in row.pair) == c.cross_group
        formed.setdefault(row.published.id, set()).add(name)
    expected = _expected_pairs(params, annotate(frame, params), list(declared.values()))
    assert set(formed) == set(expected), (set(formed) ^ set(expected))
    for pid, names in formed.items():  # the closest recipe's pairs of those that can stand for the row
        assert names <= expected[pid], (pid, names - expected[pid])
    if any(c.group for c in declared.values()) and preset != "ci":
        assert formed, "a preset with declared comparisons forms paired rows"


@pytest.mark.parametrize("preset", ["paper", "laptop"])
def test_a_value_row_reads_the_runs_of_one_experiment_group(preset):
    params, _, values, _ = _report(preset)
    seeds = {g.group: len(g.seeds) for g in params.experiments}
    compared = [r for r in values if r.estimate is not None and r.published.statistic in ("mean", "worst", "class")]
    assert compared
    for row in compared:
        groups = row.setting.removeprefix("group ").split(", cifar10")[0].split(", ")
        assert row.seeds == max(seeds[g] for g in groups), (row.published.id, row.setting)


def test_dafas_trades_rows_are_not_pooled_across_the_baseline_and_mitigation_groups():
    params, _, values, _ = _report("paper")
    trades_groups = [g.group for g in params.experiments if "trades" in g.methods]
    assert len(trades_groups) > 1  # the case the rule is for: `trades` runs in several groups
    rows = [r for r in values if r.published.id == "dafa_cifar10_trades_clean_mean" and r.estimate is not None]
    assert rows and all(r.seeds == 3 for r in rows)


def test_a_cross_group_pair_exists_only_where_a_group_declares_it(tmp_path):
    params, _, values, _ = _report("reproduce")
    (gap,) = [r for r in values if r.published.id == "xu_pgd_at_widens_gap_clean"]
    assert gap.pair == ("declared pair mitigation: at vs baseline's standard (across groups: the arms differ in "
                        "adversary, train.published_selection, train.validation)")
    presets = tmp_path / "presets"
    shutil.copytree(ROOT / "workflow/presets", presets)
    raw = read_yaml(presets / "reproduce.yaml")
    for group in raw["experiments"]:
        group.pop("compare", None)
    (presets / "reproduce.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    undeclared = preset_params("reproduce", ROOT / "params.yaml", presets)
    rows = [r for r in compare(plan_classwise(undeclared), undeclared)[0]
            if r.published.id.startswith("xu_pgd_at_widens_gap")]
    assert rows and all(r.estimate is None for r in rows)  # not paired across groups without a declaration


def test_claims_read_the_studys_own_checkpoint_and_state_unequal_candidates():
    params, _, values, deltas = _report("paper")
    claims = [r for r in values if r.published.direction and r.estimate is not None]
    assert claims
    assert all(not r.protocol.startswith("published") for r in claims), {r.protocol for r in claims}
    assert any(r.protocol.startswith("validation") for r in claims)
    # a paper's best value still reads the checkpoint chosen on the test set as the paper chose it
    (at_best,) = [r for r in values if r.published.id == "cfa_at_best_autoattack_mean" and r.estimate is not None]
    assert at_best.protocol.startswith("published")
    (frl,) = [r for r in values if r.published.id == "claim_frl_reweight_autoattack_worst"]
    frl_epochs = candidate_epochs(_rows(params, "frl_reweight"), plan_index(params))
    at_epochs = candidate_epochs(_rows(params, "at"), plan_index(params))
    assert (frl_epochs, at_epochs) == (60, 100)  # 120 epochs from the 61st; 200 from the 101st
    assert f"best checkpoint chosen among {frl_epochs} epochs for frl_reweight, {at_epochs} for at" in frl.differences


def _rows(params, method):
    frame = annotate(_report("paper")[1], params)
    rows = frame[(frame["method"] == method) & (frame["group"] == "mitigation") & (frame["checkpoint"] == "best")]
    return rows[rows["run_id"] == rows["run_id"].iloc[0]]


def test_a_claim_within_its_sources_noise_is_context_and_a_transferred_claim_says_so():
    _, frame, values, _ = _report("laptop")
    by_id = {r.published.id: r for r in values}
    for pid in ("claim_pgd_at_fairtat_autoattack_mean", "claim_frl_reweight_clean_mean"):
        assert BY_ID[pid].context and abs(BY_ID[pid].source_z) < 2
        assert by_id[pid].verdict == CONTEXT and not by_id[pid].compared
    assert not BY_ID["claim_trades_cfa_clean_mean"].context  # z = -19 in Table 1
    assert by_id["claim_trades_cfa_clean_mean"].compared
    lines = "\n".join(table([by_id[p] for p in ("claim_pgd_at_fairtat_autoattack_worst", "claim_faal_at_clean_mean",
                                                "claim_trades_cfa_clean_mean")]))
    fairtat, faal, cfa = lines.splitlines()[2:5]
    assert "transferred: the source sets TRADES + FAIR-TAT against TRADES" in fairtat
    assert "the study's expectation: no published number" in faal and "transferred" not in cfa


def test_the_summary_counts_claims_once_whatever_their_rows():
    p = BY_ID["claim_trades_cfa_autoattack_worst"]
    agrees = Row(p, "group a, x", Estimate(0.02, 0.01, 0.03, 5), difference_of="m minus c")
    inconclusive = Row(p, "group b, x", Estimate(0.01, -0.01, 0.03, 5), difference_of="m minus c")
    value = Row(BY_ID["cfa_at_best_clean_mean"])  # not in this preset
    text = verdict_summary([agrees, inconclusive, value])
    assert text.startswith("Claims: 2 published values and claims; 1 compared: 0 agrees, 0 inconclusive, "
                           "0 differs, 1 mixed. Not compared: 1 not in this preset. Rows (one per run group of "
                           "ours, beneath each claim): 2 compared."), text
    assert verdict_summary([agrees, agrees]).startswith("Claims: 1 published values and claims; 1 compared: 1 agrees")


def test_a_claims_scale_is_measured_against_its_own_methods_published_recipe():
    bare = preset_params(None, ROOT / "params.yaml", ROOT / "workflow/presets")
    plan = plan_index(bare)
    for method, epochs in CLAIM_EPOCHS.items():
        assert {spec.config["epochs"] for spec in plan.values() if spec.config.get("method") == method} == {epochs}
    _, _, values, _ = _report("paper")
    paper_scale = [r for r in values if r.published.direction and r.estimate is not None
                   and r.published.method in ("frl_reweight", "faal_at")]
    assert paper_scale and not any(r.reduced_scale for r in paper_scale)


def test_the_published_protocol_states_its_test_subset_and_its_inferred_pick():
    params, frame, values, _ = _report("reproduce")
    per_class = {spec.config["epoch_eval"]["per_class"] for spec in plan_index(params).values()
                 if "published" in spec.checkpoints}
    (n,) = per_class
    rows = [r for r in values if r.estimate is not None and r.protocol.startswith("published")]
    assert rows
    for row in rows:
        assert f"on {n} test images per class where CFA's code scores all 1000" in row.protocol
        assert f"about {100 * index_sd(n):.1f} pts against {100 * index_sd(1000):.1f}" in row.protocol
        assert "(inferred: Table 1 does not say which of them it reports)" in row.protocol


def test_a_best_value_chosen_by_another_papers_index_says_so():
    """TRIX reports the best worst class; the mitigation group's FRL runs keep CFA's index: stated."""
    params, _, values, _ = _report("paper")
    frl = [r for r in values if r.published.id == "trix_trades_frl_autoattack_worst" and r.estimate is not None]
    assert frl and all("published checkpoint chosen by the index mean_plus_worst, not the paper's worst"
                       in r.differences for r in frl)
    trix = [r for r in values if r.published.id == "trix_trades_trix_autoattack_worst" and r.estimate is not None]
    assert trix and not any("chosen by the index" in d for r in trix for d in r.differences)
