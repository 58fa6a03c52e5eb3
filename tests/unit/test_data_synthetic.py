import hashlib

import pytest
import torch

from study.data.synthetic import confusable_pair, make_synthetic


def _fingerprint(splits):
    h = hashlib.sha256()
    for t in (splits.train_x, splits.train_y, splits.test_x, splits.test_y):
        h.update(t.numpy().tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def data():
    return make_synthetic(train_per_class=60, test_per_class=40, seed=0)


def test_shapes_types_and_balance(data):
    assert data.train_x.shape == (600, 3, 32, 32) and data.train_x.dtype == torch.uint8
    assert data.test_x.shape == (400, 3, 32, 32)
    assert torch.bincount(data.train_y).tolist() == [60] * 10
    assert torch.bincount(data.test_y).tolist() == [40] * 10
    assert data.class_names == [f"class{i}" for i in range(10)]
    assert data.meta["synthetic"]["seed"] == 0
    # Classes are interleaved, not stored one block after another.
    assert data.train_y[:10].unique().numel() > 3


def test_same_seed_same_bytes_other_seed_other_bytes(data):
    again = make_synthetic(train_per_class=60, test_per_class=40, seed=0)
    other = make_synthetic(train_per_class=60, test_per_class=40, seed=1)
    assert _fingerprint(again) == _fingerprint(data)
    assert _fingerprint(other) != _fingerprint(data)


def test_other_shapes():
    small = make_synthetic(
        num_classes=4, train_per_class=3, test_per_class=2, image_size=8, channels=1, seed=5
    )
    assert small.train_x.shape == (12, 1, 8, 8) and small.test_x.shape == (8, 1, 8, 8)
    with pytest.raises(ValueError, match="num_classes"):
        make_synthetic(num_classes=1)


def _class_means(x, y, k):
    return torch.stack([x[y == c].float().mean(0) for c in range(k)])


def test_class_means_differ_and_the_pair_is_closest(data):
    means = _class_means(data.train_x, data.train_y, 10).flatten(1)
    dist = torch.cdist(means, means)
    off_diag = dist[~torch.eye(10, dtype=torch.bool)]
    assert off_diag.min() > 0
    a, b = confusable_pair(10)
    assert dist[a, b] == off_diag.min()


def test_noise_rises_with_class_index(data):
    means = _class_means(data.train_x, data.train_y, 10)
    spread = torch.stack(
        [
            (data.train_x[data.train_y == c].float() - means[c]).pow(2).mean().sqrt()
            for c in range(10)
        ]
    )
    assert spread[-1] > 2 * spread[0]
    assert spread[7:].mean() > spread[:3].mean()


def test_nearest_mean_classifier_is_good_but_not_perfect(data):
    # The intended difficulty: easy classes nearly always right, the pair and the noisy
    # classes clearly imperfect, all well above the 10% chance level.
    means = _class_means(data.train_x, data.train_y, 10).flatten(1)
    pred = torch.cdist(data.test_x.float().flatten(1), means).argmin(1)
    acc = torch.stack([(pred[data.test_y == c] == c).float().mean() for c in range(10)])
    a, b = confusable_pair(10)
    assert acc[:3].min() >= 0.9
    assert min(acc[a], acc[b]) < 0.9
    assert acc[7:].mean() < acc[:3].mean()
    assert acc.mean() > 0.5
