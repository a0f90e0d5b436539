# SPDX-License-Identifier: MIT
"""A Lightning 2.x training job over an ImageFolder, run by test_lightning.py as a script (so
that strategy="ddp" can launch its second rank by re-running it). Each rank writes what it saw
to OUT/rank{R}.json: per epoch, the training and validation samples (identified by a hash of
their eval-transformed pixels, bit-exact between stoker and torch) in the order seen.

    python lightning_job.py ROOT OUT {stoker|torch} DEVICES EPOCHS [SAVE_AT | resume:CKPT | limit]
"""

import hashlib
import json
import os
import sys

import torch
import lightning as L
import torchvision.transforms as T
from torchvision.datasets import ImageFolder

root, out, kind, devices, epochs = sys.argv[1:6]
extra = sys.argv[6] if len(sys.argv) > 6 else ""
devices, epochs = int(devices), int(epochs)
TF = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])


def key(x):
    return hashlib.sha1(x.numpy().tobytes()).hexdigest()[:16]


class Data(L.LightningDataModule):
    def _dl(self, shuffle):
        if kind == "stoker":
            import stoker
            return stoker.DataLoader(ImageFolder(root, TF), batch_size=4, shuffle=shuffle,
                                     num_workers=2)
        return torch.utils.data.DataLoader(ImageFolder(root, TF), batch_size=4,
                                           shuffle=shuffle)

    def train_dataloader(self):
        return self._dl(True)

    def val_dataloader(self):
        return self._dl(False)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3 * 16 * 16, 3)
        self.seen = {}

    def _log(self, split, x):
        e = str(self.current_epoch)
        self.seen.setdefault(split, {}).setdefault(e, []).extend(key(i) for i in x)

    def training_step(self, batch, i):
        x, y = batch
        self._log("train", x)
        if extra.isdigit() and self.current_epoch == 1 and i == int(extra):
            self.trainer.save_checkpoint(os.path.join(out, "mid.ckpt"))
        return torch.nn.functional.cross_entropy(self.lin(x.flatten(1).float() / 255), y)

    def validation_step(self, batch, i):
        if not self.trainer.sanity_checking:
            self._log("val", batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    L.seed_everything(1)
    model = Model()
    trainer = L.Trainer(accelerator="cpu", devices=devices, max_epochs=epochs,
                        strategy="ddp" if devices > 1 else "auto", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=2,
                        **({"limit_train_batches": 3, "limit_val_batches": 2}
                           if extra == "limit" else {}))
    ckpt = extra[len("resume:"):] if extra.startswith("resume:") else None
    trainer.fit(model, datamodule=Data(), ckpt_path=ckpt)
    with open(os.path.join(out, "rank%d.json" % trainer.global_rank), "w") as f:
        json.dump({"seen": model.seen, "train_batches": trainer.num_training_batches,
                   "val_batches": trainer.num_val_batches}, f)
