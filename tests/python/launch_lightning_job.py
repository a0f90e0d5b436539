# SPDX-License-Identifier: MIT
"""A Lightning DataModule as people write it (torch's DataLoader, torchvision's ImageFolder),
run by tests/python/test_launch_references.py under `python -m stoker`: 2 epochs on CPU, then
it prints the batches each epoch saw. docs/FRAMEWORKS.md counts the lines it needs changed."""
import json
import sys
import torch
import lightning as L
import torchvision.transforms as T
from torchvision.datasets import ImageFolder
from torch.utils.data import DataLoader


class DataModule(L.LightningDataModule):
    def __init__(self, root, batch_size=8):
        super().__init__()
        self.root, self.batch_size = root, batch_size

    def setup(self, stage):
        norm = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
        self.train = ImageFolder(self.root + "/train", T.Compose([
            T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor(), norm]))
        self.val = ImageFolder(self.root + "/val", T.Compose([
            T.Resize(36), T.CenterCrop(32), T.ToTensor(), norm]))

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, num_workers=2)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=self.batch_size, num_workers=2)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 5))
        self.seen = {"train": [], "val": []}

    def training_step(self, batch, i):
        x, y = batch
        if i == 0:
            self.seen["train"].append(0)
        self.seen["train"][-1] += 1
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):
        if i == 0:
            self.seen["val"].append(0)
        self.seen["val"][-1] += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    m = Model()
    L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False, num_sanity_val_steps=0).fit(m, DataModule(sys.argv[1]))
    print("BATCHES", json.dumps(m.seen), flush=True)
