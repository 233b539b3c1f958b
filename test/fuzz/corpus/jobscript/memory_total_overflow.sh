#2/biSte
#SBATCH -=tSBSBATCH --time=0-0#!/bin/b-mem=4 lammpsH -0:-me#!/bin/bash
#SBATCH TCH --time=1-0#!/b -N 4
#Sÿûÿÿ-0#!/bi0:4
#SBATCH--mem=480G
#SBATCH --time=1-0#!/bin/j-mem=480G
#00:4
#SBATCH --mem=480G
#SBATCH --time=1-0#CH --mem=480G
#00:4
#SBATCH--mem=480G
#SBATCH --time=1-0#bin/b-mem=480G
#00:4
#SBATCH --time=1-0#CH --mem=480G
#00:4
#SBATCH--mem=480G
#SBATCH --time=1-0#bin/b--=tSBSBATCH --time=0-0#!/bin/b-mem=4 lammpsH -0:-me#!/bin/bash
#SBATCH TCH --time=1-0#!/b -N 4
#Sÿûÿÿ-0#!/bi0:4
#SBATCH--mem=480G
#SBATCH --time=1-0#!/bin/j-mem=480G
#00:4
#SBATCH --mem=480G
#SBATCH --time=1-0#CH --mem=480G
#00:4
#SBATCH--mem=480G
#SBATCH --time=1-0#bin/b-mem=480G
#00:4
#SBATCH --time=1-0#CH --mem=480G
#00:4
#SBATCH--mem=480G
#SBATCH --time=1-0#bin/b-mem=480G
#00:4
#SBmem=480G
#00:4
#SBATCH --mem=480G
#SBATCH --time=1-0#!/bin/bash -l
#SBATCn/bseeeeeeeeeeeeeeh
#SBATCH --nodes=422222222 3;mo1