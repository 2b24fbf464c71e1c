// The kernels as the CUDA implementations of the `sightline::` operators, whose schemas (and CPU
// reference implementations) the model library defines (reference_ops.cpp): what fused_ops.cpp
// calls and what a profile shows as the op's name.
#include "ops.h"

#include <torch/library.h>

TORCH_LIBRARY_IMPL(sightline, CUDA, m) {
    using namespace sightline::kernels;
    m.impl("rms_norm_fwd", &rmsNormForward);
    m.impl("rms_norm_bwd", &rmsNormBackward);
    m.impl("add_rms_norm_fwd", &addRmsNormForward);
    m.impl("add_rms_norm_bwd", &addRmsNormBackward);
    m.impl("gated_rms_norm_fwd", &gatedRmsNormForward);
    m.impl("gated_rms_norm_bwd", &gatedRmsNormBackward);
    m.impl("swiglu_fwd", &swigluForward);
    m.impl("swiglu_bwd", &swigluBackward);
    m.impl("rotary", &rotary);
    m.impl("causal_conv1d_silu_fwd", &causalConv1dSiluForward);
    m.impl("causal_conv1d_silu_bwd", &causalConv1dSiluBackward);
    m.impl("linear_cross_entropy", &linearCrossEntropy);
    m.impl("gdn_fwd", &gdnForward);
    m.impl("gdn_bwd", &gdnBackward);
    m.impl("adamw_", &adamwStep);
    m.impl("grad_norm", &gradNorm);
}
