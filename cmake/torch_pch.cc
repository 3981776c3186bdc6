// Translation unit that owns the shared LibTorch precompiled header
// (cmake/HlabTargets.cmake, hlab_torch_pch).
#include <torch/torch.h>
