import lightning as L
import torch
from torch import nn


class TinyTransformer(L.LightningModule):
    def __init__(self, vocab_size=32000, d_model=512, nhead=8, num_layers=6):
        super().__init__()
        self.embed = nn.Embedding(32000, 512)
        layer = nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=6)
        self.head = nn.Linear(512, 32000)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)))

    def training_step(self, batch, batch_idx):
        logits = self(batch[:, :-1])
        return nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-4)
