"""Every pair of methods that figure 13 or the reproduction report compares declares what
differs between its two arms (`differs_in`), and that is exactly what differs between the two
run configs as the plan builds them (study.config.comparisons), for every preset and the bare
params.yaml; docs/methods.md lists the pairs as the code generates them."""

from pathlib import Path

import pytest
from helpers.params import changed

from study.config import ConfigError, load_params, read_yaml
from study.config.comparisons import (
    END,
    START,
    comparison_differences,
    comparisons,
    comparisons_markdown,
    preset_params,
    rewrite_section,
)

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (ROOT / "workflow/presets").glob("*.yaml"))


def _params(preset: str | None) -> dict:
    return preset_params(preset, ROOT / "params.yaml", ROOT / "workflow/presets")


@pytest.mark.parametrize("preset", [*PRESETS, None], ids=[*PRESETS, "bare params.yaml"])
def test_every_compared_pair_differs_exactly_in_what_it_declares(preset):
    found = comparisons(_params(preset))
    wrong = [f"{c.group}: {c.method} vs {c.baseline}: undeclared {c.undeclared}, declared but equal {c.unfounded}"
             for c in found if c.undeclared or c.unfounded]
    assert not wrong, "\n".join(wrong)
    if preset in ("paper", "demo"):
        assert found, "the mitigation groups compare methods"


def test_the_paper_compares_each_family_within_one_form():
    paper = _params("paper")
    pairs = {(c.group, c.method): c for c in comparisons(paper)}
    # FAIR-TAT against AT with CFA's margins, in its own loop: the targets alone
    for family in ("pgd_at", "trades", "fat"):
        c = pairs[("mitigation", f"{family}_fairtat")]
        assert (c.baseline, c.actual) == (f"{family}_margins", frozenset({"targets"}))
    # EMA and FAWA of TRADES on the normalized form, as CFA's: no loss-scale change
    assert pairs[("mitigation", "trades_ema")].baseline == "trades_normalized"
    assert pairs[("mitigation", "trades_fawa")].actual == frozenset({"averaging"})
    # FAT and FAT + CFA share CFA's loop: the calibration (and FAWA) alone
    assert pairs[("mitigation", "fat_cfa")].actual == frozenset({"epsilon", "averaging"})


@pytest.mark.parametrize(("method", "patch", "missed"), [
    ("trades_cfa", {"loss": {"beta": 5}}, "loss.beta"),
    ("pgd_at_fairtat", {"adversary": {"bn_stats": ["adv", "step", "clean"]}}, "adversary.bn_stats"),
])
def test_a_changed_arm_is_an_undeclared_difference(method, patch, missed):
    raw = read_yaml(ROOT / "params.yaml")
    raw["methods"][method].update(patch)
    params = load_params(ROOT / "params.yaml", presets_dir=ROOT / "workflow/presets", base=raw)
    assert missed in comparison_differences(params, method, "mitigation")
    wrong = {c.method: c.undeclared for c in comparisons(params) if c.undeclared}
    assert missed in wrong[method]


def test_a_compared_method_without_differs_in_is_a_one_line_error_where_the_params_are_loaded():
    raw = read_yaml(ROOT / "params.yaml")
    del raw["methods"]["cw_critical"]["differs_in"]
    # refused by load_params (every front end's), not first by the report's job after the runs trained
    with pytest.raises(ConfigError, match=r"^preset \S+paper\.yaml: method 'cw_critical' is compared with 'at' in "
                                          r"experiment group 'mitigation' but declares no `differs_in`; [^\n]*"
                                          r"\(heads: targets, [^\n]*, init_from, validation_attack, train\)$"):
        load_params(ROOT / "params.yaml", presets_dir=ROOT / "workflow/presets", base=raw)


def test_a_bad_differs_in_path_names_the_valid_heads():
    raw = read_yaml(ROOT / "params.yaml")
    raw["methods"]["cw_critical"]["differs_in"] = ["weigths"]
    valid = r"valid heads: targets, .*adversary, init_from, validation_attack, train"
    with pytest.raises(ConfigError, match=r"differs_in names 'weigths'; " + valid):
        load_params(ROOT / "params.yaml", presets_dir=ROOT / "workflow/presets", base=raw)


def test_differs_in_changes_no_run_id():
    params = _params("paper")
    from study.config import plan_runs

    before = {r.run_id for r in plan_runs(params)}
    methods = {name: {**entry, "differs_in": ["targets"]} if entry and "differs_in" in entry else entry
               for name, entry in params.set_fields()["methods"].items()}
    params = changed(params, methods=methods)
    assert {r.run_id for r in plan_runs(params)} == before
    assert all("differs_in" not in r.config["method_config"] for r in plan_runs(params))


def test_docs_list_the_declared_pairs_as_generated():
    doc = (ROOT / "docs/methods.md").read_text()
    assert START in doc and END in doc
    expected = rewrite_section(doc, comparisons_markdown(ROOT / "params.yaml", ROOT / "workflow/presets"))
    assert doc == expected, "docs/methods.md's declared comparisons are stale: run `study comparisons --write`"
