"""int8 linear layers with activations scaled per row (hf_graphtf.translation.int8_linear): the arithmetic against a
plain float64 re-computation, and a row's independence from the rows beside it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_graphtf.translation.int8_linear import INT8_LIMIT, RowScaledInt8Linear, quantize_linear_layers


def _linear(bias: bool = True, in_features: int = 40, out_features: int = 24) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(in_features, out_features, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
def test_the_product_is_the_quantized_rows_times_the_quantized_weights_rescaled(bias):
    """Re-computed in float64 from the module's description: each row quantized by its own largest magnitude,
    the weights by each output feature's, integer products, both scales, then the bias."""
    linear = _linear(bias)
    layer = RowScaledInt8Linear.from_linear(linear)
    x = torch.randn(3, 5, 40)
    rows = x.reshape(-1, 40).double()
    row_scale = rows.abs().amax(dim=1, keepdim=True) / INT8_LIMIT
    weight = linear.weight.detach().double()
    weight_scale = weight.abs().amax(dim=1) / INT8_LIMIT
    quantized_rows, quantized_weight = torch.round(rows / row_scale), torch.round(weight / weight_scale[:, None])
    assert quantized_rows.abs().max() <= INT8_LIMIT and quantized_weight.abs().max() <= INT8_LIMIT
    expected = (quantized_rows @ quantized_weight.T) * row_scale * weight_scale
    if bias:
        expected = expected + linear.bias.detach().double()
    with torch.inference_mode():
        out = layer(x)
    assert out.shape == (3, 5, 24) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), expected.reshape(3, 5, 24), rtol=1e-5, atol=1e-5)
    # and it is near the float layer: int8 rounding, not another function
    assert (out - linear(x)).norm() < 0.02 * linear(x).norm()


def test_a_row_gives_the_same_output_whatever_rows_are_beside_it():
    """The reason for a scale per row: a batch-mate a thousand times larger (or all zero) leaves a row's
    output bit for bit as it is alone. With one scale for the batch, the large row would crush it."""
    layer = RowScaledInt8Linear.from_linear(_linear())
    row = torch.randn(1, 40)
    with torch.inference_mode():
        alone = layer(row)
        beside = layer(torch.cat([1000 * torch.randn(1, 40), row, torch.zeros(1, 40)]))
    assert torch.equal(beside[1:2], alone)
    assert torch.equal(beside[2], layer.bias)  # an all-zero row quantizes to zeros: the bias alone


def test_every_plain_linear_layer_is_replaced_and_nothing_else():
    class Subclassed(nn.Linear):  # may compute something else: left float, as quantize_dynamic leaves it
        pass

    model = nn.Sequential(_linear(), nn.ReLU(), Subclassed(24, 8), nn.Sequential(_linear(False, 8, 8)))
    quantize_linear_layers(model)
    assert isinstance(model[0], RowScaledInt8Linear) and isinstance(model[3][0], RowScaledInt8Linear)
    assert type(model[2]) is Subclassed
    assert model[0].weight_int8.dtype == torch.int8 and model[3][0].bias is None
    assert "in_features=40, out_features=24, bias=True" in repr(model[0])
