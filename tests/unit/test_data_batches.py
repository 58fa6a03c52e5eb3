import pytest
import torch

from study.data.batches import epoch_batches


def test_batches_cover_every_index_once():
    batches = epoch_batches(10, 4, torch.Generator().manual_seed(0))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(torch.cat(batches).tolist()) == list(range(10))
    assert all(b.dtype == torch.int64 for b in batches)


def test_drop_last_removes_only_a_short_final_batch():
    assert [len(b) for b in epoch_batches(10, 4, None, drop_last=True)] == [4, 4]
    assert [len(b) for b in epoch_batches(8, 4, None, drop_last=True)] == [4, 4]


def test_no_shuffle_keeps_dataset_order():
    batches = epoch_batches(5, 2, None, shuffle=False)
    assert [b.tolist() for b in batches] == [[0, 1], [2, 3], [4]]


def test_seeded_generator_repeats_and_different_seeds_differ():
    a = torch.cat(epoch_batches(100, 32, torch.Generator().manual_seed(1)))
    b = torch.cat(epoch_batches(100, 32, torch.Generator().manual_seed(1)))
    c = torch.cat(epoch_batches(100, 32, torch.Generator().manual_seed(2)))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert not torch.equal(a, torch.arange(100))


def test_successive_epochs_from_one_generator_differ():
    g = torch.Generator().manual_seed(0)
    assert not torch.equal(torch.cat(epoch_batches(50, 50, g)), torch.cat(epoch_batches(50, 50, g)))


def test_bad_arguments():
    assert epoch_batches(0, 4, None) == []
    with pytest.raises(ValueError, match="batch_size"):
        epoch_batches(10, 0, None)
    with pytest.raises(ValueError, match="n must be"):
        epoch_batches(-1, 4, None)
