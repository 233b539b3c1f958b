"""Autocast with a dtype chosen from the environment; a GradScaler that is switched off."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

BATCH_SIZE = 64

model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler(enabled=False)
loader = DataLoader(torch.randn(1024, 1024), batch_size=BATCH_SIZE)
for x in loader:
    with torch.autocast("cuda", dtype=getattr(torch, os.environ["AMP_DTYPE"])):
        loss = model(x.cuda()).square().mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
