import torch
from torch.utils.data import Dataset


class TextDataset(Dataset):
    def __init__(self, tokenizer, block_size=512, path="corpus.txt"):
        with open(path) as f:
            ids = tokenizer(f.read())["input_ids"]
        self.blocks = [ids[i : i + block_size] for i in range(0, len(ids) - block_size, block_size)]

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        return {"input_ids": torch.tensor(self.blocks[i])}
