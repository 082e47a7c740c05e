// The CUDA emulator's stand-in for the toolkit's cuda_runtime.h (see cuda_emulator.hpp).
#pragma once
#include "cuda_emulator.hpp"
