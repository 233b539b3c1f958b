#!/bin/bash
#SBATCH --time=01:00:00
#SBATCH --mem=4G

echo "starting on $(hostname)"
#SBATCH --mem=64G
#SBATCH --cpus-per-task=16
python analyse.py data.csv
