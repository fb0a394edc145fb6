"""The sync_bn_* kernels: torch's batch norm arithmetic, single-process and in a real 2-process gloo group.

Compiled mmcv has no CPU kernel for them. mmcv.ops.SyncBatchNorm all-reduces the per-process
mean, variance and parameter gradients between the kernel calls, so with equal batches per
process the result must equal batch norm over the concatenated batch (torch.nn.SyncBatchNorm's
semantics; it has no CPU implementation itself), with the parameter gradients averaged over
the group, which is what DDP then keeps.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from conftest import clean_env
from ops_support import import_mmcv_ops, swap_ext


def _batch(shape, seed, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype) * 3 + 1.5


# --- the five functions against the batch-norm formulas -----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("group_size", [1, 4])
def test_kernels_compute_batch_norm(mmfix_ext, dtype, group_size):
    x = _batch((6, 5, 7), seed=group_size).to(dtype)
    x32 = x.float()
    weight, bias = torch.rand(5) + 0.5, torch.randn(5)
    mean, var = torch.zeros(5), torch.zeros(5)
    mmfix_ext.sync_bn_forward_mean(x, mean)
    torch.testing.assert_close(mean, x32.mean(dim=(0, 2)))
    # The variance is taken around the mean it is given (the group's), not the local one.
    shifted = mean + 0.25
    mmfix_ext.sync_bn_forward_var(x, shifted, var)
    torch.testing.assert_close(var, ((x32 - shifted.view(1, -1, 1)) ** 2).mean(dim=(0, 2)))
    mmfix_ext.sync_bn_forward_var(x, mean, var)
    torch.testing.assert_close(var, x32.var(dim=(0, 2), unbiased=False))

    running_mean, running_var = torch.randn(5), torch.rand(5) + 0.5
    norm, std, output = torch.zeros(x.shape), torch.zeros(5), torch.zeros_like(x)
    old_mean, old_var = running_mean.clone(), running_var.clone()
    mmfix_ext.sync_bn_forward_output(x, mean, var, weight, bias, running_mean, running_var, norm, std, output,
                                     eps=1e-5, momentum=0.1, group_size=group_size)  # fmt: skip
    expected_norm = (x32 - mean.view(1, -1, 1)) / torch.sqrt(var + 1e-5).view(1, -1, 1)
    torch.testing.assert_close(norm, expected_norm)
    torch.testing.assert_close(std, torch.sqrt(var + 1e-5))
    assert output.dtype == dtype
    torch.testing.assert_close(output, (expected_norm * weight.view(1, -1, 1) + bias.view(1, -1, 1)).to(dtype))
    count = 6 * 7 * group_size  # the running variance is unbiased for the whole group's count
    torch.testing.assert_close(running_mean, 0.9 * old_mean + 0.1 * mean)
    torch.testing.assert_close(running_var, 0.9 * old_var + 0.1 * var * count / (count - 1))

    grad_output = _batch(x.shape, seed=7).to(dtype)
    grad_weight, grad_bias = torch.zeros(5), torch.zeros(5)
    mmfix_ext.sync_bn_backward_param(grad_output, norm, grad_weight, grad_bias)
    torch.testing.assert_close(grad_weight, (grad_output.float() * norm).sum(dim=(0, 2)))
    torch.testing.assert_close(grad_bias, grad_output.float().sum(dim=(0, 2)))
    grad_input = torch.zeros_like(x)
    mmfix_ext.sync_bn_backward_data(grad_output, weight, grad_weight, grad_bias, norm, std, grad_input)
    # With group_size 1 this is autograd's gradient of batch norm.
    leaf = x32.clone().requires_grad_()
    F.batch_norm(leaf, None, None, weight, bias, training=True, eps=1e-5).backward(grad_output.float())
    tolerance = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else {}
    torch.testing.assert_close(grad_input.float(), leaf.grad, **tolerance)


def test_momentum_tensor_and_missing_optional_tensors(mmfix_ext):
    """mmcv passes momentum as a 0-d tensor (0 when every process's batch was empty); the kernel
    has branches for absent weight/bias, running statistics and norm/std."""
    x = _batch((3, 4, 5), seed=1)
    mean, var = x.mean(dim=(0, 2)), x.var(dim=(0, 2), unbiased=False)
    running_mean, running_var = torch.randn(4), torch.rand(4)
    before = running_mean.clone(), running_var.clone()
    output = torch.zeros_like(x)
    mmfix_ext.sync_bn_forward_output(x, mean, var, None, None, running_mean, running_var, None, None, output,
                                     eps=1e-5, momentum=torch.tensor(0.0), group_size=1)  # fmt: skip
    assert torch.equal(running_mean, before[0]) and torch.equal(running_var, before[1])
    torch.testing.assert_close(output, F.batch_norm(x, None, None, training=True, eps=1e-5))
    mmfix_ext.sync_bn_forward_output(x, mean, var, None, None, None, None, None, None, output,
                                     eps=1e-5, momentum=0.1, group_size=1)  # fmt: skip


def test_bad_shapes_are_named(mmfix_ext):
    with pytest.raises(ValueError, match=r"must be 3-D \(batch, channels, spatial\)"):
        mmfix_ext.sync_bn_forward_mean(torch.zeros(2, 3, 4, 4), torch.zeros(3))
    with pytest.raises(ValueError, match="`mean` must hold one value per channel"):
        mmfix_ext.sync_bn_forward_mean(torch.zeros(2, 3, 4), torch.zeros(4))
    with pytest.raises(ValueError, match="`norm` must have"):
        mmfix_ext.sync_bn_backward_param(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5), torch.zeros(3), torch.zeros(3))


# --- mmcv's SyncBatchNormFunction, one process -------------------------------------------------------


@pytest.mark.parametrize("stats_mode", ["default", "N"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mmcv_function_is_batch_norm_in_one_process(mmfix_ext, stats_mode, dtype):
    import_mmcv_ops(mmfix_ext)
    from mmcv.ops.sync_bn import SyncBatchNormFunction

    x = _batch((4, 6, 5, 3), seed=3).to(dtype)
    weight = (torch.rand(6) + 0.5).requires_grad_()
    bias = torch.randn(6).requires_grad_()
    grad_output = _batch(x.shape, seed=4).to(dtype)
    running = torch.randn(6), torch.rand(6) + 0.5
    expected_running = running[0].clone(), running[1].clone()

    leaf = x.float().requires_grad_()
    expected = F.batch_norm(leaf, *expected_running, weight, bias, training=True, momentum=0.1, eps=1e-5)
    expected_grads = torch.autograd.grad(expected, (leaf, weight, bias), grad_output.float())

    mine = x.clone().requires_grad_()
    with swap_ext(mmfix_ext):
        output = SyncBatchNormFunction.apply(mine, *running, weight, bias, 0.1, 1e-5, None, 1, stats_mode)
        grads = torch.autograd.grad(output, (mine, weight, bias), grad_output)
    tolerance = dict(rtol=2e-2, atol=2e-2) if dtype == torch.float16 else {}
    assert output.dtype == dtype
    torch.testing.assert_close(output.float(), expected, **tolerance)
    torch.testing.assert_close(running[0], expected_running[0])
    torch.testing.assert_close(running[1], expected_running[1])
    for actual, wanted in zip(grads, expected_grads):
        torch.testing.assert_close(actual.float(), wanted, **tolerance)


# --- mmcv.ops.SyncBatchNorm in a real 2-process gloo group ----------------------------------------

_WORKER = r"""
import sys
import torch
import torch.distributed as dist

rank, store, result = int(sys.argv[1]), sys.argv[2], sys.argv[3]
scenarios = [(mode, [int(s) for s in sizes.split(",")]) for mode, sizes in (a.split(":") for a in sys.argv[4:])]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)

