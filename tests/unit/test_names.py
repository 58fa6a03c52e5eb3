"""study.record_names: the one pair that formats and parses an evaluation record's name, and the
checkpoint of a record's metadata."""

import pytest

from study.labels import eval_name
from study.record_names import checkpoint_of, record_name, split_record_name


def test_record_name_and_its_parse_are_inverse():
    assert record_name("pgd20") == "pgd20" and record_name("pgd20", "best") == "pgd20@best"
    for evaluation in ("clean", "pgd20", "autoattack"):
        for checkpoint in ("last", "best"):
            assert split_record_name(record_name(evaluation, checkpoint)) == (evaluation, checkpoint)


def test_an_unknown_checkpoint_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"'median'.*valid: last, best"):
        record_name("pgd20", "median")
    with pytest.raises(ValueError, match=r"'median'.*valid: last, best"):
        split_record_name("pgd20@median")


def test_checkpoint_of_reads_the_field_and_refuses_a_name_that_contradicts_it():
    assert checkpoint_of({"name": "pgd20@best", "checkpoint": "best"}) == "best"
    assert checkpoint_of({"name": "pgd20@best"}) == "best"  # records written before the field
    assert checkpoint_of({"name": "pgd20"}) == "last"
    with pytest.raises(ValueError, match="records checkpoint 'last' but its name says 'best'"):
        checkpoint_of({"name": "pgd20@best", "checkpoint": "last"})


def test_the_display_name_of_a_best_checkpoint_record_says_so():
    assert eval_name("pgd20@best") == "PGD-20, L∞ (best checkpoint)" and eval_name("pgd20") == "PGD-20, L∞"
