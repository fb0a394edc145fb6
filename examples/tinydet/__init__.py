"""A tiny "detector" package registered with MMEngine, so the bundled tools run in seconds on CPU.

It stands in for mmdet: a model, a dataset and a metric, each registered in
MMEngine's root registries exactly as a real OpenMMLab package registers its own.
"""

from .dataset import ToyBoxDataset
from .metric import ToyBoxMetric
from .model import ToyDetector

__all__ = ["ToyBoxDataset", "ToyBoxMetric", "ToyDetector"]
