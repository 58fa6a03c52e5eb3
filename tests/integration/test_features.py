"""Robust / non-robust feature datasets: the constructions and their resumable builder."""

import pytest
import torch

from study.features.build import build_constructed
from study.features.construct import match_representation, other_indices, relabel, relabel_targets
from study.models import build_model

SETTINGS = {
    "per_class": 3,
    "chunk_size": 7,
    "seed": 0,
    "representation": {"steps": 20, "step_size": 0.1},
    "relabel": {"eps": 2.0, "step_size": 0.5, "steps": 15},
}


@pytest.fixture(scope="module")
def model(synthetic_splits):
    """A small CNN trained briefly on the synthetic classes (an untrained net has flat logits)."""
    torch.manual_seed(0)
    net = build_model("small_cnn", 10, mean=(0.5,) * 3, std=(0.25,) * 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = synthetic_splits.train_x.float() / 255, synthetic_splits.train_y
    for _ in range(3):
        for i in range(0, len(y), 64):
            loss = torch.nn.functional.cross_entropy(net(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    opt.zero_grad(set_to_none=True)
    return net.eval()


def test_representation_distance_falls(model, synthetic_splits):
    x = synthetic_splits.train_x[:8].float() / 255
    start = synthetic_splits.train_x[8:16].float() / 255
    with torch.no_grad():
        goal = model.features(x)
        before = (model.features(start) - goal).norm(dim=1)
    out = match_representation(model, x, start, steps=40, step_size=0.3)
    with torch.no_grad():
        after = (model.features(out) - goal).norm(dim=1)
    assert (after < before).all()
    assert after.mean() < 0.6 * before.mean()
    assert out.min() >= 0 and out.max() <= 1
    assert not any(p.grad is not None for p in model.parameters())


def test_match_representation_refuses_train_mode(synthetic_splits):
    m = build_model("small_cnn", 10).train()
    x = synthetic_splits.train_x[:2].float() / 255
    with pytest.raises(ValueError, match="eval mode"):
        match_representation(m, x, x, steps=1, step_size=0.1)


def test_relabel_targets():
    y = torch.tensor([0, 3, 9, 9])
    g = torch.Generator().manual_seed(0)
    assert relabel_targets("d_det", y, 10, g).tolist() == [1, 4, 0, 0]
    drawn = relabel_targets("d_rand", torch.zeros(2000, dtype=torch.long), 10, g)
    counts = torch.bincount(drawn, minlength=10)
    assert counts.min() > 150, "D_rand targets are uniform over all classes"
    with pytest.raises(ValueError, match="d_r"):
        relabel_targets("d_r", y, 10, g)


def test_relabel_moves_predictions_to_the_target(model, synthetic_splits):
    x = synthetic_splits.train_x[:16].float() / 255
    target = (synthetic_splits.train_y[:16] + 1) % 10
    out = relabel(model, x, target, eps=2.0, step_size=0.5, steps=15)
    assert (out - x).flatten(1).norm(dim=1).max() <= 2.0 + 1e-4
    with torch.no_grad():
        hit = (model(out).argmax(1) == target).float().mean()
        before = (model(x).argmax(1) == target).float().mean()
        ce = torch.nn.functional.cross_entropy
        loss_after = ce(model(out), target, reduction="none")
        loss_before = ce(model(x), target, reduction="none")
    assert hit > before
    assert (loss_after < loss_before).all(), "every image moves towards its target class"


def test_other_indices_never_start_from_the_image_itself():
    idx = other_indices(50, torch.Generator().manual_seed(3))
    assert (idx != torch.arange(50)).all() and idx.min() >= 0 and idx.max() < 50
    with pytest.raises(ValueError):
        other_indices(1, torch.Generator())


@pytest.mark.parametrize("kind", ["d_r", "d_det"])
def test_build_writes_prepared_data_with_provenance(tmp_path, model, synthetic_splits, kind):
    built = build_constructed(kind, model, synthetic_splits, tmp_path / "out.pt", tmp_path / "chunks", SETTINGS,
                              {"key": "k1", "source_run": "src"}, progress=False)
    from study.data.prepared import load_prepared
    from study.data.splits import stratified_subset

    loaded = load_prepared(tmp_path / "out.pt")
    subset = stratified_subset(synthetic_splits.train_y, 3)
    assert loaded.train_x.shape == (subset.numel(), *synthetic_splits.train_x.shape[1:])
    assert loaded.train_x.dtype == torch.uint8
    assert torch.equal(loaded.test_x, synthetic_splits.test_x), "models are evaluated on the real test set"
    meta = loaded.meta["constructed"]
    assert meta["kind"] == kind and meta["key"] == "k1" and meta["source_run"] == "src"
    assert meta["settings"] == SETTINGS
    if kind == "d_det":
        assert torch.equal(loaded.train_y, (synthetic_splits.train_y[subset] + 1) % 10)
    else:
        assert torch.equal(loaded.train_y, synthetic_splits.train_y[subset])
        assert meta["summary"]["distance_after"] < meta["summary"]["distance_before"]
    assert torch.equal(built.train_x, loaded.train_x)


class _Interrupting(torch.nn.Module):
    """The model, failing on its n-th call: a construction killed mid-way."""

    def __init__(self, model, fail_at):
        super().__init__()
        self.model, self.calls, self.fail_at = model, 0, fail_at

    def features(self, x):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt
        return self.model.features(x)

    def forward(self, x):
        return self.model(x)


def test_interrupted_construction_resumes_without_recomputing(tmp_path, model, synthetic_splits):
    straight = build_constructed("d_nr", model, synthetic_splits, tmp_path / "a.pt", tmp_path / "a", SETTINGS,
                                 {"key": "k"}, progress=False)
    # 30 images in chunks of 7: kill it during the third chunk.
    per_chunk = SETTINGS["representation"]["steps"] + 3
    with pytest.raises(KeyboardInterrupt):
        build_constructed("d_nr", _Interrupting(model, fail_at=2 * per_chunk + 5), synthetic_splits, tmp_path / "b.pt",
                          tmp_path / "b", SETTINGS, {"key": "k"}, progress=False)
    done = sorted((tmp_path / "b").glob("chunk_*.pt"))
    assert [p.name for p in done] == ["chunk_00000.pt", "chunk_00001.pt"]
    mtimes = {p.name: p.stat().st_mtime_ns for p in done}
    resumed = build_constructed("d_nr", model, synthetic_splits, tmp_path / "b.pt", tmp_path / "b", SETTINGS,
                                {"key": "k"}, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in done} == mtimes, "finished chunks are not recomputed"
    assert len(list((tmp_path / "b").glob("chunk_*.pt"))) == 5
    assert torch.equal(resumed.train_x, straight.train_x) and torch.equal(resumed.train_y, straight.train_y)


def test_chunks_of_another_construction_are_not_reused(tmp_path, model, synthetic_splits):
    build_constructed("d_det", model, synthetic_splits, tmp_path / "a.pt", tmp_path / "w", SETTINGS, {"key": "one"},
                      progress=False)
    other = build_constructed("d_rand", model, synthetic_splits, tmp_path / "b.pt", tmp_path / "w", SETTINGS,
                              {"key": "two"}, progress=False)
    assert other.meta["constructed"]["kind"] == "d_rand"
    import study.io

    assert study.io.load_torch(tmp_path / "w" / "chunk_00000.pt")["key"] == "two"


def test_unknown_kind_lists_valid(tmp_path, model, synthetic_splits):
    with pytest.raises(ValueError, match="d_r, d_nr, d_rand, d_det"):
        build_constructed("d_x", model, synthetic_splits, tmp_path / "x.pt", tmp_path / "x", SETTINGS, {})


def test_engine_refuses_the_wrong_training_set(tmp_path, synthetic_splits, tiny_run_config):
    from study.train.engine import train_run

    cfg = {**tiny_run_config, "constructed": {"kind": "d_r", "key": "abcd1234", "source_run": "src"}}
    with pytest.raises(ValueError, match="d_r abcd1234.*original"):
        train_run(cfg, synthetic_splits, tmp_path / "run", device="cpu", progress=False)
