"""A text classifier: a large embedding, but only ten output classes."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_len", type=int, default=512)
    parser.add_argument("--d_model", type=int, default=256)
    parser.add_argument("--n_heads", type=int, default=4)
    parser.add_argument("--grad_ckpt", action="store_true")
    return parser.parse_args()


class TextTransformer(nn.Module):
    def __init__(self, vocab_size=16000, d_model=512, n_heads=8, d_ff=2048, n_layers=6,
                 num_classes=10):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=n_layers)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.tok_emb(tokens)).mean(dim=1))


def checkpointed(model, tokens):
    return checkpoint(model, tokens, use_reentrant=False)


def main():
    args = parse_args()
    tokens = torch.randint(0, 16000, (4 * args.batch_size, args.seq_len))
    labels = torch.randint(0, 10, (4 * args.batch_size,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=args.batch_size)
    model = TextTransformer(d_model=args.d_model, n_heads=args.n_heads, d_ff=4 * args.d_model)
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for tokens, labels in loader:
        tokens = tokens.cuda()
        logits = checkpointed(model, tokens) if args.grad_ckpt else model(tokens)
        loss = F.cross_entropy(logits, labels.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
