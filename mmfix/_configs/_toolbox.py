"""Which OpenMMLab toolbox a config belongs to: a pure function of what the config holds, where its
files are, and what loads it (``detect``). Tables as data, one row per type.

The family's legacy configs differ toolbox by toolbox (MMSegmentation 0.x, MMClassification 0.x,
MMPose 0.x, MMDetection3D 1.0, MMDetection 2.x): a conversion must apply the config's own
toolbox's rules, never MMDetection's to another's. So the answer is "mmdet" only on positive
evidence of MMDetection, and None when nothing tells.

Evidence, strongest first: the config's own ``default_scope``; its ``model.type``; its dataset
types (``data.train/val/test``, through dataset wrappers); the folders of its file and its
``_base_`` files (an installed ``<pkg>/.mim/configs`` or a ``<checkout>/configs`` tree); then
what loads it (the toolbox package calling ``Config.fromfile``, the script run, the current
default scope). Another toolbox's evidence in an earlier step wins over MMDetection's in a later
one only for the folders (MMDetection3D 1.0's nuImages configs are MMDetection models and
datasets in MMDetection3D's zoo); what loads a config never outweighs what it contains.

Rows were read from the registries and the whole official zoos of MMDetection 2.28.2,
MMSegmentation 0.30.0, MMClassification 0.25.0, MMPose 0.29.0 and MMDetection3D 1.0.0rc6.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, NamedTuple

#: toolbox -> (its legacy release line, its current one, where its own migration guide is).
TOOLBOXES: dict[str, tuple[str, str, str]] = {
    "mmdet": ("MMDetection 2.x", "MMDetection 3.x", "open-mmlab/mmdetection docs/en/migration/config_migration.md"),
    "mmseg": ("MMSegmentation 0.x", "MMSegmentation 1.x", "open-mmlab/mmsegmentation docs/en/migration/interface.md"),
    "mmpretrain": ("MMClassification 0.x", "MMPretrain 1.x", "open-mmlab/mmpretrain docs/en/migration.md"),
    "mmpose": ("MMPose 0.x", "MMPose 1.x", "open-mmlab/mmpose docs/en/migration.md"),
    "mmdet3d": ("MMDetection3D 1.0", "MMDetection3D 1.1+", "open-mmlab/mmdetection3d docs/en/migration.md"),
}

#: Package, registry-scope and checkout names of each toolbox (a path part, a module, a scope).
MARKERS: tuple[tuple[str, str], ...] = (
    ("mmdet3d", "mmdet3d"),
    ("mmdetection3d", "mmdet3d"),
    ("mmseg", "mmseg"),
    ("mmsegmentation", "mmseg"),
    ("mmcls", "mmpretrain"),
    ("mmclassification", "mmpretrain"),
    ("mmpretrain", "mmpretrain"),
    ("mmpose", "mmpose"),
    ("mmdet", "mmdet"),
    ("mmdetection", "mmdet"),
)

#: model.type -> toolbox: the top-level model (detector, segmentor, classifier, pose network) types.
MODEL_TYPES: tuple[tuple[str, str], ...] = (
    # MMSegmentation 0.x segmentors
    ("EncoderDecoder", "mmseg"),
    ("CascadeEncoderDecoder", "mmseg"),
    # MMClassification 0.x classifiers
    ("ImageClassifier", "mmpretrain"),
    # MMPose 0.x pose networks (BottomUp: AssociativeEmbedding's name before 0.8)
    ("TopDown", "mmpose"),
    ("BottomUp", "mmpose"),
    ("AssociativeEmbedding", "mmpose"),
    ("CID", "mmpose"),
    ("DetectAndRegress", "mmpose"),
    ("DisentangledKeypointRegressor", "mmpose"),
    ("GestureRecognizer", "mmpose"),
    ("Interhand3D", "mmpose"),
    ("MultiTask", "mmpose"),
    ("ParametricMesh", "mmpose"),
    ("PoseLifter", "mmpose"),
    ("PoseWarper", "mmpose"),
    ("VoxelCenterDetector", "mmpose"),
    ("VoxelSinglePose", "mmpose"),
    # MMDetection3D 1.0 detectors and segmentors
    ("CenterPoint", "mmdet3d"),
    ("DynamicMVXFasterRCNN", "mmdet3d"),
    ("DynamicVoxelNet", "mmdet3d"),
    ("EncoderDecoder3D", "mmdet3d"),
    ("FCOSMono3D", "mmdet3d"),
    ("GroupFree3DNet", "mmdet3d"),
    ("H3DNet", "mmdet3d"),
    ("ImVoteNet", "mmdet3d"),
    ("ImVoxelNet", "mmdet3d"),
    ("MVXFasterRCNN", "mmdet3d"),
    ("MVXTwoStageDetector", "mmdet3d"),
    ("MinkSingleStage3DDetector", "mmdet3d"),
    ("PartA2", "mmdet3d"),
    ("PointRCNN", "mmdet3d"),
    ("SASSD", "mmdet3d"),
    ("SMOKEMono3D", "mmdet3d"),
    ("SSD3DNet", "mmdet3d"),
    ("SingleStage3DDetector", "mmdet3d"),
    ("SingleStageMono3DDetector", "mmdet3d"),
    ("TwoStage3DDetector", "mmdet3d"),
    ("VoteNet", "mmdet3d"),
    ("VoxelNet", "mmdet3d"),
    # MMDetection 2.x detectors
    ("ATSS", "mmdet"),
    ("AutoAssign", "mmdet"),
    ("CascadeRCNN", "mmdet"),
    ("CenterNet", "mmdet"),
    ("CornerNet", "mmdet"),
    ("DDOD", "mmdet"),
    ("DETR", "mmdet"),
    ("DeformableDETR", "mmdet"),
    ("FCOS", "mmdet"),
    ("FOVEA", "mmdet"),
    ("FSAF", "mmdet"),
    ("FastRCNN", "mmdet"),
    ("FasterRCNN", "mmdet"),
    ("GFL", "mmdet"),
    ("GridRCNN", "mmdet"),
    ("HybridTaskCascade", "mmdet"),
    ("KnowledgeDistillationSingleStageDetector", "mmdet"),
    ("LAD", "mmdet"),
    ("Mask2Former", "mmdet"),
    ("MaskFormer", "mmdet"),
    ("MaskRCNN", "mmdet"),
    ("MaskScoringRCNN", "mmdet"),
    ("NASFCOS", "mmdet"),
    ("PAA", "mmdet"),
    ("PanopticFPN", "mmdet"),
    ("PointRend", "mmdet"),
    ("QueryInst", "mmdet"),
    ("RPN", "mmdet"),
    ("RepPointsDetector", "mmdet"),
    ("RetinaNet", "mmdet"),
    ("SCNet", "mmdet"),
    ("SOLO", "mmdet"),
    ("SOLOv2", "mmdet"),
    ("SingleStageDetector", "mmdet"),
    ("SingleStageInstanceSegmentor", "mmdet"),
    ("SparseRCNN", "mmdet"),
    ("TOOD", "mmdet"),
    ("TridentFasterRCNN", "mmdet"),
    ("TwoStageDetector", "mmdet"),
    ("TwoStagePanopticSegmentor", "mmdet"),
    ("VFNet", "mmdet"),
    ("YOLACT", "mmdet"),
    ("YOLOF", "mmdet"),
    ("YOLOV3", "mmdet"),
    ("YOLOX", "mmdet"),
)

#: (dataset type, toolbox, a key only that toolbox's dataset of this name has, or ""): the first
#: row that fits wins. Wrappers shared by the family (RepeatDataset, ConcatDataset,
#: ClassBalancedDataset, MultiImageMixDataset, CBGSDataset, KFoldDataset) and each toolbox's
#: generic CustomDataset are no evidence: they are looked through or skipped.
DATASET_TYPES: tuple[tuple[str, str, str], ...] = (
    # Two toolboxes' datasets share these names: MMSegmentation's reads img_dir/ann_dir,
    # MMPose's data_cfg; MMDetection's neither.
    ("CityscapesDataset", "mmseg", "img_dir"),
    ("CityscapesDataset", "mmdet", ""),
    ("DeepFashionDataset", "mmpose", "data_cfg"),
    ("DeepFashionDataset", "mmdet", ""),
    # MMSegmentation 0.x
    ("ADE20KDataset", "mmseg", ""),
    ("COCOStuffDataset", "mmseg", ""),
    ("ChaseDB1Dataset", "mmseg", ""),
    ("DRIVEDataset", "mmseg", ""),
    ("DarkZurichDataset", "mmseg", ""),
    ("FaceOccludedDataset", "mmseg", ""),
    ("HRFDataset", "mmseg", ""),
    ("ISPRSDataset", "mmseg", ""),
    ("LoveDADataset", "mmseg", ""),
    ("NightDrivingDataset", "mmseg", ""),
    ("PascalContextDataset", "mmseg", ""),
    ("PascalContextDataset59", "mmseg", ""),
    ("PascalVOCDataset", "mmseg", ""),
    ("PotsdamDataset", "mmseg", ""),
    ("STAREDataset", "mmseg", ""),
    ("iSAIDDataset", "mmseg", ""),
    # MMClassification 0.x
    ("CIFAR10", "mmpretrain", ""),
    ("CIFAR100", "mmpretrain", ""),
    ("CUB", "mmpretrain", ""),
    ("FashionMNIST", "mmpretrain", ""),
    ("ImageNet", "mmpretrain", ""),
    ("ImageNet21k", "mmpretrain", ""),
    ("MNIST", "mmpretrain", ""),
    ("StanfordCars", "mmpretrain", ""),
    ("VOC", "mmpretrain", ""),
    # MMPose 0.x
    ("AnimalAP10KDataset", "mmpose", ""),
    ("AnimalATRWDataset", "mmpose", ""),
    ("AnimalFlyDataset", "mmpose", ""),
    ("AnimalHorse10Dataset", "mmpose", ""),
    ("AnimalLocustDataset", "mmpose", ""),
    ("AnimalMacaqueDataset", "mmpose", ""),
    ("AnimalPoseDataset", "mmpose", ""),
    ("AnimalZebraDataset", "mmpose", ""),
    ("Body3DH36MDataset", "mmpose", ""),
    ("Body3DMpiInf3dhpDataset", "mmpose", ""),
    ("Body3DMviewDirectCampusDataset", "mmpose", ""),
    ("Body3DMviewDirectPanopticDataset", "mmpose", ""),
    ("Body3DMviewDirectShelfDataset", "mmpose", ""),
    ("Body3DSemiSupervisionDataset", "mmpose", ""),
    ("BottomUpAicDataset", "mmpose", ""),
    ("BottomUpCocoDataset", "mmpose", ""),
    ("BottomUpCocoWholeBodyDataset", "mmpose", ""),
    ("BottomUpCrowdPoseDataset", "mmpose", ""),
    ("BottomUpMhpDataset", "mmpose", ""),
    ("Face300WDataset", "mmpose", ""),
    ("FaceAFLWDataset", "mmpose", ""),
    ("FaceCOFWDataset", "mmpose", ""),
    ("FaceCocoWholeBodyDataset", "mmpose", ""),
    ("FaceWFLWDataset", "mmpose", ""),
    ("FreiHandDataset", "mmpose", ""),
    ("HandCocoWholeBodyDataset", "mmpose", ""),
    ("InterHand2DDataset", "mmpose", ""),
    ("InterHand3DDataset", "mmpose", ""),
    ("MeshAdversarialDataset", "mmpose", ""),
    ("MeshH36MDataset", "mmpose", ""),
    ("MeshMixDataset", "mmpose", ""),
    ("MoshDataset", "mmpose", ""),
    ("NVGestureDataset", "mmpose", ""),
    ("OneHand10KDataset", "mmpose", ""),
    ("PanopticDataset", "mmpose", ""),
    ("Rhd2DDataset", "mmpose", ""),
    ("TopDownAicDataset", "mmpose", ""),
    ("TopDownCocoDataset", "mmpose", ""),
    ("TopDownCocoWholeBodyDataset", "mmpose", ""),
    ("TopDownCrowdPoseDataset", "mmpose", ""),
    ("TopDownH36MDataset", "mmpose", ""),
    ("TopDownHalpeDataset", "mmpose", ""),
    ("TopDownJhmdbDataset", "mmpose", ""),
    ("TopDownMhpDataset", "mmpose", ""),
    ("TopDownMpiiDataset", "mmpose", ""),
    ("TopDownMpiiTrbDataset", "mmpose", ""),
    ("TopDownOCHumanDataset", "mmpose", ""),
    ("TopDownPoseTrack18Dataset", "mmpose", ""),
    ("TopDownPoseTrack18VideoDataset", "mmpose", ""),
    # MMDetection3D 1.0
    ("Custom3DDataset", "mmdet3d", ""),
    ("Custom3DSegDataset", "mmdet3d", ""),
    ("Kitti2DDataset", "mmdet3d", ""),
    ("KittiDataset", "mmdet3d", ""),
    ("KittiMonoDataset", "mmdet3d", ""),
    ("LyftDataset", "mmdet3d", ""),
    ("NuScenesDataset", "mmdet3d", ""),
    ("NuScenesMonoDataset", "mmdet3d", ""),
    ("S3DISDataset", "mmdet3d", ""),
    ("S3DISSegDataset", "mmdet3d", ""),
    ("SUNRGBDDataset", "mmdet3d", ""),
    ("ScanNetDataset", "mmdet3d", ""),
    ("ScanNetInstanceSegDataset", "mmdet3d", ""),
    ("ScanNetSegDataset", "mmdet3d", ""),
    ("SemanticKITTIDataset", "mmdet3d", ""),
    ("WaymoDataset", "mmdet3d", ""),
    # MMDetection 2.x
    ("CocoDataset", "mmdet", ""),
    ("CocoPanopticDataset", "mmdet", ""),
    ("LVISDataset", "mmdet", ""),
    ("LVISV05Dataset", "mmdet", ""),
    ("LVISV1Dataset", "mmdet", ""),
    ("Objects365V1Dataset", "mmdet", ""),
    ("Objects365V2Dataset", "mmdet", ""),
    ("OccludedSeparatedCocoDataset", "mmdet", ""),
    ("OpenImagesChallengeDataset", "mmdet", ""),
    ("OpenImagesDataset", "mmdet", ""),
    ("VOCDataset", "mmdet", ""),
    ("WIDERFaceDataset", "mmdet", ""),
    ("XMLDataset", "mmdet", ""),
)

_MODEL = dict(MODEL_TYPES)
_DATASETS: dict[str, list[tuple[str, str]]] = {}
for _type, _toolbox, _key in DATASET_TYPES:
    _DATASETS.setdefault(_type, []).append((_toolbox, _key))
del _type, _toolbox, _key


class Loader(NamedTuple):
    """What loads the config (gathered by the caller; None where unknown)."""

    caller: str | None = None  # the module calling Config.fromfile ("mmseg.apis.inference")
    script: str | None = None  # the program run (sys.argv[0])
    scope: str | None = None  # MMEngine's current default scope


class Detection(NamedTuple):
    toolbox: str | None  # a key of TOOLBOXES, or None: nothing tells
    evidence: str  # what told, in words ("model type EncoderDecoder")


def _by_name(name: str) -> str | None:
    """The toolbox a package / scope / folder name belongs to: ``mmseg``, ``mmsegmentation-0.30.0``."""
    name = name.lower()
    for marker, toolbox in MARKERS:
        if name == marker or re.match(re.escape(marker) + r"[-_.]", name):
            return toolbox
    return None


def _typed(value: Any) -> tuple[str | None, str]:
    """(the scope a ``"mmseg.EncoderDecoder"`` type names, the bare type)."""
    text = str(value)
    scope, dot, bare = text.rpartition(".")
    return (_by_name(scope) if dot else None), bare


def _datasets(cfg: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(where, dataset dict) for the 2.x ``data`` section's datasets, through wrappers."""
    data = cfg.get("data")
    if not isinstance(data, Mapping):
        return
    todo: list[tuple[str, Any]] = [(f"data.{k}", data.get(k)) for k in ("train", "val", "test")]
    while todo:
        where, node = todo.pop(0)
        if isinstance(node, (list, tuple)):
            todo[:0] = [(f"{where}[{i}]", n) for i, n in enumerate(node)]
        elif isinstance(node, Mapping):
            if "type" in node:
                yield where, node
            todo[:0] = [(f"{where}.{k}", node[k]) for k in ("dataset", "datasets") if k in node]


