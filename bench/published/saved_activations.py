#!/usr/bin/python3
"""Measures what a detector's training step keeps for backward, on this machine's CPU.

The bytes autograd saves for the backward pass do not depend on the device: the same tensors
are saved on a CPU as on a GPU. This script builds torchvision's detection models (no weights
are downloaded: the backbone is built the way the constructors build it, with
FrozenBatchNorm2d and frozen early stages as when pretrained weights are given, or with
trainable BatchNorm as from scratch), runs one training forward pass on images of a given
size, and sums the storages of every tensor saved for backward (each storage once, parameters
and buffers left out), per part of the model. It is the measurement the detector term of the
memory estimate (src/code/model_zoo.cc DetectorOf) is checked against.

  /usr/bin/python3 bench/published/saved_activations.py [--detectors fasterrcnn,retinanet]
      [--depths 50,101] [--images 2] [--size 800x1333] [--json OUT]

Each row takes minutes on two cores (a training forward pass at 800x1333).
"""

import argparse
import json
import sys

import torch
import torchvision
from torchvision.models import resnet
from torchvision.models.detection import FasterRCNN, MaskRCNN, RetinaNet
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def build(detector, depth, frozen_bn, trainable_layers):
    norm = misc_nn_ops.FrozenBatchNorm2d if frozen_bn else torch.nn.BatchNorm2d
    body = getattr(resnet, f"resnet{depth}")(weights=None, norm_layer=norm)
    if detector == "retinanet":
        # As retinanet_resnet50_fpn: C3-C5, P6 and P7 from P5.
        backbone = _resnet_fpn_extractor(body, trainable_layers, returned_layers=[2, 3, 4],
                                         extra_blocks=LastLevelP6P7(256, 256))
        return RetinaNet(backbone, num_classes=91)
    backbone = _resnet_fpn_extractor(body, trainable_layers)
    cls = MaskRCNN if detector == "maskrcnn" else FasterRCNN
    return cls(backbone, num_classes=91)


def measure(detector, depth, frozen_bn, trainable_layers, images, height, width):
    torch.manual_seed(0)
    model = build(detector, depth, frozen_bn, trainable_layers)
    model.train()
    # The transform would resize to min_size 800 / max_size 1333: give it images of that size.
    imgs = [torch.rand(3, height, width) for _ in range(images)]
    targets = []
    for _ in range(images):
        boxes = torch.tensor([[10.0, 20.0, 300.0, 400.0], [500.0, 100.0, 900.0, 700.0],
                              [100.0, 300.0, 250.0, 500.0]])
        t = {"boxes": boxes, "labels": torch.tensor([1, 2, 3])}
        if detector == "maskrcnn":
            masks = torch.zeros(3, height, width, dtype=torch.uint8)
            for i, (x0, y0, x1, y1) in enumerate(boxes.int().tolist()):
                masks[i, y0:y1, x0:x1] = 1
            t["masks"] = masks
        targets.append(t)

    owned = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    seen = {}
    part = ["other"]

    def pre(name):
        def hook(_module, _inputs):
            part[0] = name
        return hook

    parts = {"backbone.body": model.backbone.body, "backbone.fpn": model.backbone.fpn}
    if detector == "retinanet":
        parts["head"] = model.head
    else:
        parts["rpn"] = model.rpn
        parts["roi_heads"] = model.roi_heads
    for name, module in parts.items():
        module.register_forward_pre_hook(pre(name))

    def pack(t):
        if t.data_ptr() not in owned:
            s = t.storage()
            key = s.data_ptr()
            if key not in seen:
                seen[key] = (part[0], s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        losses = model(imgs, targets)
    loss = sum(losses.values())
    by_part = {}
    for name, nbytes in seen.values():
        by_part[name] = by_part.get(name, 0) + nbytes
    del loss, losses
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"detector": detector, "depth": depth, "frozen_bn": frozen_bn,
            "trainable_layers": trainable_layers, "images": images, "height": height,
            "width": width, "trainable_parameters": trainable,
            "saved_bytes": sum(by_part.values()), "saved_bytes_by_part": by_part}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=2)
    p.add_argument("--size", default="800x1333", help="HxW after the detection transform")
    p.add_argument("--detectors", default="fasterrcnn,retinanet,maskrcnn")
    p.add_argument("--depths", default="50,101")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args()
    h, w = (int(x) for x in a.size.split("x"))
    rows = []
    for detector in a.detectors.split(","):
        if detector not in ("fasterrcnn", "retinanet", "maskrcnn"):
            raise SystemExit("saved_activations.py: unknown detector %r" % detector)
        for depth in (int(d) for d in a.depths.split(",")):
            for frozen_bn, layers in ((True, 3), (False, 5), (False, 3)):
                r = measure(detector, depth, frozen_bn, layers, a.images, h, w)
                rows.append(r)
                print(f"{detector:10} r{depth:<3} frozen_bn={str(frozen_bn):5} trainable={layers}"
                      f"  saved {r['saved_bytes'] / 2**30:.3f} GiB  "
                      + "  ".join(f"{k} {v / 2**30:.3f}"
                                  for k, v in sorted(r["saved_bytes_by_part"].items())),
                      flush=True)
    env = {"torch": torch.__version__, "torchvision": torchvision.__version__,
           "python": sys.version.split()[0]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
