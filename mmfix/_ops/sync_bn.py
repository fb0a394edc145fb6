"""mmcv's synchronised batch norm kernels: the five ``sync_bn_*`` functions.

``mmcv.ops.SyncBatchNorm`` (``MMSyncBN`` in configs) runs them from its autograd Function
and does the all-reduce between them itself, so each one is purely local arithmetic on a
(batch, channels, spatial) input. As in mmcv's CUDA kernels (compiled mmcv has no CPU
kernel): statistics, ``norm`` and ``std`` are float32 whatever the input's dtype (half input
is read as float32 and the output rounded back); the variance is the biased one around the
mean passed in (the synchronised mean); the running variance is updated with the unbiased
variance for ``count = batch · spatial · group_size`` elements; the backward divides by the
LOCAL element count (the caller has averaged grad_weight and grad_bias over the group).

Where the kernel has a branch for a missing ``weight``/``bias``, ``running_mean``/``running_var``
or ``norm``/``std`` (``nullptr``), None is accepted for them too.
"""

from __future__ import annotations

import torch

_STATS = torch.float32


def _check_3d(name: str, what: str, tensor: torch.Tensor) -> None:
    if tensor.dim() != 3:
        raise ValueError(
            f"{name}: `{what}` must be 3-D (batch, channels, spatial) as mmcv's SyncBatchNorm passes it "
            f"(input.flatten(2)), got shape {tuple(tensor.shape)}."
        )


def _check_per_channel(name: str, channels: int, **tensors: torch.Tensor | None) -> None:
    for what, tensor in tensors.items():
        if tensor is not None and tensor.shape != (channels,):
            raise ValueError(
                f"{name}: `{what}` must hold one value per channel ({channels},), got shape {tuple(tensor.shape)}."
            )


def _per_channel(tensor: torch.Tensor) -> torch.Tensor:
    """(channels,) → (1, channels, 1) in float32, to broadcast over a (batch, channels, spatial) input."""
    return tensor.to(_STATS).view(1, -1, 1)


def sync_bn_forward_mean(input: torch.Tensor, mean: torch.Tensor) -> None:
    """``mean[c]``: the mean of channel c over the batch and spatial positions of this process."""
    _check_3d("sync_bn_forward_mean", "input", input)
    _check_per_channel("sync_bn_forward_mean", input.size(1), mean=mean)
    mean.copy_(input.to(_STATS).mean(dim=(0, 2)))


def sync_bn_forward_var(input: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> None:
    """``var[c]``: the mean squared deviation of channel c from ``mean[c]`` (the group's mean)."""
    _check_3d("sync_bn_forward_var", "input", input)
    _check_per_channel("sync_bn_forward_var", input.size(1), mean=mean, var=var)
    var.copy_((input.to(_STATS) - _per_channel(mean)).square().mean(dim=(0, 2)))


def sync_bn_forward_output(
    input: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    norm: torch.Tensor | None,
    std: torch.Tensor | None,
    output: torch.Tensor,
    eps: float,
    momentum: float | torch.Tensor,
    group_size: int,
) -> None:
    """Normalises ``input`` into ``output`` (and ``norm``), writes ``std`` and updates the running statistics.

    ``momentum`` may be a one-element tensor: mmcv passes ``update_flag * momentum`` so that an
    all-empty batch leaves the running statistics alone.
    """
    name = "sync_bn_forward_output"
    _check_3d(name, "input", input)
    channels = input.size(1)
    _check_per_channel(
        name, channels, mean=mean, var=var, weight=weight, bias=bias, running_mean=running_mean,
        running_var=running_var, std=std,
    )  # fmt: skip
    for what, tensor in (("norm", norm), ("output", output)):
        if tensor is not None and tensor.shape != input.shape:
            raise ValueError(
                f"{name}: `{what}` must have the input's shape {tuple(input.shape)}, got {tuple(tensor.shape)}."
            )
    if (weight is None) != (bias is None) or (running_mean is None) != (running_var is None):
        raise ValueError(
            f"{name}: pass `weight` and `bias` both or neither, and `running_mean` and `running_var` both or neither."
        )

    mean32 = mean.to(_STATS)
    var32 = var.to(_STATS)
    std_value = torch.sqrt(var32 + float(eps))
    normalised = (input.to(_STATS) - mean32.view(1, -1, 1)) / std_value.view(1, -1, 1)
    if norm is not None:
        norm.copy_(normalised)
    if weight is not None and bias is not None:
        normalised = normalised * _per_channel(weight) + _per_channel(bias)
    output.copy_(normalised)
    if std is not None:
        std.copy_(std_value)
    if running_mean is not None and running_var is not None:
        if isinstance(momentum, torch.Tensor):
            momentum = momentum.to(device=mean32.device, dtype=_STATS)
        else:
            momentum = float(momentum)
        count = input.size(0) * input.size(2) * int(group_size)
        unbiased = var32 * count / (count - 1) if count > 1 else var32
        running_mean.copy_(momentum * mean32 + (1 - momentum) * running_mean.to(_STATS))
        running_var.copy_(momentum * unbiased + (1 - momentum) * running_var.to(_STATS))


def sync_bn_backward_param(
    grad_output: torch.Tensor, norm: torch.Tensor, grad_weight: torch.Tensor, grad_bias: torch.Tensor
) -> None:
    """``grad_weight[c]`` = Σ grad_output · norm and ``grad_bias[c]`` = Σ grad_output over this process's elements."""
    name = "sync_bn_backward_param"
    _check_3d(name, "grad_output", grad_output)
    _check_per_channel(name, grad_output.size(1), grad_weight=grad_weight, grad_bias=grad_bias)
    if norm.shape != grad_output.shape:
        raise ValueError(
            f"{name}: `norm` must have grad_output's shape {tuple(grad_output.shape)}, got {tuple(norm.shape)}."
        )
    grad = grad_output.to(_STATS)
    grad_weight.copy_((grad * norm.to(_STATS)).sum(dim=(0, 2)))
    grad_bias.copy_(grad.sum(dim=(0, 2)))


def sync_bn_backward_data(
    grad_output: torch.Tensor,
    weight: torch.Tensor,
    grad_weight: torch.Tensor,
    grad_bias: torch.Tensor,
    norm: torch.Tensor,
    std: torch.Tensor,
    grad_input: torch.Tensor,
) -> None:
    """``grad_input`` = weight · (grad_output - (grad_weight · norm + grad_bias) / n) / std, n the local count."""
    name = "sync_bn_backward_data"
    _check_3d(name, "grad_output", grad_output)
    _check_per_channel(name, grad_output.size(1), weight=weight, grad_weight=grad_weight, grad_bias=grad_bias, std=std)
    for what, tensor in (("norm", norm), ("grad_input", grad_input)):
        if tensor.shape != grad_output.shape:
            raise ValueError(
                f"{name}: `{what}` must have grad_output's shape {tuple(grad_output.shape)}, got {tuple(tensor.shape)}."
            )
    count = grad_output.size(0) * grad_output.size(2)
    correction = (_per_channel(grad_weight) * norm.to(_STATS) + _per_channel(grad_bias)) / count
    grad_input.copy_(_per_channel(weight) * (grad_output.to(_STATS) - correction) / _per_channel(std))
