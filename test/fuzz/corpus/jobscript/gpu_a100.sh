#!/bin/bash
#SBATCH --job-name=llm-finetune
#SBATCH --gres=gpu:a100:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=256G
#SBATCH --time=2-00:00
#SBATCH --constraint=a100_80gb
#SBATCH --exclusive
#SBATCH --qos=high

module load anaconda3
conda activate ft

accelerate launch --multi_gpu --num_processes 4 --mixed_precision bf16 \
  finetune.py --model llama-7b --lr 2e-5
