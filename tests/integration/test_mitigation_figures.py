"""Figure 13: the mitigation table (seed spread, intervals, best/last) and its figures."""

import math

import numpy as np
import pandas as pd
import pytest

from study.figures.catalog import make_figure
from study.figures.mitigation import mitigation_table, plot_mitigation, plot_policy_epochs
from study.labels import method_name
from study.metrics.intervals import wilson_interval
from study.record_names import split_record_name


def classwise(accs_by_run):
    """Class-wise rows: {(method, seed, eval): [acc per class]} with 100 samples per class; `eval`
    is the record's name (`pgd3@best`) and `checkpoint` its field, as study tables writes them."""
    rows = []
    for (method, seed, ev), accs in accs_by_run.items():
        for c, acc in enumerate(accs):
            rows.append({"run_id": f"{method}-s{seed}", "dataset": "synthetic", "model": "small_cnn",
                         "method": method, "seed": seed, "eval": ev, "checkpoint": split_record_name(ev)[1],
                         "class": c, "class_name": f"c{c}",
                         "n": 100, "correct": int(round(acc * 100)), "acc": acc})
    return pd.DataFrame(rows)


def test_table_means_worst_class_seed_interval_and_checkpoints():
    table = mitigation_table(classwise({
        ("trades_cfa", 0, "pgd3"): [0.5, 0.2, 0.8],
        ("trades_cfa", 1, "pgd3"): [0.6, 0.4, 0.8],
        ("trades_cfa", 0, "pgd3@best"): [0.6, 0.3, 0.9],
        ("at", 0, "clean"): [0.9, 0.5, 0.7],
    }), methods=["at", "trades_cfa"])
    assert table["method"].tolist()[0] == "at", "methods in the order given"
    last = table[(table["method"] == "trades_cfa") & (table["checkpoint"] == "last")].iloc[0]
    assert last["eval"] == "pgd3" and last["n_seeds"] == 2
    assert last["mean"] == pytest.approx((0.5 + 0.6) / 2)
    assert last["worst"] == pytest.approx(0.3) and last["worst_class"] == "c1"
    assert last["worst_std"] == pytest.approx(np.std([0.2, 0.4], ddof=1))
    # t over the 2 seeds (12.706) added in squares to the Wilson interval of one seed's 100 samples,
    # clipped to the accuracies that exist
    half = 12.706 * np.std([0.2, 0.4], ddof=1) / math.sqrt(2)
    w_lo, w_hi = wilson_interval(0.3 * 100, 100)
    assert last["worst_lo"] == pytest.approx(max(0.0, 0.3 - math.hypot(half, 0.3 - w_lo)), abs=1e-4)
    assert last["worst_hi"] == pytest.approx(min(1.0, 0.3 + math.hypot(half, w_hi - 0.3)), abs=1e-4)
    mean_half = 12.706 * np.std([0.5, 0.6], ddof=1) / math.sqrt(2)
    m_lo, m_hi = wilson_interval(0.55 * 300, 300)
    assert last["mean_lo"] == pytest.approx(max(0.0, 0.55 - math.hypot(mean_half, 0.55 - m_lo)), abs=1e-4)
    assert last["mean_hi"] == pytest.approx(min(1.0, 0.55 + math.hypot(mean_half, m_hi - 0.55)), abs=1e-4)
    best = table[(table["method"] == "trades_cfa") & (table["checkpoint"] == "best")].iloc[0]
    assert best["eval"] == "pgd3" and best["worst"] == pytest.approx(0.3)
    # one seed: a Wilson interval from the counts (30 of 100)
    assert np.isnan(best["worst_std"]) and best["worst_lo"] < 0.3 < best["worst_hi"]
    assert best["worst_lo"] == pytest.approx(0.2189, abs=1e-3)


def test_worst_class_of_a_hundred_classes_is_the_worst_ten_percent():
    accs = [0.0] * 10 + [1.0] * 90
    table = mitigation_table(classwise({("at", 0, "clean"): accs}))
    assert table.iloc[0]["worst"] == 0.0 and table.iloc[0]["mean"] == pytest.approx(0.9)


def test_method_names():
    assert method_name("trades_cfa_fawa") == "TRADES + CFA + FAWA"
    assert method_name("pgd_at_fairtat") == "PGD-AT + FAIR-TAT"
    assert method_name("fat_fairtat_ema") == "FAT + FAIR-TAT + EMA"
    assert method_name("frl_reweight_remargin") == "FRL (reweight + remargin)"


