"""mmcv's focal losses: ``sigmoid_focal_loss_*`` and ``softmax_focal_loss_*``.

MMDetection's ``FocalLoss`` (RetinaNet, FCOS, ATSS, …) calls the sigmoid one whenever the
logits are on CUDA; compiled mmcv has no CPU kernel for either. The arithmetic is that of
mmcv's CUDA kernels (``sigmoid_focal_loss_cuda_kernel.cuh``, ``softmax_focal_loss_cuda_kernel.cuh``),
which differs from MMDetection's pure-PyTorch ``py_sigmoid_focal_loss`` in two places users can
see, so both are kept:

* probabilities are ``1 / (1 + exp(-x))`` and every log is ``log(max(q, FLT_MIN))``: a
  saturated logit (|x| ≳ 17 in float32) costs at most ``-log(FLT_MIN) ≈ 87.3`` per element,
  where ``binary_cross_entropy_with_logits`` would give |x|;
* the optional per-class ``weight`` multiplies every element of a sample by the weight of
  that sample's TARGET class (``weight[target[n]]``), not of each column.

Half inputs are computed in float32 and rounded once at the end (the kernels round every
intermediate to half). Large inputs are processed in row chunks so the temporaries stay
bounded (RetinaNet: ~200k anchors × 80 classes per batch).
"""

from __future__ import annotations

from typing import Callable

import torch

#: The kernels clamp probabilities to FLT_MIN before taking logs (float32's smallest normal).
FLT_MIN = torch.finfo(torch.float32).tiny
#: Elements per chunk of rows: bounds the float temporaries at a few times 16 MiB.
_CHUNK_ELEMENTS = 1 << 22


def _compute_dtype(tensor: torch.Tensor) -> torch.dtype:
    return tensor.dtype if tensor.dtype in (torch.float32, torch.float64) else torch.float32


def _check(
    name: str,
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    outputs: dict[str, tuple[torch.Tensor, tuple[int, ...]]],
) -> None:
    if input.dim() != 2:
        raise ValueError(f"{name}: `input` must be 2-D (samples, classes), got shape {tuple(input.shape)}.")
    if target.dtype != torch.long or target.dim() != 1 or target.size(0) != input.size(0):
        raise ValueError(
            f"{name}: `target` must be a 1-D int64 tensor with one class index per row of `input` "
            f"({input.size(0)} rows), got {target.dtype} of shape {tuple(target.shape)}."
        )
    if weight.numel() and (weight.dim() != 1 or weight.size(0) != input.size(1)):
        raise ValueError(
            f"{name}: `weight` must be empty or hold one weight per class ({input.size(1)}), "
            f"got shape {tuple(weight.shape)}."
        )
    for what, (output, shape) in outputs.items():
        if tuple(output.shape) != shape:
            raise ValueError(f"{name}: `{what}` must have shape {shape}, got {tuple(output.shape)}.")


def _check_labels(name: str, target: torch.Tensor, num_classes: int, *, weighted: bool, softmax: bool) -> None:
    """The labels the kernels can index: mmcv asserts ``target <= num_classes``; the rest read out of bounds."""
    if target.numel() == 0:
        return
    # One synchronisation, as mmcv's CUDA launcher makes for its own assertion.
    low, high = torch.aminmax(target)
    low_value, high_value = int(low), int(high)
    # The sigmoid loss takes label `num_classes` (and any negative label) as "background": no
    # column is positive. The softmax loss ignores negative labels (whatever their weight);
    # `num_classes` would read the next sample's probabilities. A per-class weight is looked up
    # by label, so the sigmoid loss then needs 0 ≤ label < num_classes.
    limit = num_classes - 1 if softmax or weighted else num_classes
    if high_value > limit or (weighted and not softmax and low_value < 0):
        wanted = f"0 … {limit}" if weighted else f"at most {limit}"
        why = (
            " (a per-class `weight` is looked up by each sample's label)"
            if weighted
            else " (the softmax loss has no background label)"
            if softmax
            else " (label num_classes means background)"
        )
        raise ValueError(
            f"{name}: target labels must be {wanted} for {num_classes} classes{why}; got labels from "
            f"{low_value} to {high_value}. Check the number of classes of the head against the data set's labels."
        )


def _row_step(columns: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(1, columns))


def _chunked(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    out: torch.Tensor,
    compute: Callable[..., torch.Tensor],
) -> None:
    """``out[rows] = compute(x, t, is_target) * weight[t]`` chunk by chunk of rows."""
    n, num_classes = input.shape
    dtype = _compute_dtype(input)
    classes = torch.arange(num_classes, device=input.device)
    step = _row_step(num_classes)
    for start in range(0, n, step):
        x = input[start : start + step].to(dtype)
        t = target[start : start + step]
        value = compute(x, t, t.unsqueeze(1) == classes)
        if weight.numel():
            value = value * weight.to(dtype)[t].unsqueeze(1)
        out[start : start + step].copy_(value)


def _log_clamped(q: torch.Tensor) -> torch.Tensor:
    return q.clamp_min(FLT_MIN).log()


