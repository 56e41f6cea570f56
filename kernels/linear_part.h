/* One matrix of a multi-matrix linear (ig_cpu_linear_multi, ig_be_linear_multi): y[M][N] = x W^T
 * (+ bias), x shared by all the matrices of the call. Plain data, shared by the CPU kernels and the
 * backend interface. */
#ifndef IG_LINEAR_PART_H
#define IG_LINEAR_PART_H

#include <stdint.h>

/* Matrices in one call at most. */
#define IG_LINEAR_MULTI_MAX 8

typedef struct ig_linear_part {
    const void *W;
    int64_t N;
    const float *bias;
    float *y;
} ig_linear_part;

#endif
