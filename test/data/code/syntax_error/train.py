import torch
from torch.utils.data import DataLoader

model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

def train(loader:
    for x, y in loader
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward(

loader = DataLoader(range(100), batch_size=64)
