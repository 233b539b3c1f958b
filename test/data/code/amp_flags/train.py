"""A language model whose precision, optimizer and checkpointing are chosen by flags."""
import argparse
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--grad_ckpt", action="store_true")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--d_model", type=int, default=512)
    parser.add_argument("--n_heads", type=int, default=8)
    parser.add_argument("--n_layers", type=int, default=4)
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--precision", default="fp32")
    return parser.parse_args()


class TextTransformer(nn.Module):
    def __init__(self, cfg, grad_ckpt=False):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        layer = nn.TransformerEncoderLayer(d_model=cfg.d_model, nhead=cfg.n_heads,
                                           dim_feedforward=4 * cfg.d_model, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=cfg.n_layers)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.grad_ckpt = grad_ckpt

    def forward(self, tokens):
        x = self.tok_emb(tokens)
        for layer in self.encoder.layers:
            if self.grad_ckpt and self.training:
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return self.head(x)


def main():
    args = parse_args()
    tokens = torch.randint(0, args.vocab_size, (4 * args.batch_size, args.seq_len + 1))
    loader = DataLoader(TensorDataset(tokens), batch_size=args.batch_size, shuffle=True)
    model = TextTransformer(args, grad_ckpt=args.grad_ckpt).cuda()
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    elif args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    amp = torch.autocast(device_type="cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
    scaler = torch.cuda.amp.GradScaler(enabled=args.precision == "fp16")
    for (batch,) in loader:
        batch = batch.cuda()
        with amp:
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


if __name__ == "__main__":
    main()