def _config_folder(path: str) -> str | None:
    """The toolbox whose config tree holds ``path``: ``…/<pkg>/.mim/configs/…`` or ``…/<checkout>/configs/…``."""
    parts = [p for p in os.path.normpath(path).split(os.sep) if p]
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] != "configs":
            continue
        owner = parts[i - 2] if parts[i - 1] == ".mim" and i >= 2 else parts[i - 1]
        toolbox = _by_name(owner)
        if toolbox is not None:
            return toolbox
    return None


def _script_toolbox(path: str) -> tuple[str | None, str]:
    """The toolbox a script belongs to by its folders (``<pkg>/.mim/tools/train.py``, a checkout)."""
    parts = [p for p in os.path.normpath(path).split(os.sep) if p]
    for part in reversed(parts[:-1]):
        toolbox = _by_name(part)
        if toolbox is not None:
            return toolbox, part
    return None, ""


def detect(cfg: Mapping[str, Any], paths: Iterable[str] = (), loader: Loader | None = None) -> Detection:
    """The toolbox ``cfg`` (a merged config dict) belongs to.

    ``paths``: the config file and its ``_base_`` files; ``loader``: what loads it.
    """
    scope = cfg.get("default_scope")
    if isinstance(scope, str) and _by_name(scope):
        return Detection(_by_name(scope), f"default_scope={scope!r}")
    fallback: Detection | None = None  # MMDetection's evidence: it wins only where no other toolbox's does
    model = cfg.get("model")
    if isinstance(model, Mapping) and isinstance(model.get("type"), str):
        prefix, bare = _typed(model["type"])
        toolbox = prefix or _MODEL.get(bare)
        if toolbox is not None:
            found = Detection(toolbox, f"model type {model['type']}")
            if toolbox != "mmdet":
                return found
            fallback = found
    for where, dataset in _datasets(cfg):
        prefix, bare = _typed(dataset["type"])
        rows = [(prefix, "")] if prefix else _DATASETS.get(bare, [])
        for toolbox, key in rows:
            if key and key not in dataset:
                continue
            found = Detection(toolbox, f"{where} type {bare}" + (f" with {key}" if key else ""))
            if toolbox != "mmdet":
                return found
            fallback = fallback or found
            break
    for path in paths:
        toolbox = _config_folder(path)
        if toolbox is not None and (toolbox != "mmdet" or fallback is None):
            return Detection(toolbox, f"its file {path} is in {TOOLBOXES[toolbox][0].split()[0]}'s config tree")
    if fallback is not None:
        return fallback
    if loader is not None:
        if loader.caller and _by_name(loader.caller.split(".")[0]):
            return Detection(_by_name(loader.caller.split(".")[0]), f"loaded by {loader.caller}")
        if loader.script:
            toolbox, part = _script_toolbox(loader.script)
            if toolbox is not None:
                return Detection(toolbox, f"loaded by {loader.script} (in {part}/)")
        if loader.scope and _by_name(loader.scope):
            return Detection(_by_name(loader.scope), f"loaded with the default scope {loader.scope!r}")
    return Detection(None, "no model, dataset, folder or loader tells")


def not_available(detection: Detection, legacy_keys: Iterable[str], filename: str, version: str) -> str:
    """The one paragraph that stops an old-format config of a toolbox mmfix cannot convert yet.

    Names only that toolbox: what was detected, why the file is old-format, what to do."""
    assert detection.toolbox is not None
    old, new, guide = TOOLBOXES[detection.toolbox]
    keys = ", ".join(legacy_keys)
    return (
        f"mmfix: {filename} is an {old} config ({detection.evidence}) in the format before MMEngine "
        f"(it sets {keys}, which {new} does not read). mmfix {version} cannot convert {old} configs "
        f"yet: their legacy-format conversion is not available in this mmfix version, and no other "
        f"toolbox's rules fit them. Nothing was converted or run. Use the {new} config of the same model "
        f"(the toolbox's current configs/ folder; its metafile.yml files pair models by checkpoint URL), "
        f"or rewrite this one following the toolbox's own migration guide ({guide})."
    )
