"""Real MMSegmentation 1.2.2, MMPretrain 1.2.0 and MMPose 1.3.2 zoo models on mmfix's ops: the
same predictions, losses and gradients as on mmcv's compiled ops (same seeded weights and inputs).

The set is what `scripts/survey_toolbox_ops.py` finds these zoos run through ``mmcv.ops`` on
CPU: MMSegmentation's PSANet calls the extension (``psamask``), MMPose's DEKR and PoseWarper
call it through ``DeformConv2d``; CCNet's ``CrissCrossAttention`` and PointRend's
``point_sample`` are ``mmcv.ops`` code that needs no extension function in mmcv 2.1.0, and
MaskFormer's focal loss and Mask2Former's deformable attention reach the extension only on CUDA
(the same PyTorch code runs on either side here, so they are left to the controls). MMPretrain's
models call no ``mmcv.ops`` at all. One plain model per toolbox is the control: it shows the
comparison itself (batch, seeds, swap) holds where the ops cannot differ.

The table is zoo_support.TOOLBOX_MODELS (benchmarks/model_ops_speed.py --family times them).
tests/zoo_support.py builds and runs each model as for tests/integration/test_zoo_ops.py, with
the toolbox's own data samples; compiled mmcv 2.1.0 comes from the prebuilt wheel
(tests/ops_support.py). MMPose needs xtcocotools (tests/toolbox_support.py): without a usable
one its tests skip, saying why.
"""

from __future__ import annotations

import pytest
import zoo_support

pytestmark = pytest.mark.slow

COMPARED = zoo_support.TOOLBOX_MODELS


@pytest.fixture(scope="module")
def exts(tmp_path_factory):
    from mmfix._ops import _ext
    from ops_support import import_mmcv_ops, load_compiled_ext

    mmfix_ext = _ext.build()
    import_mmcv_ops(mmfix_ext)
    return load_compiled_ext(tmp_path_factory.mktemp("compiled")), mmfix_ext


def _require(package: str) -> None:
    """The toolbox importable (with MMPose's xtcocotools), or a skip — a failure under REQUIRE_TOOLBOXES."""
    from toolbox_support import tools_dir

    tools_dir(package)


@pytest.mark.parametrize(("package", "relative"), sorted(COMPARED), ids=lambda v: v.split("/")[-1])
def test_toolbox_zoo_model_equals_compiled_mmcv(exts, package, relative) -> None:
    _require(package)
    compiled, mmfix_ext = exts
    model = zoo_support.build_model(zoo_support.configs_root(package) / relative)
    assert zoo_support.model_toolbox(model) == package
    state = {k: v.clone() for k, v in model.state_dict().items()}
    batch = zoo_support.synthetic_batch(batch=2, model=model)
    expected = zoo_support.run_model(model, state, compiled, batch)
    actual = zoo_support.run_model(model, state, mmfix_ext, batch)
    assert len(expected.predictions) >= 1 and all(expected.predictions)  # something predicted
    assert expected.losses and expected.grads
    assert all(bool(v.isfinite().all()) for v in expected.losses.values())
    assert zoo_support.differences(actual, expected) == []
