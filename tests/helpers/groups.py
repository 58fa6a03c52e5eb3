"""The xdist groups of the costly shared fixtures (tests/conftest.py puts each test that uses
one on its group's worker)."""

#: Costly shared fixtures (module or session scope), named by the module that defines them:
#: their tests go to one worker (pytest -n 2 --dist loadgroup), which then computes each once
#: instead of once per worker (a module fixture's tests otherwise land on both). A conftest
#: fixture may be used by any module; a test module's, by that module's tests.
SHARED_FIXTURE_GROUPS = {
    "conftest.paper_dry_run": "paper_dag",
    "conftest.ci_dry_run": "ci_dag",
    "test_bench.tiny_bench": "bench",
    "test_evaluate.trained_runs": "evaluate_runs",
    "test_robustness_suite.records": "suite_records",
    "test_figure_quality.rendered": "rendered_figures",
    "test_features.model": "feature_model",
    "test_corruptions.strength": "corruption_strength",
    "test_faults.tiny_run": "faults_run",
}
