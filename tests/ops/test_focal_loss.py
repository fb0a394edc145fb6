"""sigmoid/softmax focal loss kernels against the CUDA kernels' definition and MMDetection's PyTorch focal loss.

Compiled mmcv has no CPU kernel for these (``implementation for device cpu not found``), so the
references are (a) the CUDA kernels' per-element arithmetic written out with numpy scalars of the
kernel's precision (float32 for float, including the saturation at -log(FLT_MIN)), and (b)
MMDetection's own ``py_sigmoid_focal_loss`` / autograd of a plain PyTorch softmax focal loss.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_support import import_mmcv_ops, swap_ext

FLT_MIN = np.float32(np.finfo(np.float32).tiny)


# --- the CUDA kernels, element by element -----------------------------------------------------


def _np_dtype(dtype: torch.dtype) -> type:
    return np.float32 if dtype == torch.float32 else np.float64


def _reference_sigmoid(x: torch.Tensor, target: torch.Tensor, weight, gamma: float, alpha: float, backward: bool):
    """sigmoid_focal_loss_{forward,backward}_cuda_kernel, one element at a time."""
    T = _np_dtype(x.dtype)
    one, g, a, floor = T(1), T(gamma), T(alpha), T(FLT_MIN)
    out = np.zeros(tuple(x.shape), dtype=T)
    xs = x.numpy().astype(T)
    with np.errstate(over="ignore"):  # exp(120) is inf in float32: p = 0, as on the GPU
        _reference_sigmoid_rows(xs, target, weight, backward, out, one, g, a, floor)
    return torch.from_numpy(out)


def _reference_sigmoid_rows(xs, target, weight, backward, out, one, g, a, floor) -> None:
    T = type(one)
    for n in range(xs.shape[0]):
        t = int(target[n])
        for c in range(xs.shape[1]):
            p = one / (one + np.exp(-xs[n, c]))
            if backward:
                term_p = np.power(one - p, g) * (one - p - (g * p * np.log(max(p, floor))))
                term_n = np.power(p, g) * (g * (one - p) * np.log(max(one - p, floor)) - p)
            else:
                term_p = np.power(one - p, g) * np.log(max(p, floor))
                term_n = np.power(p, g) * np.log(max(one - p, floor))
            value = -a * term_p if t == c else -(one - a) * term_n
            if weight is not None:
                value *= T(weight[t])
            out[n, c] = value


def _reference_softmax(softmax: torch.Tensor, target: torch.Tensor, weight, gamma: float, alpha: float):
    """softmax_focal_loss forward kernel and the two backward kernels: (loss, buff, grad_input)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # (1 - 1)^(0 - 1): inf, as on the GPU
        return _reference_softmax_rows(softmax, target, weight, gamma, alpha)


def _reference_softmax_rows(softmax: torch.Tensor, target: torch.Tensor, weight, gamma: float, alpha: float):
    T = _np_dtype(softmax.dtype)
    one, g, a, floor = T(1), T(gamma), T(alpha), T(FLT_MIN)
    probabilities = softmax.numpy().astype(T)
    n_rows, n_classes = probabilities.shape
    loss = np.zeros(n_rows, dtype=T)
    buff = np.zeros(n_rows, dtype=T)
    grad = np.zeros((n_rows, n_classes), dtype=T)
    for n in range(n_rows):
        label = int(target[n])
        if label < 0:
            continue
        pred = probabilities[n, label]
        loss[n] = -a * np.power(one - pred, g) * np.log(max(pred, floor))
        buff[n] = a * (-np.power(one - pred, g) + g * np.power(one - pred, g - one) * pred * np.log(max(pred, floor)))
        if weight is not None:
            loss[n] *= T(weight[label])
            buff[n] *= T(weight[label])
        for c in range(n_classes):
            grad[n, c] = buff[n] * ((one if c == label else T(0)) - probabilities[n, c])
    return torch.from_numpy(loss), torch.from_numpy(buff), torch.from_numpy(grad)


