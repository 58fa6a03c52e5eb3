"""The reproduction report (study/reproduction.py): rows computed from class-wise tables built
here, checked against the same numbers computed by hand (Wilson and t intervals written out)."""

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import study.reproduction as reproduction
from study.reproduction import compare, reproduction_markdown, reproduction_report

ROOT = Path(__file__).resolve().parents[1]
CIFAR10 = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
PER_CLASS = 1000
AA_PER_CLASS = 500  # AutoAttack on a subset, as the presets shard or subsample it
SEED_SHIFT = (-0.01, 0.0, 0.012)  # every class of seed s moves by this much

# PGD-AT PreAct-ResNet18 inside the published ranges: clean mean 82.4%, PGD mean 48.9%,
# AutoAttack 4 points lower; cat weakest, then bird, deer, dog; automobile, ship, truck strongest.
AT_CLEAN = (0.86, 0.93, 0.72, 0.62, 0.78, 0.75, 0.88, 0.87, 0.92, 0.91)
AT_PGD = (0.55, 0.65, 0.35, 0.25, 0.38, 0.36, 0.52, 0.58, 0.63, 0.62)
AT_AA = tuple(a - 0.04 for a in AT_PGD)
# a fairness method: the worst class (cat) up 4 points, the mean down about 1 point
CFA_PGD = (0.53, 0.63, 0.37, 0.29, 0.38, 0.37, 0.50, 0.56, 0.60, 0.59)
STANDARD_CLEAN = (0.95, 0.97, 0.91, 0.87, 0.94, 0.90, 0.96, 0.96, 0.97, 0.96)
# PGD-AT whose fourth weakest class under PGD is frog, not deer
FROG_PGD = (0.55, 0.65, 0.35, 0.25, 0.45, 0.36, 0.40, 0.58, 0.63, 0.62)


