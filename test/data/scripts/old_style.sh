#!/bin/sh
#SBATCH --ntasks=16
#SBATCH --mem-per-cpu=3G
#SBATCH --time=48:00:00
#SBATCH --partition=long
#SBATCH --error=job.err

# Legacy Fortran code, launched with srun
srun ./model.exe input.nml
