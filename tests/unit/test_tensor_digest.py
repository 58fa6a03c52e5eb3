"""The content digest a checkpoint records of its inputs (study.train.checkpoint.tensor_digest):
a BatchNorm model's state dict holds 0-d tensors (num_batches_tracked), which a fine-tuning
run's parent model digest reads."""

import torch

from study.train.checkpoint import tensor_digest


def test_a_state_dict_with_0d_tensors_digests_by_content():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    state = sorted(model.state_dict().items())
    assert any(t.dim() == 0 for _, t in state)
    same = sorted({k: v.clone() for k, v in model.state_dict().items()}.items())
    assert tensor_digest(state) == tensor_digest(same)
    model[1].num_batches_tracked += 1
    assert tensor_digest(sorted(model.state_dict().items())) != tensor_digest(same)
    # the shape is part of the content: the same bytes in another shape digest differently
    assert tensor_digest([("x", torch.zeros(2, 3))]) != tensor_digest([("x", torch.zeros(3, 2))])
