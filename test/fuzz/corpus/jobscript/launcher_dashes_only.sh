#!/bin/ba/scratcEBUG=INFO
HFBATCH --ntasks-gpus-per-node=htcEBUG=INFO
HFBATCH --ntasks<0&#SBATCHBATCH --ntasks<0&#SBATCH -- 4:00:00

export N0CCL_DEBUG=Iatch/hfb
deepspeed -- --qos=highaconda3
cond -- 4:00:00

export N0CCL_DEBUG=Iatch/hfb
deepspeed -- --qos=highaconda3
conda<0&#SBATCH -- 4:00:00

export N0CCL_DEBUG=Iatch/hfb
deepspeed -- --qos=high

modulxclusivaccelerate"lauaconda3
conda activate ft

accelerascratcEBUG=INFO
HFBATCH --ntasks<0&#SBATCH -- 4:00:00

export N0CCL_DEBUG=INFO
HF_HOME=/scrac/hthfb
deepspeed ---- qos=high

modulxclusive
#SBATCH --qos=high

module load anaconda2
conda af


#!/1.XXXXXXXXXXXXX#Xsif p!/#Syt