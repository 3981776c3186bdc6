// The per-element loops of train/optimizer.h's fused AdamW step and gradient
// clipping, on raw memory: one pass per parameter tensor where LibTorch's
// AdamW::step makes ~10 ATen ops (each a dispatch and a pass over memory)
// and clip_grad_norm_ two. No LibTorch here. Private to train/.
//
// Exactness. AdamWUpdate computes every element as LibTorch 1.13's CPU
// AdamW::step does with its ATen kernels, rounding for rounding (checked
// bitwise in tests/train/optimizer_test.cc):
//   p  = p * (1 - lr wd)                       (p.mul_)
//   m  = fma(g, 1 - b1, m * b1)                (mul_, add_: ATen's add fuses)
//   v  = fma((1 - b2) g, g, v * b2)            (mul_, addcmul_)
//   p  = p + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)   (addcdiv_)
// with each scalar rounded to the element type first, as ATen does. The
// file is compiled with -ffp-contract=off, so that the compiler fuses no
// other product and sum.
//
// Thread-safety: pure functions of their arguments (they write only their
// outputs).
//
//   internal::AdamWScalars s = internal::MakeAdamWScalars(lr, b1, b2, eps,
//                                                         wd, step);
//   internal::AdamWUpdate(p, g, m, v, n, s);
#ifndef HLAB_TRAIN_INTERNAL_ADAMW_KERNEL_H_
#define HLAB_TRAIN_INTERNAL_ADAMW_KERNEL_H_

#include <cstdint>

namespace hlab::train::internal {

// A step's scalars, in double; the kernels round them to the element type.
struct AdamWScalars {
  double decay = 1;    // 1 - lr * weight_decay (1: no decay)
  double beta1 = 0.9;  // b1
  double one_minus_beta1 = 0.1;
  double beta2 = 0.95;  // b2
  double one_minus_beta2 = 0.05;
  double sqrt_bias_correction2 = 1;  // sqrt(1 - b2^step)
  double eps = 1e-8;
  double neg_step_size = 0;  // -lr / (1 - b1^step)
};

// step counts from 1 (the step being made).
AdamWScalars MakeAdamWScalars(double lr, double beta1, double beta2, double eps,
                              double weight_decay, int64_t step);

// One AdamW step of n elements: p, m (exp_avg), v (exp_avg_sq) in place
// from the gradient g.
void AdamWUpdate(float* p, const float* g, float* m, float* v, int64_t n,
                 const AdamWScalars& s);
void AdamWUpdate(double* p, const double* g, double* m, double* v, int64_t n,
                 const AdamWScalars& s);

// x[i] *= c (c rounded to the element type: ATen's mul_ by a 0-dim tensor).
void Scale(float* x, int64_t n, double c);
void Scale(double* x, int64_t n, double c);

}  // namespace hlab::train::internal

#endif  // HLAB_TRAIN_INTERNAL_ADAMW_KERNEL_H_
