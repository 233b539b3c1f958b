import lightning as L
from torch.utils.data import DataLoader

from model import TinyTransformer
from data import RandomTokens

SEQ_LEN = 512


def main():
    model = TinyTransformer(vocab_size=32000, d_model=512, nhead=8, num_layers=6)
    loader = DataLoader(RandomTokens(SEQ_LEN), batch_size=32, num_workers=4)
    trainer = L.Trainer(devices=2, strategy="ddp", precision="bf16-mixed", max_epochs=1)
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
