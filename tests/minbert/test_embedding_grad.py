"""embedding_grad.py: the word embeddings' gradient, written into a buffer kept between steps, equals torch's backward
(padding row included) step after step, accumulates over two lookups before a step, follows zero_grad either way,
and gives way to torch's backward where autograd's accumulation is needed (reuse_grad off, no grad, DDP)."""
import torch

from minbert.embedding_grad import Embedding


def _pair(seed=0):
    torch.manual_seed(seed)
    ours = Embedding(50, 8, padding_idx=0)
    ref = torch.nn.Embedding(50, 8, padding_idx=0)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def test_gradients_equal_torchs_step_after_step_and_over_two_lookups():
    ours, ref = _pair()
    g = torch.Generator().manual_seed(1)
    buffers = set()
    for step in range(4):
        for m in (ours, ref):
            m.weight.grad = None  # zero_grad(set_to_none=True)
        for _ in range(2):  # R-Drop's two passes, or gradient accumulation: one gradient
            ids = torch.randint(0, 50, (4, 6), generator=g)
            ids[0, :2] = 0  # padding
            w = torch.randn(4, 6, 8, generator=g)
            (ours(ids) * w).sum().backward()
            (ref(ids) * w).sum().backward()
        torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
        assert ours.weight.grad[0].abs().sum() == 0
        buffers.add(id(ours.weight.grad))
    assert len(buffers) == 1  # one buffer, kept


def test_zero_grad_in_place_and_torchs_path_where_it_is_needed():
    ours, ref = _pair()
    ids = torch.tensor([[3, 4, 4, 9]])
    ours(ids).sum().backward()
    ours.weight.grad.zero_()  # zero_grad(set_to_none=False)
    ref(ids).sum().backward()
    ours(ids).sum().backward()
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    ours.reuse_grad = False
    assert ours(ids).grad_fn.name() == "EmbeddingBackward0"
    with torch.no_grad():
        assert ours(ids).grad_fn is None
    ours.reuse_grad = True
    assert ours(ids).grad_fn.name() != "EmbeddingBackward0"
