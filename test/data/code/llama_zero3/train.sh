#!/bin/bash
#SBATCH --job-name=llama7b-zero3
#SBATCH --nodes=1
#SBATCH --gres=gpu:h100:8
#SBATCH --cpus-per-task=64
#SBATCH --time=24:00:00
export MASTER_PORT=29500
deepspeed --num_gpus 8 finetune.py --deepspeed ds_config.json --max_seq_length 2048
