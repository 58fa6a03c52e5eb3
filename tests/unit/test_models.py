import pytest
import torch
import torch.nn.functional as F
from torch import nn

from study.models import MODEL_NAMES, Normalize, build_model, count_flops
from study.models.registry import MODELS

SHAPES = [(3, 32), (1, 28), (3, 64)]

# The ImageNet-class architectures (their rows: above 1.5 forward GFLOPs at 32 px) cost seconds
# per pass on a CPU; they are checked at 28 and 32 px only
# (test_heavy_model_trains_at_28px_and_classifies_32px below), the 64 px case, which multiplies
# their cost by four, is left out.
HEAVY = tuple(n for n in MODEL_NAMES if MODELS[n].gflops_32 > 1.5)
LIGHT = tuple(n for n in MODEL_NAMES if n not in HEAVY)


def test_the_heavy_models_are_the_imagenet_class_ones():
    assert HEAVY == ("resnet50", "wrn_28_10", "densenet121", "densenet169", "googlenet", "inception_v3")


@pytest.mark.parametrize("name", LIGHT)
@pytest.mark.parametrize(("channels", "size"), SHAPES)
def test_logits_and_features_shapes(name, channels, size):
    torch.manual_seed(0)
    model = build_model(name, num_classes=7, in_channels=channels, image_size=size).eval()
    x = torch.rand(2, channels, size, size)
    with torch.no_grad():
        logits = model(x)
        feats = model.features(x)
    assert logits.shape == (2, 7)
    assert feats.shape == (2, MODELS[name].feature_dim) == (2, model.feature_dim)
    assert isinstance(model.fc, nn.Linear)
    assert model.fc.in_features == model.feature_dim and model.fc.out_features == 7
    torch.testing.assert_close(model.fc(feats), logits)


@pytest.mark.parametrize("name", LIGHT)
def test_one_sgd_step_changes_parameters_with_finite_loss(name):
    assert_one_sgd_step(name, channels=3, size=32)


def assert_one_sgd_step(name: str, channels: int, size: int) -> None:
    torch.manual_seed(0)
    model = build_model(name, num_classes=10, in_channels=channels, image_size=size).train()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.rand(2, channels, size, size), torch.randint(0, 10, (2,))
    logits = model(x)
    assert logits.shape == (2, 10)
    assert model.features(x).shape == (2, model.feature_dim)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    # Every trainable tensor (conv, BN affine, fc) must receive a gradient and move.
    unchanged = [
        n for (n, p), b in zip(model.named_parameters(), before, strict=True) if torch.equal(b, p)
    ]
    assert unchanged == []


@pytest.mark.parametrize("name", HEAVY)
def test_heavy_model_trains_at_28px_and_classifies_32px(name):
    assert_one_sgd_step(name, channels=1, size=28)
    torch.manual_seed(0)
    model = build_model(name, num_classes=7, in_channels=3, image_size=32).eval()
    x = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        feats = model.features(x)
        logits = model(x)
    assert feats.shape == (1, MODELS[name].feature_dim) == (1, model.feature_dim)
    assert logits.shape == (1, 7)
    torch.testing.assert_close(model.fc(feats), logits)


def test_normalize_matches_hand_computation():
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    norm = Normalize(mean, std)
    x = torch.rand(2, 3, 4, 5)
    expected = torch.empty_like(x)
    for c in range(3):
        expected[:, c] = (x[:, c] - mean[c]) / std[c]
    torch.testing.assert_close(norm(x), expected)
    assert Normalize.identity(3)(x).equal(x)


def test_build_model_applies_normalization_inside_the_model():
    mean, std = (0.3, 0.5, 0.7), (0.2, 0.1, 0.4)
    torch.manual_seed(0)
    normalized = build_model("small_cnn", 10, mean=mean, std=std).eval()
    plain = build_model("small_cnn", 10).eval()
    state = {k: v for k, v in normalized.state_dict().items() if not k.startswith("normalize.")}
    plain.load_state_dict(state, strict=False)
    x = torch.rand(3, 3, 32, 32)
    by_hand = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(normalized(x), plain(by_hand))
        assert not torch.allclose(normalized(x), plain(x))
    assert normalized.normalize.mean.flatten().tolist() == pytest.approx(mean)
    assert "normalize.std" in normalized.state_dict()


@pytest.mark.parametrize(
    ("mean", "std", "match"),
    [((0.5, 0.5), (0.2, 0.2, 0.2), "same length"), ((0.5,), (0.0,), "std must be")],
)
def test_normalize_rejects_bad_statistics(mean, std, match):
    with pytest.raises(ValueError, match=match):
        Normalize(mean, std)


def test_build_model_rejects_statistics_of_wrong_channel_count():
    with pytest.raises(ValueError, match="in_channels=1"):
        build_model("small_cnn", 10, in_channels=1, mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2))


def test_unknown_model_name_lists_valid_names():
    with pytest.raises(ValueError, match="'vgg99'") as info:
        build_model("vgg99", 10)
    for name in MODEL_NAMES:
        assert name in str(info.value)


def test_too_small_image_size_is_rejected():
    with pytest.raises(ValueError, match="image_size >= 8"):
        build_model("resnet18", 10, image_size=4)


def test_parameter_counts_match_the_published_cifar_architectures():
    counts = {n: sum(p.numel() for p in build_model(n, 10).parameters()) for n in MODEL_NAMES}
    # CIFAR variants as in the widely used reference implementations (3x3 stem, 10 classes).
    assert counts["resnet50"] == 23_520_842
    assert counts["wrn_28_10"] == 36_479_194
    assert counts["densenet121"] == 6_956_298
    assert counts["vgg16"] == 14_724_042  # BN variant without conv biases (BN makes them moot)
    assert counts["lenet"] == 62_006  # LeNet-5's 61,706 plus 300 weights for 3 input channels
    assert counts["resnet18"] == 11_173_962
    # PreAct: BN on each block's input instead of its outputs/shortcuts, plus a final BN.
    assert counts["preact_resnet18"] == 11_172_170
    assert counts["small_cnn"] < 1_000_000


def test_count_flops_linear_layer():
    assert count_flops(nn.Sequential(nn.Flatten(), nn.Linear(12, 5)), (3, 2, 2)) == 2 * 12 * 5


def test_count_flops_conv_layers_with_stride_and_groups():
    conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
    assert count_flops(conv, (3, 16, 16)) == 2 * (8 * 16 * 16) * (3 * 3 * 3)
    strided = nn.Conv2d(4, 6, kernel_size=(3, 5), stride=2, padding=(1, 2), groups=2)
    # Output 8x8; each output value reads (4 / 2 groups) channels x 3 x 5 taps.
    assert count_flops(strided, (4, 16, 16)) == 2 * (6 * 8 * 8) * (2 * 3 * 5)


def test_count_flops_sums_layers_and_keeps_model_state():
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)
    ).train()
    running_mean = model[1].running_mean.clone()
    expected = 2 * (2 * 4 * 4 * 1 * 9) + 2 * (32 * 3)
    assert count_flops(model, (1, 6, 6)) == expected
    assert model.training
    assert torch.equal(model[1].running_mean, running_mean)


def test_count_flops_of_registered_models_is_plausible():
    # ResNet-18 (CIFAR) is about 0.56 G multiply-accumulates per 32x32 image.
    flops = count_flops(build_model("resnet18", 10), (3, 32, 32))
    assert 1.0e9 < flops < 1.2e9
    assert count_flops(build_model("small_cnn", 10), (3, 32, 32)) < flops / 10
