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

from typing import Callable, NamedTuple

import torch

#: The kernels clamp probabilities to FLT_MIN before taking logs (float32's smallest normal).
FLT_MIN = torch.finfo(torch.float32).tiny
#: Elements per chunk of rows: bounds the float temporaries at a few times 4 MiB.
_CHUNK_ELEMENTS = 1 << 20


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


class _Rows(NamedTuple):
    """One chunk of rows of a sigmoid focal loss, in the kernels' terms."""

    right: torch.Tensor  # s: p where the column is the target, 1 - p elsewhere
    wrong: torch.Tensor  # 1 - s, computed as the kernel does (1 - p, or p itself): not rounded twice
    log_right: torch.Tensor  # log(max(s, FLT_MIN))
    is_target: torch.Tensor


def _sigmoid_rows(x: torch.Tensor, t: torch.Tensor, classes: torch.Tensor) -> _Rows:
    # Both kernels: p = 1 / (1 + exp(-x)); the target column uses (p, 1 - p), the others (1 - p, p).
    p = x.neg().exp_().add_(1).reciprocal_()
    q = torch.rsub(p, 1)
    is_target = t.unsqueeze(1) == classes
    right = torch.where(is_target, p, q)
    wrong = torch.where(is_target, q, p)
    return _Rows(right, wrong, right.clamp_min(FLT_MIN).log_(), is_target)


def _per_column(rows: _Rows, at_target: float, elsewhere: float) -> torch.Tensor:
    return torch.where(rows.is_target, rows.right.new_tensor(at_target), rows.right.new_tensor(elsewhere))


def _sigmoid_chunks(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor,
    out: torch.Tensor,
    compute: Callable[[_Rows], torch.Tensor],
) -> None:
    """``out[rows] = compute(rows) * weight[t]``, chunk by chunk of rows."""
    n, num_classes = input.shape
    dtype = _compute_dtype(input)
    classes = torch.arange(num_classes, device=input.device)
    label_weight = weight.to(dtype) if weight.numel() else None
    step = _row_step(num_classes)
    for start in range(0, n, step):
        rows = slice(start, start + step)
        value = compute(_sigmoid_rows(input[rows].to(dtype), target[rows], classes))
        if label_weight is not None:
            value = value.mul_(label_weight[target[rows]].unsqueeze(1))
        out[rows].copy_(value)


def sigmoid_focal_loss_forward(
    input: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, output: torch.Tensor, gamma: float, alpha: float
) -> None:
    """``output[n, c]``: -α (1-p)^γ log p where c is the target, -(1-α) p^γ log(1-p) elsewhere."""
    name = "sigmoid_focal_loss_forward"
    _check(name, input, target, weight, {"output": (output, tuple(input.shape))})
    _check_labels(name, target, input.size(1), weighted=bool(weight.numel()), softmax=False)
    gamma, alpha = float(gamma), float(alpha)

    def loss(rows: _Rows) -> torch.Tensor:
        # The kernel's term_p = (1-p)^γ log p and term_n = p^γ log(1-p) are both (1-s)^γ log s.
        return rows.wrong.pow(gamma).mul_(rows.log_right).mul_(_per_column(rows, -alpha, -(1.0 - alpha)))

    _sigmoid_chunks(input, target, weight, output, loss)


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
    if weight.numel():  # unweighted, every label is fine here (mmcv checks them in the forward only)
        _check_labels(name, target, input.size(1), weighted=True, softmax=False)
    gamma, alpha = float(gamma), float(alpha)

    def grad(rows: _Rows) -> torch.Tensor:
        # term_p = (1-p)^γ ((1-p) - γ p log p) = (1-s)^γ ((1-s) - γ s log s) at the target;
        # term_n = p^γ (γ (1-p) log(1-p) - p) is the negation of the same with s = 1 - p. Negating
        # an IEEE difference is exact, so -α·term_p and -(1-α)·term_n are one formula times -α or 1-α.
        bracket = (rows.right * gamma).mul_(rows.log_right).neg_().add_(rows.wrong)
        return rows.wrong.pow(gamma).mul_(bracket).mul_(_per_column(rows, -alpha, 1.0 - alpha))

    _sigmoid_chunks(input, target, weight, grad_input, grad)


def _log_clamped(q: torch.Tensor) -> torch.Tensor:
    return q.clamp_min(FLT_MIN).log()


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
