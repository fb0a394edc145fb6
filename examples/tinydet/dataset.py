from __future__ import annotations

import torch
from mmengine.registry import DATASETS
from torch.utils.data import Dataset


@DATASETS.register_module()
class ToyBoxDataset(Dataset):
    """Points whose "box" is a fixed linear function of them; deterministic per seed."""

    def __init__(self, num_samples: int = 64, in_dim: int = 8, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.inputs = torch.randn(num_samples, in_dim, generator=generator)
        weight = torch.randn(in_dim, 4, generator=torch.Generator().manual_seed(1234))
        self.targets = self.inputs @ weight
        self.metainfo = dict(classes=("box",))

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> dict:
        return dict(inputs=self.inputs[index], data_samples=self.targets[index])