def _logits(n: int, c: int, dtype: torch.dtype, seed: int, saturated: bool = True) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=generator, dtype=dtype) * 4
    if saturated:  # logits where p rounds to 0 or 1: the kernel's FLT_MIN clamp decides the loss
        flat = x.view(-1)
        picks = torch.randperm(flat.numel(), generator=generator)[: max(1, flat.numel() // 8)]
        flat[picks] = torch.tensor([-120.0, -30.0, 18.0, 40.0, 100.0], dtype=dtype).repeat(len(picks))[: len(picks)]
    return x


CASES = [
    # (rows, classes, gamma, alpha, weighted)
    (37, 5, 2.0, 0.25, False),
    (20, 1, 2.0, 0.25, False),
    (16, 9, 0.0, 0.5, False),
    (25, 4, 0.5, 0.75, True),
    (30, 7, 3.7, 0.1, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("rows", "classes", "gamma", "alpha", "weighted"), CASES)
def test_sigmoid_matches_the_cuda_kernel(mmfix_ext, dtype, rows, classes, gamma, alpha, weighted):
    x = _logits(rows, classes, dtype, seed=rows * classes)
    generator = torch.Generator().manual_seed(rows)
    # Label `classes` is background (no positive column) unless a weight is looked up by label.
    target = torch.randint(0, classes if weighted else classes + 1, (rows,), generator=generator)
    weight = torch.rand(classes, generator=generator, dtype=dtype) + 0.5 if weighted else None
    empty = x.new_empty(0)
    output = torch.full_like(x, float("nan"))
    mmfix_ext.sigmoid_focal_loss_forward(x, target, weight if weighted else empty, output, gamma=gamma, alpha=alpha)
    expected = _reference_sigmoid(x, target, weight, gamma, alpha, backward=False)
    torch.testing.assert_close(output, expected, rtol=1e-5, atol=1e-6)
    grad = torch.full_like(x, float("nan"))
    mmfix_ext.sigmoid_focal_loss_backward(x, target, weight if weighted else empty, grad, gamma=gamma, alpha=alpha)
    expected = _reference_sigmoid(x, target, weight, gamma, alpha, backward=True)
    torch.testing.assert_close(grad, expected, rtol=1e-5, atol=1e-6)


def test_sigmoid_saturates_as_the_kernel_does(mmfix_ext):
    """A confident wrong logit costs -log(FLT_MIN) ≈ 87.3, not |x| as binary cross-entropy would say."""
    x = torch.tensor([[100.0, -100.0]])
    output = torch.zeros_like(x)
    mmfix_ext.sigmoid_focal_loss_forward(x, torch.tensor([1]), x.new_empty(0), output, gamma=2.0, alpha=0.25)
    bound = -float(np.log(FLT_MIN))
    torch.testing.assert_close(output, torch.tensor([[0.75 * bound, 0.25 * bound]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("rows", "classes", "gamma", "alpha", "weighted"), CASES)
def test_softmax_matches_the_cuda_kernel(mmfix_ext, dtype, rows, classes, gamma, alpha, weighted):
    generator = torch.Generator().manual_seed(rows + classes)
    logits = torch.randn(rows, classes, generator=generator, dtype=dtype) * 3
    logits[0] = torch.tensor([60.0] + [0.0] * (classes - 1), dtype=dtype)  # a probability of exactly 1
    softmax = logits.softmax(1)
    target = torch.randint(-1, classes, (rows,), generator=generator)  # -1: ignored
    target[0] = 0
    weight = torch.rand(classes, generator=generator, dtype=dtype) + 0.5 if weighted else None
    empty = softmax.new_empty(0)
    loss = torch.full((rows,), float("nan"), dtype=dtype)
    buff = torch.full((rows,), float("nan"), dtype=dtype)
    grad = torch.full_like(softmax, float("nan"))
    mmfix_ext.softmax_focal_loss_forward(softmax, target, weight if weighted else empty, loss, gamma=gamma, alpha=alpha)
    mmfix_ext.softmax_focal_loss_backward(
        softmax, target, weight if weighted else empty, buff, grad, gamma=gamma, alpha=alpha
    )
    expected_loss, expected_buff, expected_grad = _reference_softmax(softmax, target, weight, gamma, alpha)
    # gamma 0 with a probability of 1: the kernel's 0 · (1-p)^-1 is NaN, and so is ours.
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(buff, expected_buff, rtol=1e-5, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6, equal_nan=True)


# --- MMDetection's and mmcv's own code ------------------------------------------------------------


@pytest.mark.parametrize(("gamma", "alpha"), [(2.0, 0.25), (1.5, 0.5), (0.0, 0.25)])
def test_sigmoid_matches_mmdet_py_sigmoid_focal_loss(mmfix_ext, gamma, alpha):
    """MMDetection's FocalLoss on CUDA (mmdet's sigmoid_focal_loss → mmcv's op) == its CPU formula."""
    import_mmcv_ops(mmfix_ext)
    from mmdet.models.losses.focal_loss import py_sigmoid_focal_loss, sigmoid_focal_loss

    torch.manual_seed(3)
    rows, classes = 200, 80
    pred = (torch.randn(rows, classes, dtype=torch.float64) * 3).requires_grad_()
    target = torch.randint(0, classes + 1, (rows,))  # classes = background
    anchor_weight = torch.rand(rows, dtype=torch.float64)
    one_hot = F.one_hot(target, classes + 1)[:, :classes]

    expected = py_sigmoid_focal_loss(pred, one_hot, anchor_weight, gamma, alpha, "mean", avg_factor=37.0)
    (expected_grad,) = torch.autograd.grad(expected, pred)
    with swap_ext(mmfix_ext):
        actual = sigmoid_focal_loss(pred, target, anchor_weight, gamma, alpha, "mean", avg_factor=37.0)
        (actual_grad,) = torch.autograd.grad(actual, pred)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_grad, expected_grad)


def _torch_softmax_focal(x: torch.Tensor, target: torch.Tensor, weight, gamma: float, alpha: float) -> torch.Tensor:
    p = x.softmax(1).gather(1, target.clamp_min(0)[:, None]).squeeze(1)
    loss = -alpha * (1 - p).pow(gamma) * p.log()
    if weight is not None:
        loss = loss * weight[target.clamp_min(0)]
    return torch.where(target >= 0, loss, torch.zeros_like(loss))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_mmcv_focal_loss_api(mmfix_ext, reduction, weighted):
    """mmcv.ops.sigmoid_focal_loss / SigmoidFocalLoss / SoftmaxFocalLoss, forward and backward."""
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(11)
    rows, classes, gamma, alpha = 64, 6, 2.0, 0.25
    x = (torch.randn(rows, classes, dtype=torch.float64) * 2).requires_grad_()
    target = torch.randint(0, classes if weighted else classes + 1, (rows,))
    weight = torch.rand(classes, dtype=torch.float64) + 0.5 if weighted else None
    reduce = {"none": lambda t: t, "mean": lambda t: t.sum() / rows, "sum": lambda t: t.sum()}[reduction]

    # sigmoid: the reference is MMDetection's formula, weighted by each row's label
    one_hot = F.one_hot(target, classes + 1)[:, :classes].to(x.dtype)
    p = x.sigmoid()
    per_element = F.binary_cross_entropy_with_logits(x, one_hot, reduction="none") * (
        (alpha * one_hot + (1 - alpha) * (1 - one_hot)) * ((1 - p) * one_hot + p * (1 - one_hot)).pow(gamma)
    )
    if weight is not None:
        per_element = per_element * weight[target][:, None]
    expected = reduce(per_element)
    grad_out = torch.randn_like(expected)
    (expected_grad,) = torch.autograd.grad(expected, x, grad_out)
    with swap_ext(mmfix_ext):
        for loss in (
            ops.sigmoid_focal_loss(x, target, gamma, alpha, weight, reduction),
            ops.SigmoidFocalLoss(gamma, alpha, weight, reduction)(x, target),
        ):
            torch.testing.assert_close(loss, expected)
            torch.testing.assert_close(torch.autograd.grad(loss, x, grad_out)[0], expected_grad)

        softmax_target = target.clamp_max(classes - 1)
        expected = reduce(_torch_softmax_focal(x, softmax_target, weight, gamma, alpha))
        grad_out = torch.randn_like(expected)
        (expected_grad,) = torch.autograd.grad(expected, x, grad_out)
        for loss in (
            ops.softmax_focal_loss(x, softmax_target, gamma, alpha, weight, reduction),
            ops.SoftmaxFocalLoss(gamma, alpha, weight, reduction)(x, softmax_target),
        ):
            torch.testing.assert_close(loss, expected)
            if reduction != "none":  # mmcv's backward multiplies (N, C) by (N,): it fails for 'none', compiled too
                torch.testing.assert_close(torch.autograd.grad(loss, x, grad_out)[0], expected_grad)


def test_gradcheck_through_mmcv(mmfix_ext):
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(5)
    x = torch.randn(12, 4, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 4, (12,))
    weight = torch.rand(4, dtype=torch.float64) + 0.5
    with swap_ext(mmfix_ext):
        assert torch.autograd.gradcheck(lambda t: ops.sigmoid_focal_loss(t, target, 2.0, 0.25, weight, "sum"), (x,))
        assert torch.autograd.gradcheck(lambda t: ops.softmax_focal_loss(t, target, 1.5, 0.25, weight, "mean"), (x,))


def test_float16_gives_the_float32_result(mmfix_ext):
    """The CUDA kernels take half (AMP): within half precision of the float32 result."""
    ops = import_mmcv_ops(mmfix_ext)
    torch.manual_seed(2)
    x32 = torch.randn(300, 20) * 3
    target = torch.randint(0, 21, (300,))
    x16 = x32.half()
    with swap_ext(mmfix_ext):
        for loss in (ops.sigmoid_focal_loss, ops.softmax_focal_loss):
            t = target.clamp_max(19) if loss is ops.softmax_focal_loss else target
            leaf32, leaf16 = x16.float().requires_grad_(), x16.clone().requires_grad_()
            out32 = loss(leaf32, t, 2.0, 0.25, None, "none")
            out16 = loss(leaf16, t, 2.0, 0.25, None, "none")
            assert out16.dtype == torch.float16
            torch.testing.assert_close(out16.float(), out32, rtol=1e-2, atol=1e-3)
            out32 = loss(leaf32, t, 2.0, 0.25, None, "sum")
            out16 = loss(leaf16, t, 2.0, 0.25, None, "sum")
            out32.backward()
            out16.backward()
            assert leaf16.grad.dtype == torch.float16
            torch.testing.assert_close(leaf16.grad.float(), leaf32.grad, rtol=1e-2, atol=1e-3)


# --- edges ----------------------------------------------------------------------------------------


def test_row_chunks_give_the_same_result(mmfix_ext, monkeypatch):
    from mmfix._ops import focal_loss

    x = _logits(50, 6, torch.float32, seed=9)
    target = torch.randint(0, 7, (50,))
    whole, chunked = torch.zeros_like(x), torch.zeros_like(x)
    mmfix_ext.sigmoid_focal_loss_backward(x, target, x.new_empty(0), whole, gamma=2.0, alpha=0.25)
    monkeypatch.setattr(focal_loss, "_CHUNK_ELEMENTS", 13)  # two rows per chunk
    mmfix_ext.sigmoid_focal_loss_backward(x, target, x.new_empty(0), chunked, gamma=2.0, alpha=0.25)
    assert torch.equal(whole, chunked)


def test_empty_input(mmfix_ext):
    x = torch.zeros(0, 80)
    target = torch.zeros(0, dtype=torch.long)
    output = torch.zeros(0, 80)
    mmfix_ext.sigmoid_focal_loss_forward(x, target, x.new_empty(0), output, gamma=2.0, alpha=0.25)
    mmfix_ext.softmax_focal_loss_backward(x, target, x.new_empty(0), torch.zeros(0), output, gamma=2.0, alpha=0.25)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # mmcv's CUDA launcher asserts target <= num_classes
        (lambda e, x: e.sigmoid_focal_loss_forward(x, torch.tensor([0, 5, 1]), x.new_empty(0), torch.zeros(3, 4), 2.0, 0.25),
         "at most 4"),
        # a per-class weight is read at the label: background (= num_classes) has none
        (lambda e, x: e.sigmoid_focal_loss_forward(x, torch.tensor([0, 4, 1]), torch.ones(4), torch.zeros(3, 4), 2.0, 0.25),
         "0 … 3"),
        # the softmax kernel would read label num_classes from the next row
        (lambda e, x: e.softmax_focal_loss_forward(x, torch.tensor([0, 4, 1]), x.new_empty(0), torch.zeros(3), 2.0, 0.25),
         "no background label"),
        (lambda e, x: e.sigmoid_focal_loss_forward(x, torch.tensor([0, 1, 1], dtype=torch.int32), x.new_empty(0),
                                                   torch.zeros(3, 4), 2.0, 0.25), "int64"),
        (lambda e, x: e.sigmoid_focal_loss_forward(x, torch.tensor([0, 1, 1]), torch.ones(3), torch.zeros(3, 4), 2.0, 0.25),
         "one weight per class"),
        (lambda e, x: e.softmax_focal_loss_forward(x, torch.tensor([0, 1, 1]), x.new_empty(0), torch.zeros(3, 4), 2.0, 0.25),
         "`output` must have shape"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(mmfix_ext, call, message):
    with pytest.raises(ValueError, match=message):
        call(mmfix_ext, torch.randn(3, 4))
