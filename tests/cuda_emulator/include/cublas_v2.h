// The CUDA emulator's stand-in for the toolkit's cublas_v2.h (see cuda_emulator.hpp).
#pragma once
#include "cuda_emulator.hpp"
