#!/bin/bash
#SBATCH --gres=gpu:1
python train.py --d_model 256 --optimizer sgd
