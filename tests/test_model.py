import pytest
import torch

from oversmooth.models.model import GPT, GPTConfig


def _logprob_matrix(model: GPT, n_contexts: int = 96, length: int = 24) -> torch.Tensor:
    """Next-byte log-probabilities of many random contexts, one row per position, in float64."""
    torch.manual_seed(0)
    x = torch.randint(0, 256, (n_contexts, length))
    with torch.no_grad():
        logits, _ = model.double().eval()(x)
    return torch.log_softmax(logits, dim=-1).reshape(-1, 256)


@pytest.mark.parametrize("k", [2, 4, 16, 64])
def test_bottleneck_log_probs_have_rank_at_most_k_plus_1(k):
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=128, bottleneck=k))
    for p in model.head.parameters():  # make the head far from its small initialisation
        torch.nn.init.normal_(p, std=1.0)
    matrix = _logprob_matrix(model)
    assert matrix.shape[0] > 256
    rank = torch.linalg.matrix_rank(matrix).item()
    assert k <= rank <= k + 1


@pytest.mark.parametrize("k", [2, 4])
def test_mixture_of_softmaxes_breaks_the_k_plus_1_bound(k):
    """Yang et al. 2017: the same rank test as the bottleneck head, on a MoS head of 4 components of width k."""
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=128, bottleneck=k, mos_components=4))
    for p in model.head.parameters():
        torch.nn.init.normal_(p, std=1.0)
    matrix = _logprob_matrix(model)
    assert torch.allclose(matrix.exp().sum(-1), torch.ones(len(matrix), dtype=torch.float64))  # normalised
    assert torch.linalg.matrix_rank(matrix).item() > 4 * (k + 1)  # far beyond k + 1 (and beyond K(k + 1))
    assert model.head.bottleneck(torch.randn(3, 128, dtype=torch.float64)).shape == (3, 4 * k)


def test_mixture_of_softmaxes_needs_a_bottleneck():
    with pytest.raises(ValueError, match="needs a bottleneck"):
        GPTConfig(mos_components=3)


def test_plain_head_with_wide_hidden_is_full_rank():
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=256, bottleneck=None))
    torch.nn.init.normal_(model.head.out.weight, std=1.0)
    assert torch.linalg.matrix_rank(_logprob_matrix(model)).item() == 256


def test_forward_shapes_loss_and_causality():
    model = GPT(GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32, bottleneck=4)).eval()
    x = torch.randint(0, 256, (3, 16))
    logits, loss = model(x, x)
    assert logits.shape == (3, 16, 256)
    assert loss.item() == pytest.approx(torch.log(torch.tensor(256.0)).item(), abs=0.1)  # untrained: near uniform
    y = x.clone()
    y[:, 10:] = (y[:, 10:] + 1) % 256  # changing the future must not change earlier outputs
    assert torch.allclose(model(y)[0][:, :10], logits[:, :10], atol=1e-6)
    assert model.output_matrix().shape == (256, 4)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=30, n_head=4)
    model = GPT(GPTConfig(block_size=8, n_layer=1, n_head=1, n_embd=8))
    with pytest.raises(ValueError, match="exceeds block_size 8"):
        model(torch.zeros(1, 9, dtype=torch.long))