def sigmoid_focal_loss_forward(
    input: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, output: torch.Tensor, gamma: float, alpha: float
) -> None:
    """``output[n, c]``: -α (1-p)^γ log p where c is the target, -(1-α) p^γ log(1-p) elsewhere."""
    name = "sigmoid_focal_loss_forward"
    _check(name, input, target, weight, {"output": (output, tuple(input.shape))})
    _check_labels(name, target, input.size(1), weighted=bool(weight.numel()), softmax=False)
    gamma, alpha = float(gamma), float(alpha)

    def loss(x: torch.Tensor, t: torch.Tensor, is_target: torch.Tensor) -> torch.Tensor:
        p = 1.0 / (1.0 + torch.exp(-x))
        term_p = (1.0 - p).pow(gamma) * _log_clamped(p)
        term_n = p.pow(gamma) * _log_clamped(1.0 - p)
        return torch.where(is_target, -alpha * term_p, -(1.0 - alpha) * term_n)

    _chunked(input, target, weight, output, loss)


def sigmoid_focal_loss_backward(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    grad_input: torch.Tensor,
    gamma: float,
    alpha: float,
) -> None:
    """``grad_input``: the derivative of the forward loss with respect to the logits (the kernel's closed form)."""
    name = "sigmoid_focal_loss_backward"
    _check(name, input, target, weight, {"grad_input": (grad_input, tuple(input.shape))})
    _check_labels(name, target, input.size(1), weighted=bool(weight.numel()), softmax=False)
    gamma, alpha = float(gamma), float(alpha)

    def grad(x: torch.Tensor, t: torch.Tensor, is_target: torch.Tensor) -> torch.Tensor:
        p = 1.0 / (1.0 + torch.exp(-x))
        # (1 - p)^γ (1 - p - γ p log p)   and   p^γ (γ (1 - p) log(1 - p) - p)
        term_p = (1.0 - p).pow(gamma) * ((1.0 - p) - gamma * p * _log_clamped(p))
        term_n = p.pow(gamma) * (gamma * (1.0 - p) * _log_clamped(1.0 - p) - p)
        return torch.where(is_target, -alpha * term_p, -(1.0 - alpha) * term_n)

    _chunked(input, target, weight, grad_input, grad)


def _target_probability(softmax: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's probability of its label, and which rows count (negative labels are ignored)."""
    counted = target >= 0
    pred = softmax.gather(1, target.clamp_min(0).unsqueeze(1)).squeeze(1).to(_compute_dtype(softmax))
    return pred, counted


def _label_weight(weight: torch.Tensor, target: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    return weight.to(dtype)[target.clamp_min(0)] if weight.numel() else None


def softmax_focal_loss_forward(
    input: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, output: torch.Tensor, gamma: float, alpha: float
) -> None:
    """``output[n]`` = -α (1-p)^γ log p with p the softmax probability of the label (``input`` holds the softmax)."""
    name = "softmax_focal_loss_forward"
    _check(name, input, target, weight, {"output": (output, (input.size(0),))})
    _check_labels(name, target, input.size(1), weighted=bool(weight.numel()), softmax=True)
    gamma, alpha = float(gamma), float(alpha)
    pred, counted = _target_probability(input, target)
    loss = -alpha * (1.0 - pred).pow(gamma) * _log_clamped(pred)
    label_weight = _label_weight(weight, target, pred.dtype)
    if label_weight is not None:
        loss = loss * label_weight
    output.copy_(torch.where(counted, loss, torch.zeros_like(loss)))


def softmax_focal_loss_backward(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    buff: torch.Tensor,
    grad_input: torch.Tensor,
    gamma: float,
    alpha: float,
) -> None:
    """``buff[n]``: dloss/dp of the label; ``grad_input[n, c]`` = buff[n] · ([c = label] - softmax[n, c])."""
    name = "softmax_focal_loss_backward"
    shapes = {"buff": (buff, (input.size(0),)), "grad_input": (grad_input, tuple(input.shape))}
    _check(name, input, target, weight, shapes)
    _check_labels(name, target, input.size(1), weighted=bool(weight.numel()), softmax=True)
    gamma, alpha = float(gamma), float(alpha)
    pred, counted = _target_probability(input, target)
    # α (-(1-p)^γ + γ (1-p)^(γ-1) p log p), in the kernel's order of operations.
    scale = alpha * (-(1.0 - pred).pow(gamma) + gamma * (1.0 - pred).pow(gamma - 1.0) * pred * _log_clamped(pred))
    label_weight = _label_weight(weight, target, pred.dtype)
    if label_weight is not None:
        scale = scale * label_weight
    scale = torch.where(counted, scale, torch.zeros_like(scale))
    buff.copy_(scale)

    n, num_classes = input.shape
    classes = torch.arange(num_classes, device=input.device)
    step = _row_step(num_classes)
    for start in range(0, n, step):
        rows = slice(start, start + step)
        probabilities = input[rows].to(pred.dtype)
        is_target = (target[rows].unsqueeze(1) == classes).to(pred.dtype)
        grad = scale[rows].unsqueeze(1) * (is_target - probabilities)
        grad_input[rows].copy_(torch.where(counted[rows].unsqueeze(1), grad, torch.zeros_like(grad)))