from mmfix._ops import _ext

sys.modules["mmcv._ext"] = _ext.build()  # mmfix's kernels, whatever mmcv is installed
import mmcv.ops

results = []
for mode, sizes in scenarios:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(sum(sizes), 5, 4, 3, generator=generator) * 2 + 1
    grad = torch.randn(x.shape, generator=generator)
    first = sum(sizes[:rank])
    rows = slice(first, first + sizes[rank])
    torch.manual_seed(1)  # the same parameters on both ranks (mmcv initialises the weight uniformly)
    bn = mmcv.ops.SyncBatchNorm(5, stats_mode=mode)
    assert bn.group_size == 2
    mine = x[rows].clone().requires_grad_()
    output = bn(mine)
    output.backward(grad[rows])
    results.append({"output": output.detach(), "x_grad": mine.grad, "weight": bn.weight.detach(),
                    "bias": bn.bias.detach(), "weight_grad": bn.weight.grad, "bias_grad": bn.bias.grad,
                    "running_mean": bn.running_mean, "running_var": bn.running_var, "x": x, "grad": grad})
torch.save(results, result)
dist.destroy_process_group()
"""

#: (stats_mode, batch of rank 0, batch of rank 1), all run by one pair of processes.
SCENARIOS = [("default", 3, 3), ("N", 3, 3), ("N", 4, 0)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> dict[tuple[str, int, int], list[dict]]:
    """Each scenario's results on rank 0 and rank 1 of a real 2-process gloo group."""
    folder = tmp_path_factory.mktemp("sync-bn")
    store = folder / "store"
    files = [folder / f"rank{rank}.pt" for rank in range(2)]
    arguments = [f"{mode}:{a},{b}" for mode, a, b in SCENARIOS]
    env = clean_env(MMFIX_DISABLE="1", OMP_NUM_THREADS="1")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(rank), str(store), str(files[rank]), *arguments],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        outputs = [worker.communicate(timeout=300)[0] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    for rank, worker in enumerate(workers):
        assert worker.returncode == 0, f"rank {rank} exited {worker.returncode}:\n{outputs[rank]}"
    per_rank = [torch.load(path, weights_only=True) for path in files]
    return {scenario: [per_rank[0][i], per_rank[1][i]] for i, scenario in enumerate(SCENARIOS)}


@pytest.mark.slow
@pytest.mark.parametrize("stats_mode", ["default", "N"])
def test_two_processes_equal_batch_norm_of_the_whole_batch(two_ranks, stats_mode):
    ranks = two_ranks[stats_mode, 3, 3]
    x, grad = ranks[0]["x"], ranks[0]["grad"]
    weight = ranks[0]["weight"].clone().requires_grad_()
    bias = ranks[0]["bias"].clone().requires_grad_()
    running_mean, running_var = torch.zeros(5), torch.ones(5)
    leaf = x.clone().requires_grad_()
    expected = F.batch_norm(leaf, running_mean, running_var, weight, bias, training=True, momentum=0.1, eps=1e-5)
    expected.backward(grad)
    for rank, result in enumerate(ranks):
        rows = slice(3 * rank, 3 * rank + 3)
        torch.testing.assert_close(result["output"], expected[rows].detach())
        torch.testing.assert_close(result["x_grad"], leaf.grad[rows])
        # mmcv averages the parameter gradients over the group (DDP then keeps that average).
        torch.testing.assert_close(result["weight_grad"], weight.grad / 2)
        torch.testing.assert_close(result["bias_grad"], bias.grad / 2)
        torch.testing.assert_close(result["running_mean"], running_mean)
        torch.testing.assert_close(result["running_var"], running_var)


@pytest.mark.slow
def test_two_processes_with_an_empty_rank(two_ranks):
    """stats_mode 'N' (what MMDetection's configs pick for heads that may see no RoIs): the
    statistics are those of the only non-empty batch, and the empty rank still takes part."""
    ranks = two_ranks["N", 4, 0]
    x = ranks[0]["x"]
    expected = F.batch_norm(x, None, None, ranks[0]["weight"], ranks[0]["bias"], training=True, eps=1e-5)
    torch.testing.assert_close(ranks[0]["output"], expected)
    assert ranks[1]["output"].shape == (0, 5, 4, 3)
    torch.testing.assert_close(ranks[0]["running_mean"], ranks[1]["running_mean"])
    torch.testing.assert_close(ranks[0]["weight_grad"], ranks[1]["weight_grad"])
