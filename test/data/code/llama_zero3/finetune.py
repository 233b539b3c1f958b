import argparse

import deepspeed
import torch
from transformers import AutoModelForCausalLM

MODEL = "meta-llama/Llama-2-7b-hf"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed", default="ds_config.json")
    parser.add_argument("--max_seq_length", type=int, default=1024)
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    model.gradient_checkpointing_enable()
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=args.deepspeed
    )
    for batch in loader(args.max_seq_length):
        loss = engine(**batch).loss
        engine.backward(loss)
        engine.step()


def loader(seq_len):
    while True:
        yield {"input_ids": torch.randint(0, 32000, (4, seq_len)).cuda()}


if __name__ == "__main__":
    main()
