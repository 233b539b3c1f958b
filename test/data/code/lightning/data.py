import torch
from torch.utils.data import Dataset


class RandomTokens(Dataset):
    def __init__(self, seq_len):
        self.seq_len = seq_len

    def __len__(self):
        return 10000

    def __getitem__(self, i):
        return torch.randint(0, 32000, (self.seq_len + 1,))
