# cmake -DSRC=file.cu -DDST=file.cpp -P rewrite_launches.cmake
# `kernel<<<grid, block[, shared[, stream]]>>>(args)` becomes
# `kernel * ::cuda_emulator::launch_at(__FILE__, __LINE__, grid, block[, ...])(args)`;
# the rest of the file is unchanged, and #line keeps diagnostics on the .cu's lines.
file(READ "${SRC}" text)
string(REPLACE "<<<" " * ::cuda_emulator::launch_at(__FILE__, __LINE__, " text "${text}")
string(REPLACE ">>>" ")" text "${text}")
file(WRITE "${DST}.tmp" "#include <cuda_runtime.h>\n#line 1 \"${SRC}\"\n${text}")
file(COPY_FILE "${DST}.tmp" "${DST}" ONLY_IF_DIFFERENT)
file(REMOVE "${DST}.tmp")
