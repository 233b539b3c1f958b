import os

import torch
import torchvision.models as models

arch = os.environ["ARCH"]
model = getattr(models, arch)(num_classes=100).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(range(1000), batch_size=128, num_workers=2)
