"""Capture corpus: torch functions, torch.nn.functional, tensor methods and attributes.

Each program is compiled with fullgraph and checked against eager; see harness.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.corpus.harness import case_registry, check, ints, pos, program_params, t


CASES, case = case_registry()


# ---- torch functions ---------------------------------------------------------------------------


@case(t(3), t(3), ops=2)
def torch_cat_stack(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y), 1)


@case(t(3), t(3), ops=2)
def torch_where(x, y):
    return torch.where(x > 0, x, y)


@case(t(3, 4), t(4, 2), ops=2)
def torch_matmul_einsum(x, y):
    return torch.matmul(x, y), torch.einsum("ij,jk->ik", x, y)


@case(t(3, 4), ops=3)
def torch_factories(x):
    return torch.zeros_like(x) + torch.ones(3, 4)


@case(t(3, 4), ops=2)
def torch_factory_from_metadata(x):
    z = torch.zeros(x.size(0), 2, dtype=x.dtype, device=x.device)
    return torch.cat([x, z], dim=1)


@case(t(3), ops=4)
def torch_arange_full(x):
    return (x + torch.arange(3)) * torch.full((3,), 2.0)


@case(t(3, 4), ops=2)
def torch_tensor_constant(x):
    return x * torch.tensor([1.0, 2.0, 3.0, 4.0])


@case(t(3, 4), ops=3)
def torch_clamp_reductions(x):
    return torch.clamp(x, min=-0.5, max=0.5), torch.mean(x, dim=0), torch.amax(x, 1)


@case(t(3, 4), t(3, 4), ops=2)
def torch_max_overloads(x, y):
    return torch.max(x), torch.max(x, y)


@case(t(3, 4), ops=3)
def torch_max_dim_returned(x):
    return torch.max(x, 1)


@case(t(2, 3, 4), t(2, 4, 5), ops=2)
def torch_flatten_bmm(x, y):
    return torch.flatten(torch.bmm(x, y), 1)


@case(t(3, 5), t(3, 4), t(4, 5), ops=1)
def torch_addmm_kwargs(b, x, y):
    return torch.addmm(b, x, y, beta=0.5, alpha=2.0)


@case(t(3, 4), ops=4)
def torch_var_mean(x):
    v, m = torch.var_mean(x, dim=1)
    return v + m


@case(t(3, 4), ops=3)
def torch_sort_descending(x):
    return torch.sort(x, dim=1, descending=True)


@case(t(3, 4), ops=2)
def torch_cumsum_softmax(x):
    return torch.cumsum(x, dim=1), torch.softmax(x, -1)


@case(t(3), ops=1)
def torch_constant_queries(x):
    if torch.is_grad_enabled():
        y = x * 2
    else:
        y = x
    return y, torch.get_default_dtype()


# ---- torch.nn.functional -----------------------------------------------------------------------


@case(t(3, 4), ops=2)
def functional_relu_gelu(x):
    return F.relu(x), F.gelu(x, approximate="tanh")


@case(t(3, 4), ops=2)
def functional_softmax_log_softmax(x):
    return F.softmax(x, -1), F.log_softmax(x, dim=1)


@case(t(2, 4), t(3, 4), t(3), ops=1)
def functional_linear(x, w, b):
    return F.linear(x, w, b)


@case(t(1, 2, 6, 6), t(3, 2, 3, 3), ops=1)
def functional_conv2d(x, w):
    return F.conv2d(x, w, padding=1)


@case(t(1, 2, 6, 6), ops=2)
def functional_pools(x):
    return F.max_pool2d(x, 2), F.avg_pool2d(x, kernel_size=3, stride=1)


@case(t(3, 4), ops=3)
def functional_norms_dropout(x):
    return F.layer_norm(x, (4,)), F.normalize(x, dim=-1), F.dropout(x, p=0.5, training=False)


@case(t(3, 4), ops=1)
def functional_pad(x):
    return F.pad(x, (1, 2), value=0.5)


@case(t(3, 5), ints(3, hi=5), ops=1)
def functional_cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


@case(t(3, 4), t(3, 4), ops=1)
def functional_mse(x, y):
    return F.mse_loss(x, y, reduction="sum")


@case(t(3, 4), ops=3)
def functional_silu_tanh(x):
    return F.silu(x) * torch.tanh(x)


@case(ints(2, 3, hi=10), t(10, 4), ops=1)
def functional_embedding(idx, w):
    return F.embedding(idx, w)


@case(t(1, 2, 4, 4), ops=1)
def functional_interpolate(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


@case(t(3, 4), ops=1)
def functional_leaky_relu_kw(x):
    return F.leaky_relu(x, negative_slope=0.2)


# ---- tensor methods and attributes --------------------------------------------------------------


@case(t(3, 4), ops=2)
def method_sum_mean(x):
    return x.sum(dim=1), x.mean()


@case(pos(3, 4), ops=4)
def method_chain(x):
    return x.sin().cos(), x.log().exp()


@case(t(3, 4), ops=3)
def method_view_reshape(x):
    return x.view(-1), x.reshape(2, 6), x.view(x.shape[1], x.shape[0])


@case(t(2, 3, 4), ops=3)
def method_permute_transpose_contiguous(x):
    return x.permute(2, 0, 1).transpose(0, 1).contiguous()


@case(t(3, 4), ops=2)
def attr_T(x):
    return x.T @ x


@case(t(2, 3, 4), ops=3)
def attr_mT_and_t(x):
    return x.mT, x[0].t()


@case(t(3, 4), ops=2)
def method_unsqueeze_squeeze(x):
    return x.unsqueeze(0).squeeze(0)


@case(t(1, 4), ops=2)
def method_expand_repeat(x):
    return x.expand(3, 4), x.repeat(2, 1)


@case(t(3, 4), ints(3, 4), ops=4)
def method_dtype_conversions(x, i):
    return x.double(), x.to(torch.float16), x.int(), x.type_as(i)


@case(t(3, 4), ops=3)
def method_clone_detach_new(x):
    return x.clone(), x.detach(), x.new_zeros(2, 2)


@case(t(3, 4), ops=2)
def method_masked_fill(x):
    return x.masked_fill(x < 0, 0.0)


@case(t(3, 4), ops=2)
def method_argmax_softmax(x):
    return x.argmax(dim=1), x.softmax(-1)


@case(t(3, 4), ops=4)
def method_sort_unpacked(x):
    v, i = x.sort(dim=-1)
    return v, i.float()


@case(t(3, 4), ops=4)
def method_max_named_fields(x):
    m = x.max(dim=1)
    return m.values + 1, m.indices


@case(t(3, 4), ops=3)
def method_min_values(x):
    return x.min(dim=0).values


@case(t(3, 4), ops=3)
def method_topk_returned(x):
    return x.topk(2, dim=-1)


@case(t(6, 2), ops=5)
def method_chunk_index(x):
    return x.chunk(3)[0] * 2


@case(t(6, 2), ops=4)
def method_split_returned(x):
    return x.split(2)


@case(t(4, 3), ops=3)
def torch_split_sizes(x):
    a, b = torch.split(x, [1, 3], dim=0)
    return b


@case(t(3, 4), ops=1)
def method_to_same_device_dtype(x):
    return x.to(x.device, x.dtype)


@case(t(3, 4), ops=2)
def method_view_star_shape(x):
    return x.view(*x.shape[:-1], 2, 2), x.flatten()


@case(t(3, 4), ops=1)
def method_new_ones_shape(x):
    return x.new_ones(x.shape)


@case(t(3, 4), ops=1)
def metadata_methods(x):
    n = x.numel()
    s = x.stride()
    c = x.is_contiguous()
    e = x.element_size()
    return x * n, s, c, e


@case(t(3, 4), ops=1)
def metadata_len_ndim(x):
    return x * len(x), x.ndim, x.dim(), x.size(1), x.shape[-1]


@case(t(3, 4), ops=1)
def inplace_method_add(x):
    x.add_(1)
    return x


@case(t(3, 4), t(3, 4), ops=2)
def inplace_method_chain(x, y):
    return x.mul_(2).add_(y)


@case(t(3, 4), ops=3)
def inplace_on_clone(x):
    y = x.clone()
    y.mul_(2)
    y[0] = 0.0
    return y


@case(t(5, 3), ints(2, hi=5), ops=2)
def setitem_tensor_index(x, idx):
    y = x.clone()
    y[idx] = -1.0
    return y


@case(t(3, 4), t(3, 4), ops=2)
def setitem_slice_on_input(x, y):
    x[:, 0] = y[:, 1]
    return x


@case(t(3, 4), t(3, 4), ops=3)
def inplace_relu_clamp_copy(x, y):
    torch.relu_(x)
    x.clamp_(max=0.5)
    y.copy_(x)
    return x, y


@case(t(3, 4), t(3, 4), ops=3)
def inplace_zero_fill(x, y):
    x.zero_()
    y.fill_(2.0)
    return x + y


@case(t(3, 4), ops=2)
def inplace_masked_fill(x):
    x.masked_fill_(x > 0, 0.0)
    return x


@case(t(3, 4), ops=2)
def inplace_through_view(x):
    v = x.view(-1)
    v.add_(1)
    return x


# ---------------------------------------------------------------------------------------------
# the parametrized differential test
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs, ops, graphs", program_params(CASES))
def test_program(fn, args, kwargs, ops, graphs):
    check(fn, *args, ops=ops, graphs=graphs, **kwargs)


# ---------------------------------------------------------------------------------------------
# dedicated tests: in-place methods return their input
# ---------------------------------------------------------------------------------------------


def test_inplace_returns_the_input_tensor():
    cnt, results = check(inplace_method_add, t(3, 4), ops=1)
    for got, cargs, _ in results:
        assert got is cargs[0]
