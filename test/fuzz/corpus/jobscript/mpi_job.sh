#!/bin/bash -l
#SBATCH -J lammps-melt
#SBATCH -N 4
#SBATCH -n 128
#SBATCH -t 12:00:00
#SBATCH -p compute
#SBATCH -A chem123
#SBATCH --mem-per-cpu=2000

ml gcc/12.2 openmpi/4.1.5 lammps/2023

cd $SLURM_SUBMIT_DIR
mpirun -np $SLURM_NTASKS --map-by core --bind-to core lmp -in in.melt > melt.log 2>&1
