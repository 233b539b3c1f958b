import argparse

import torch
import torch.nn as nn
import torchvision
from torchvision import transforms


def main():
    parser = argparse.ArgumentParser(description="ImageNet training")
    parser.add_argument("--data", required=True)
    parser.add_argument("-b", "--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()

    model = torchvision.models.resnet50(weights=None).cuda()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    train_set = torchvision.datasets.ImageFolder(args.data + "/train", tf)
    train_loader = torch.utils.data.DataLoader(
        train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    for images, target in train_loader:
        loss = criterion(model(images.cuda()), target.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
