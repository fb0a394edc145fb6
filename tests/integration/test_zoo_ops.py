"""Real MMDetection 3.3.0 zoo models on mmfix's ops: the same predictions, losses and gradients
as on mmcv's compiled ops (same seeded weights and inputs), one config per op the zoo uses.

Both extensions run in this process (tests/ops_support.py): the compiled one from the prebuilt
mmcv 2.1.0 wheel, mmfix's stand-in; `swap_ext` makes the real `mmcv.ops` modules call one or the
other. Where compiled mmcv has no CPU kernel (CARAFE, deformable RoI pooling, masked
convolution), the model can only run on mmfix's ops here: those tests check that it runs,
predicts and trains with finite values; the ops themselves are compared with written-out
references in tests/ops/. `benchmarks/zoo_ops.py` runs the whole zoo the same way.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.slow

#: config -> the ops it exercises (for the reader; the comparison covers the whole model)
COMPARED = {
    "faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py": "nms (RPN, batched), roi_align",
    "faster_rcnn/faster-rcnn_r50_fpn_soft-nms_1x_coco.py": "softnms",
    "mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py": "roi_align for boxes and masks",
    "retinanet/retinanet_r50_fpn_1x_coco.py": "batched_nms over classes",
    "dcn/faster-rcnn_r50-dconv-c3-c5_fpn_1x_coco.py": "deform_conv in the backbone",
    "dcnv2/faster-rcnn_r50-mdconv-c3-c5_fpn_1x_coco.py": "modulated_deform_conv in the backbone",
    "reppoints/reppoints-moment_r50_fpn_1x_coco.py": "deform_conv in the head",
    "dyhead/atss_r50_fpn_dyhead_1x_coco.py": "modulated_deform_conv with one level's offset on the next, smaller one",
}
MMFIX_ONLY = {
    "carafe/faster-rcnn_r50_fpn-carafe_1x_coco.py": "carafe (no CPU kernel in compiled mmcv)",
    "dcn/faster-rcnn_r50_fpn_dpool_1x_coco.py": "deform_roi_pool (no CPU kernel in compiled mmcv)",
    "guided_anchoring/ga-faster-rcnn_r50_fpn_1x_coco.py": "masked_conv, deform_conv",
}


@pytest.fixture(scope="module")
def exts(tmp_path_factory):
    from mmdet_support import require_mmdet
    from mmfix._ops import _ext
    from ops_support import import_mmcv_ops, load_compiled_ext

    require_mmdet()
    mmfix_ext = _ext.build()
    import_mmcv_ops(mmfix_ext)
    return load_compiled_ext(tmp_path_factory.mktemp("compiled")), mmfix_ext


#: configs whose layers take one image at a time (mmcv's MaskedConv2d asserts a batch of 1)
ONE_IMAGE = {"guided_anchoring/ga-faster-rcnn_r50_fpn_1x_coco.py"}
#: configs run on a smaller image than zoo_support.IMAGE_HW, to keep CI time low (DyHead: six
#: blocks of 256-channel deformable convolutions on five levels; 128 x 160 still gives five)
SMALL_IMAGE = {"dyhead/atss_r50_fpn_dyhead_1x_coco.py": (128, 160)}


def _model(relative):
    import zoo_support

    model = zoo_support.build_model(zoo_support.mmdet_configs() / relative)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    batch = zoo_support.synthetic_batch(batch=1 if relative in ONE_IMAGE else 2, image_hw=SMALL_IMAGE.get(relative))
    return model, state, batch


@pytest.mark.parametrize("relative", sorted(COMPARED))
def test_zoo_model_equals_compiled_mmcv(exts, relative) -> None:
    import zoo_support

    compiled, mmfix_ext = exts
    model, state, batch = _model(relative)
    expected = zoo_support.run_model(model, state, compiled, batch)
    actual = zoo_support.run_model(model, state, mmfix_ext, batch)
    assert sum(len(p.get("pred_instances.bboxes", ())) for p in expected.predictions) > 0  # something predicted
    assert expected.losses and expected.grads
    assert zoo_support.differences(actual, expected) == []


@pytest.mark.parametrize("relative", sorted(MMFIX_ONLY))
def test_zoo_model_without_a_compiled_cpu_kernel_runs_on_mmfix(exts, relative) -> None:
    import zoo_support

    compiled, mmfix_ext = exts
    model, state, batch = _model(relative)
    with pytest.raises(RuntimeError, match="not found"):  # compiled mmcv: no CPU kernel for this op
        zoo_support.run_model(model, state, compiled, batch)
    run = zoo_support.run_model(model, state, mmfix_ext, batch)
    assert run.predictions and run.losses and run.grads
    for value in list(run.losses.values()) + list(run.grads.values()):
        assert bool(value.isfinite().all())
    assert all(math.isfinite(float(v.sum())) for p in run.predictions for v in p.values() if v.is_floating_point())
