// The inverse of a unit-lower-triangular matrix by forward substitution on
// raw memory, shared by UnitLowerInverse (model/kernels/batched_matmul.cc) and
// the fused gated-delta kernel (model/kernels/gated_delta_fused.cc). Private to
// model/.
//
// Thread-safety: pure.
//
//   internal::InvertUnitLower(a, c, x);  // x = (I + strict_lower(a))^-1
#ifndef HLAB_MODEL_CPU_UNIT_LOWER_H_
#define HLAB_MODEL_CPU_UNIT_LOWER_H_

#include <algorithm>
#include <cstdint>

namespace hlab::model::internal {

// x (C x C, row-major) = (I + strict_lower(a))^-1 for a row-major C x C `a`
// (its diagonal and upper triangle are not read), by forward substitution:
// row i of x is e_i - sum_{j<i} a_ij x_j, and row j of x is zero past
// column j.
template <typename T>
void InvertUnitLower(const T* a, int64_t c, T* x) {
  for (int64_t i = 0; i < c; ++i) {
    T* xi = x + i * c;
    std::fill_n(xi, c, T(0));
    xi[i] = T(1);
    for (int64_t j = 0; j < i; ++j) {
      const T aij = a[i * c + j];
      const T* xj = x + j * c;
      for (int64_t col = 0; col <= j; ++col) xi[col] -= aij * xj[col];
    }
  }
}

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_UNIT_LOWER_H_
