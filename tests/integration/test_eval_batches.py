"""Evaluation batch sizes: chosen for the device, and the records do not depend on them
(random starts are drawn RNG_CHUNK images at a time; the model is in eval mode)."""

import numpy as np
import pytest
import torch
from helpers.attacks import ATTACKS

from study.attacks.pgd import RNG_CHUNK
from study.device import AUTO_EVAL_BATCH, eval_batch_size
from study.predict import predict
from study.run_directory import load_trained_model


@pytest.mark.parametrize("norm", sorted(ATTACKS))
def test_large_batches_give_the_records_of_small_ones(norm, standard_run, synthetic_splits, one_thread):
    model = load_trained_model(standard_run, device="cpu")[0]
    x, y = synthetic_splits.test_x, synthetic_splits.test_y
    assert x.shape[0] > RNG_CHUNK, "the set must span several random-number chunks"
    small = predict(model, x, y, attack=ATTACKS[norm], batch_size=RNG_CHUNK, seed=3, keep_logits=True)
    large = predict(model, x, y, attack=ATTACKS[norm], batch_size=4 * RNG_CHUNK, seed=3, keep_logits=True)
    np.testing.assert_array_equal(small.pred, large.pred)
    np.testing.assert_allclose(small.logits, large.logits, rtol=1e-4, atol=1e-4)
    # a different seed draws different starts: the equality above is not the attack ignoring them
    other = predict(model, x, y, attack=ATTACKS[norm], batch_size=RNG_CHUNK, seed=4, keep_logits=True)
    assert not np.allclose(small.logits, other.logits, atol=1e-6)


def test_auto_batch_size_is_large_on_a_gpu_and_a_multiple_of_the_chunk():
    assert eval_batch_size("auto", torch.device("cuda")) > eval_batch_size("auto", torch.device("cpu"))
    assert all(v % RNG_CHUNK == 0 for v in AUTO_EVAL_BATCH.values())
    assert eval_batch_size(None, torch.device("cpu")) == AUTO_EVAL_BATCH["cpu"]
    assert eval_batch_size(64, torch.device("cuda")) == 64
    with pytest.raises(ValueError, match="positive integer or auto, got 'big'"):
        eval_batch_size("big", torch.device("cpu"))