@pytest.fixture(scope="module")
def params():
    from study.config import load_params

    return load_params(ROOT / "params.yaml", {"preset": "paper"}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def _seed_accs(profile, seed):
    return [round((a + SEED_SHIFT[seed]) * PER_CLASS) / PER_CLASS for a in profile]


def runs(method, evaluations, seeds=(0, 1, 2), model="preact_resnet18", epochs=200, train_per_class=None, lr=0.1,
         per_class=None):
    """Class-wise rows (results/tables/classwise.csv columns) of one run group; `evaluations` maps an
    evaluation name (`pgd20@best`) to its class accuracies before the seed shift."""
    rows = []
    for seed in seeds:
        run_id = f"cifar10-{model}-{method}-lr{lr}-e{epochs}-s{seed}"
        for name, profile in evaluations.items():
            n = (per_class or {}).get(name, PER_CLASS)
            for c, acc in enumerate(_seed_accs(profile, seed)):
                correct = round(acc * n)
                rows.append({"run_id": run_id, "dataset": "cifar10", "data_variant": "official", "model": model,
                             "method": method, "seed": seed, "optimizer": "sgd", "lr": lr, "schedule": "step",
                             "weight_decay": 5e-4, "epochs": epochs, "train_per_class": train_per_class,
                             "train_data": "original", "eval": name, "class": c, "class_name": CIFAR10[c],
                             "n": n, "correct": correct, "acc": correct / n})
    frame = pd.DataFrame(rows)
    frame["train_per_class"] = frame["train_per_class"].astype(float)
    return frame


def at_best(**kw):
    return runs("at", {"clean@best": AT_CLEAN, "pgd20@best": AT_PGD, "autoattack@best": AT_AA},
                per_class={"autoattack@best": AA_PER_CLASS}, **kw)


def by_hand_mean(profile, seeds=(0, 1, 2), per_class=PER_CLASS, stat=np.mean):
    """Mean over seeds of a per-seed statistic of the class accuracies, with the MOVER interval
    of a t interval over seeds and Wilson at the mean (n: the test samples of one seed)."""
    values = np.array([stat([round(a * per_class) / per_class for a in _seed_accs(profile, s)]) for s in seeds])
    n = per_class * (len(profile) if stat is np.mean else 1)
    return _mover(values, *_wilson(values.mean(), n))


def _wilson(p, n, z=1.96):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _mover(values, within_lo, within_hi):
    m, k = float(np.mean(values)), len(values)
    h = stats.t.ppf(0.975, k - 1) * np.std(values, ddof=1) / math.sqrt(k) if k > 1 else 0.0
    return m, m - math.hypot(h, m - within_lo), m + math.hypot(h, within_hi - m)


def rows_of(rows, claim_id):
    return [r for r in rows if r.claim.id == claim_id]


def test_mean_rows_equal_the_seed_interval_computed_by_hand(params):
    # `at` is PGD-AT under the mitigation protocol: it matches the claim by its policies, not its name
    rows = compare(at_best(), params)
    for claim_id, profile in (("at_clean", AT_CLEAN), ("at_pgd20", AT_PGD)):
        (row,) = rows_of(rows, claim_id)
        value, lo, hi = by_hand_mean(profile)
        assert row.estimate.seeds == 3
        assert row.estimate.value == pytest.approx(value, abs=1e-12)
        assert (row.estimate.lo, row.estimate.hi) == pytest.approx((lo, hi), rel=1e-4)
        assert row.estimate.lo < row.estimate.value < row.estimate.hi
        assert row.setting == f"preact_resnet18, at, {claim_id[3:]}@best, 200 epochs"


def test_one_seed_gives_the_wilson_interval(params):
    (row,) = rows_of(compare(at_best(seeds=(1,)), params), "at_pgd20")
    value = float(np.mean(_seed_accs(AT_PGD, 1)))
    assert row.estimate.seeds == 1
    assert (row.estimate.lo, row.estimate.hi) == pytest.approx(_wilson(value, 10 * PER_CLASS), rel=1e-9)


def test_within_is_true_inside_the_published_range_and_false_outside(params):
    outside = runs("pgd_at", {"clean@best": [a - 0.10 for a in AT_CLEAN], "pgd20@best": [a - 0.10 for a in AT_PGD]},
                   lr=0.05)
    rows = compare(pd.concat([at_best(), outside], ignore_index=True), params)
    pgd = {r.setting.split(", ")[1]: r for r in rows_of(rows, "at_pgd20")}
    assert sorted(pgd) == ["at", "pgd_at"]
    assert pgd["at"].within is True and pgd["at"].difference == 0.0
    value = by_hand_mean([a - 0.10 for a in AT_PGD])[0]
    assert pgd["pgd_at"].within is False
    assert pgd["pgd_at"].difference == pytest.approx(value - 0.47, abs=1e-12)
    clean = {r.setting.split(", ")[1]: r.within for r in rows_of(rows, "at_clean")}
    assert clean == {"at": True, "pgd_at": False}
    above = runs("at", {"clean@best": [a + 0.08 for a in AT_CLEAN]}, lr=0.2)
    (row,) = rows_of(compare(above, params), "at_clean")
    assert row.within is False
    assert row.difference == pytest.approx(by_hand_mean([a + 0.08 for a in AT_CLEAN])[0] - 0.86, abs=1e-12)


def test_autoattack_drop_is_paired_by_seed(params):
    (row,) = rows_of(compare(at_best(), params), "at_autoattack_drop")
    pgd = np.array([np.mean(_seed_accs(AT_PGD, s)) for s in range(3)])
    aa = np.array([np.mean([round(a * AA_PER_CLASS) / AA_PER_CLASS for a in _seed_accs(AT_AA, s)]) for s in range(3)])
    (lp, up), (la, ua) = _wilson(pgd.mean(), 10 * PER_CLASS), _wilson(aa.mean(), 10 * AA_PER_CLASS)
    d = float((pgd - aa).mean())
    value, lo, hi = _mover(pgd - aa, d - math.hypot(pgd.mean() - lp, ua - aa.mean()),
                           d + math.hypot(up - pgd.mean(), aa.mean() - la))
    assert row.estimate.value == pytest.approx(value, abs=1e-12)
    assert (row.estimate.lo, row.estimate.hi) == pytest.approx((lo, hi), rel=1e-4)
    assert row.within is True
    assert row.setting == "preact_resnet18, at, pgd20@best minus autoattack@best, 200 epochs"


def test_fairness_rows_are_differences_with_the_pgd_at_baseline(params):
    table = pd.concat([at_best(), runs("pgd_at_cfa", {"pgd20@best": CFA_PGD})], ignore_index=True)
    rows = compare(table, params)
    (gain,) = rows_of(rows, "fair_worst_gain")
    (cost,) = rows_of(rows, "fair_mean_cost")
    for row, stat in ((gain, np.min), (cost, np.mean)):
        ours, theirs = by_hand_mean(CFA_PGD, stat=stat), by_hand_mean(AT_PGD, stat=stat)
        diff = ours[0] - theirs[0]
        lo = diff - math.hypot(ours[0] - ours[1], theirs[2] - theirs[0])
        hi = diff + math.hypot(ours[2] - ours[0], theirs[0] - theirs[1])
        assert row.estimate.value == pytest.approx(diff, abs=1e-12)
        assert (row.estimate.lo, row.estimate.hi) == pytest.approx((lo, hi), rel=1e-4)
        assert row.setting.startswith("preact_resnet18, pgd_at_cfa vs at, pgd20@best")
    assert gain.estimate.value == pytest.approx(0.04, abs=1e-9) and gain.within is True
    assert cost.estimate.value < 0 and cost.within is True
    # a method trained on a subset is not compared with a baseline trained on the whole set
    subset = runs("pgd_at_cfa", {"pgd20@best": CFA_PGD}, train_per_class=100)
    (row,) = rows_of(compare(pd.concat([at_best(), subset], ignore_index=True), params), "fair_worst_gain")
    assert row.estimate is None and row.within is None


def test_fine_tuning_is_compared_with_its_parent_and_its_own_published_length(params):
    # FRL fine-tunes PGD-AT with its own lr and 120 epochs (published): the baseline is the PGD-AT
    # group trained on the same data, and 120 epochs are not too short for it
    parent = at_best()
    frl = runs("frl_reweight", {"pgd20@best": CFA_PGD}, epochs=120, lr=0.001)
    rows = compare(pd.concat([parent, frl], ignore_index=True), params)
    (gain,) = rows_of(rows, "fair_worst_gain")
    assert gain.setting.startswith("preact_resnet18, frl_reweight vs at, pgd20@best, 120 epochs")
    assert [(r.epochs, r.published) for r in gain.runs] == [(120, 120), (200, 200)]
    statement = "too short to compare"
    assert statement not in reproduction_markdown(pd.concat([parent, frl]), params, commit="c", day="d")
    short = frl.assign(epochs=1)
    text = reproduction_markdown(pd.concat([parent, short]), params, commit="c", day="d")
    assert statement in text and "1 epoch where the published runs train 120" in text


def test_class_rankings_report_our_weakest_and_strongest_classes(params):
    table = pd.concat([runs("standard", {"clean": STANDARD_CLEAN}, model="resnet18"),
                       runs("pgd_at", {"clean": AT_CLEAN, "pgd20": FROG_PGD})], ignore_index=True)
    rows = compare(table, params)
    (standard,) = rows_of(rows, "standard_weakest")
    assert standard.within is True
    assert [c.name for c in standard.weakest] == ["cat"] and [c.name for c in standard.strongest] == ["automobile"]
    assert standard.weakest[0].acc == pytest.approx(np.mean([_seed_accs(STANDARD_CLEAN, s)[3] for s in range(3)]))
    assert standard.weakest[0].lo < standard.weakest[0].acc < standard.weakest[0].hi
    (clean,) = rows_of(rows, "at_weakest_clean")
    assert [c.name for c in clean.weakest] == ["cat", "bird", "dog", "deer"] and clean.within is True
    (pgd,) = rows_of(rows, "at_weakest_pgd")
    assert [c.name for c in pgd.weakest] == ["cat", "bird", "dog", "frog"] and pgd.within is False
    (strong,) = rows_of(rows, "at_strongest_pgd")
    assert {c.name for c in strong.strongest} == {"automobile", "ship", "truck"} and strong.within is True
    # the same four weakest classes, but bird below cat: "cat, then bird, deer and dog" does not hold
    bird_first = runs("pgd_at", {"clean": AT_CLEAN[:2] + (0.60,) + AT_CLEAN[3:]})
    (row,) = rows_of(compare(bird_first, params), "at_weakest_clean")
    assert {c.name for c in row.weakest} == set(CIFAR10[2:6]) and row.within is False
    text = reproduction_markdown(table, params, commit="c0ffee", day="2025-01-02")
    assert "ours lack deer; have frog" in text
    assert "weakest is bird, not cat" in reproduction_markdown(bird_first, params, commit="c", day="d")
    assert "weakest: cat 87.1% [" in text


def test_evaluations_are_matched_by_their_settings_not_their_names(params):
    from study.config import load_params

    ci = load_params(ROOT / "params.yaml", {"preset": "ci"}, presets_dir=ROOT / "workflow/presets",
                     schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    (row,) = rows_of(compare(runs("at", {"pgd3@best": AT_PGD}), ci), "at_pgd20")
    assert row.estimate is not None and "pgd3@best (3 PGD steps)" in row.setting
    # of two L-inf 8/255 PGD evaluations the one nearest PGD-20 is taken
    (row,) = rows_of(compare(runs("at", {"pgd10@best": AT_CLEAN, "pgd20@best": AT_PGD}), params), "at_pgd20")
    assert row.estimate.value == pytest.approx(by_hand_mean(AT_PGD)[0], abs=1e-12)
    # PGD at 4/255 is not the published attack; neither is a method with other policies
    adam = runs("at", {"pgd20@best": AT_PGD}).assign(optimizer="adam")
    table = pd.concat([runs("at", {"pgd20_linf4@best": AT_PGD}), runs("trades", {"pgd20@best": AT_PGD}), adam])
    (row,) = rows_of(compare(table, params), "at_pgd20")
    assert row.estimate is None and row.within is None


def test_absent_runs_are_not_in_this_preset(params):
    rows = compare(at_best(), params)
    (standard,) = rows_of(rows, "standard_weakest")
    assert standard.within is None and standard.setting == ""
    text = reproduction_markdown(at_best(), params, commit="c0ffee", day="2025-01-02")
    line = next(x for x in text.splitlines() if "`standard_weakest`" in x and x.startswith("|"))
    assert "not in this preset" in line
    line = next(x for x in text.splitlines() if "`at_pgd20`" in x and x.startswith("|"))
    assert "not in this preset" not in line and "| yes |" in line


def test_too_short_runs_are_stated_at_the_top(params):
    statement = "too short to compare with the published numbers"
    full = reproduction_markdown(at_best(), params, commit="c0ffee", day="2025-01-02")
    assert statement not in full
    short = reproduction_markdown(at_best(epochs=10), params, commit="c0ffee", day="2025-01-02")
    assert statement in short and "10 epochs where the published runs train 200" in short
    assert short.index(statement) < short.index("| claim |")
    subset = reproduction_markdown(at_best(train_per_class=100), params, commit="c0ffee", day="2025-01-02")
    assert statement in subset and "100 training images per class" in subset
    # full and short runs side by side: the short rows are marked, the full ones are not
    mixed = pd.concat([at_best(), runs("pgd_at", {"clean": AT_CLEAN}, epochs=8)], ignore_index=True)
    text = reproduction_markdown(mixed, params, commit="c0ffee", day="2025-01-02")
    assert "**Some runs of this preset are too short to compare" in text
    table_lines = [x for x in text.splitlines() if x.startswith("| ") and "`" in x]
    marked = {x.split("`")[1] for x in table_lines if "*too short*" in x}
    assert marked == {"at_weakest_clean", "at_strongest_clean"}
    # nothing comparable (the ci preset's synthetic data): judged on every run of the table
    synthetic = at_best(epochs=2).assign(dataset="synthetic")
    text = reproduction_markdown(synthetic, params, commit="c0ffee", day="2025-01-02")
    assert statement in text and "every claim is listed as not in this preset" in text


def test_report_states_preset_commit_and_date(params, tmp_path, monkeypatch):
    at_best().to_csv(tmp_path / "classwise.csv", index=False)
    monkeypatch.setattr(reproduction, "git_commit", lambda cwd=None: None)
    out = reproduction_report(tmp_path, params, tmp_path / "results" / "reproduction.md")
    text = out.read_text()
    assert out == tmp_path / "results" / "reproduction.md"
    assert "- preset: `paper`" in text and "- commit: `unknown`" in text
    assert re.search(r"^- date: \d{4}-\d{2}-\d{2}$", text, flags=re.MULTILINE)
    monkeypatch.setattr(reproduction, "git_commit", lambda cwd=None: "abc123")
    assert "- commit: `abc123`" in reproduction_markdown(at_best(), params)
    with pytest.raises(FileNotFoundError, match="study tables"):
        reproduction_report(tmp_path / "missing", params, tmp_path / "x.md")


def test_models_trained_on_constructed_features_are_not_compared(params):
    """A standard model trained on D_R or D_det is not 'standard training' of the claims."""
    table = runs("standard", {"clean": STANDARD_CLEAN}, seeds=(0,))
    constructed = table.assign(train_data="d_r", run_id=table["run_id"] + "-dr")
    rows = [r for r in compare(pd.concat([table, constructed], ignore_index=True), params)
            if r.claim.id == "standard_weakest"]
    assert len(rows) == 1
