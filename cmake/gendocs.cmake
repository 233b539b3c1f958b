# Writes OUT/man/*.1.gz and OUT/rightsize.bash, OUT/_rightsize with `RIGHTSIZE gendocs`.
# Usage: cmake -DRIGHTSIZE=path/to/rightsize -DOUT=dir -P gendocs.cmake
file(REMOVE_RECURSE ${OUT}/man)
execute_process(COMMAND ${RIGHTSIZE} gendocs --man ${OUT}/man COMMAND_ERROR_IS_FATAL ANY)
file(GLOB pages ${OUT}/man/*.1)
execute_process(COMMAND gzip -9nf ${pages} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${RIGHTSIZE} gendocs --completion bash OUTPUT_FILE ${OUT}/rightsize.bash
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${RIGHTSIZE} gendocs --completion zsh OUTPUT_FILE ${OUT}/_rightsize
                COMMAND_ERROR_IS_FATAL ANY)
