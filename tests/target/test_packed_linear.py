"""oneDNN-packed linears: same results as nn.Linear up to rounding, on any row count and shape."""

from __future__ import annotations

import pytest
import torch

from tevcore.target.packed_linear import PackedLinear, can_pack, cpu_has_native_bf16, fast_cpu_dtype, is_packed, pack_linears

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 48), (2, 48), (5, 48), (17, 48), (65, 48), (2, 7, 48)])
def test_packed_matches_linear(bias, shape):
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 96, bias=bias)
    x = torch.randn(*shape)
    packed = PackedLinear.from_linear(linear)
    with torch.inference_mode():
        got, want = packed(x), linear(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_packed_keeps_the_original_parameters_and_falls_back_for_gradients():
    linear = torch.nn.Linear(8, 4)
    packed = PackedLinear.from_linear(linear)
    assert packed.weight is linear.weight and packed.bias is linear.bias
    x = torch.randn(3, 8, requires_grad=True)
    packed(x).sum().backward()  # the packed kernel has no backward: the fallback must take it
    torch.testing.assert_close(x.grad, linear.weight.sum(0).expand(3, 8).detach())


def test_pack_linears_swaps_every_linear_of_a_model_and_keeps_its_outputs(tiny_target):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM(tiny_target.model.config).eval()
    model.load_state_dict(tiny_target.model.state_dict())
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    with torch.inference_mode():
        before = model(input_ids=ids).logits
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    assert pack_linears(model) == linears > 0
    assert is_packed(model) and not any(type(m) is torch.nn.Linear for m in model.modules())
    assert model.get_output_embeddings().weight.shape == (97, 64)  # the drafter reads the head rows
    with torch.inference_mode():
        after = model(input_ids=ids).logits
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)


def test_a_weight_changed_in_place_is_packed_again():
    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 96)
    packed = PackedLinear.from_linear(linear)
    x = torch.randn(3, 48)
    with torch.no_grad():
        linear.weight.mul_(-2.0)  # what an optimizer step does to the shared parameter
    with torch.inference_mode():
        got, want = packed(x), linear(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_only_float32_cpu_models_are_packed():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).double()
    assert not can_pack(model)
    assert pack_linears(model) == 0 and not is_packed(model)


def test_bfloat16_models_are_packed_exactly_where_the_cpu_runs_bfloat16_natively():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 96)).to(torch.bfloat16)
    x = torch.randn(5, 48, dtype=torch.bfloat16)
    with torch.inference_mode():
        want = model(x)
    assert fast_cpu_dtype() == (torch.bfloat16 if cpu_has_native_bf16() else torch.float32)
    assert can_pack(model) == cpu_has_native_bf16() == (pack_linears(model) == 1)
    with torch.inference_mode():
        got = model(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def test_the_default_target_is_loaded_packed(default_target):
    assert is_packed(default_target.model)
