// The CUDA emulator's stand-in for the toolkit's cuda_fp16.h (see cuda_emulator.hpp).
#pragma once
#include "cuda_emulator.hpp"