def test_the_checkpoint_is_read_from_its_column_not_from_the_name():
    # a table whose `checkpoint` column says best for a record named without the mark: the column decides
    cw = classwise({("at", 0, "pgd3"): [0.5, 0.2]}).assign(checkpoint="best")
    assert mitigation_table(cw)["checkpoint"].tolist() == ["best"]
    # a table written before the column: the records' names say it
    old = mitigation_table(classwise({("at", 0, "pgd3@best"): [0.5, 0.2]}).drop(columns="checkpoint"))
    assert old[["eval", "checkpoint"]].values.tolist() == [["pgd3", "best"]]


def test_figures_draw_and_make_writes_the_table(tmp_path):
    cw = classwise({("at", 0, "clean"): [0.9, 0.5], ("at", 0, "pgd3"): [0.4, 0.1],
                    ("at", 0, "pgd3@best"): [0.5, 0.2], ("at", 0, "clean@best"): [0.8, 0.6]})
    fig = plot_mitigation(mitigation_table(cw))
    assert len(fig.axes) == 2
    path = tmp_path / "classwise.csv"
    cw.to_csv(path, index=False)
    written = make_figure("mitigation", path, tmp_path / "fig13", dataset="synthetic", model="small_cnn",
                          method="all", methods=["at"])
    assert {p.suffix for p in written} == {".png", ".pdf", ".csv"}
    saved = pd.read_csv(tmp_path / "fig13.csv")
    assert len(saved) == 4 and set(saved["checkpoint"]) == {"last", "best"}  # 2 evaluations x 2 checkpoints

    epochs = pd.DataFrame([{"method": m, "seed": 0, "epoch": e, "class": c, "class_name": f"c{c}",
                            "epsilon": 0.03 * (1 + (c * (e - 1) if m == "pgd_at_cfa" else 0)), "weight": 1.0,
                            "weight_boundary": 1.0, "beta": 0.0}
                           for m in ("at", "pgd_at_cfa") for e in (1, 2) for c in (0, 1)])
    fig = plot_policy_epochs(epochs, ["at", "pgd_at_cfa"])
    drawn = [ax for ax in fig.axes if ax.axison]
    title, *note = drawn[0].get_title().splitlines()
    assert len(drawn) == 1 and title == "PGD-AT + CFA", "only methods whose state varies"
    assert note == ["⚠ run too short to compare (2 epochs)"]
    assert drawn[0].lines[1].get_ydata().tolist() == [1.0, 2.0], "epsilon relative to the base"
    # the command's path: the epochs table (no `eval`, no `checkpoint` column) drawn from its file
    table = tmp_path / "epochs.csv"
    epochs.assign(dataset="synthetic", model="small_cnn").to_csv(table, index=False)
    written = make_figure("policy_epochs", table, tmp_path / "policy", dataset="synthetic", model="small_cnn",
                          method="all", methods=["at", "pgd_at_cfa"])
    assert {p.suffix for p in written} == {".png", ".pdf"}


def test_the_controls_the_workflow_planned_win_over_params_yaml(tmp_path, monkeypatch):
    """The figure rule passes each method's control as the workflow planned it (its --config values
    included); params.yaml alone would compare trades_cfa with trades_normalized."""
    cw = classwise({(m, 0, ev): accs for m in ("at", "trades_cfa", "trades_normalized")
                    for ev, accs in (("pgd3@best", [0.4, 0.2]), ("clean@best", [0.8, 0.6]))})
    path = tmp_path / "classwise.csv"
    cw.to_csv(path, index=False)
    monkeypatch.chdir(tmp_path.parent)  # no params.yaml here: without --controls no method has a control
    methods = ["at", "trades_cfa", "trades_normalized"]
    make_figure("mitigation", path, tmp_path / "fig13", dataset="synthetic", model="small_cnn", method="all",
                methods=methods, controls=["trades_cfa=at"])
    saved = pd.read_csv(tmp_path / "fig13.csv")
    assert set(saved.loc[saved["method"] == "trades_cfa", "compare_with"]) == {"at"}
    assert saved.loc[saved["method"] == "trades_normalized", "compare_with"].isna().all()
    with pytest.raises(ValueError, match="--controls 'trades_cfa': expected METHOD=CONTROL"):
        make_figure("mitigation", path, tmp_path / "bad", dataset="synthetic", model="small_cnn", method="all",
                    methods=methods, controls=["trades_cfa"])
