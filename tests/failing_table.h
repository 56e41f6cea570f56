/* A backend table for tests of the policies' fallback: a copy of a working table whose top-k fails
 * (IG_ERR_DEVICE, "topk: failed on purpose (test)"); every other op is the base table's. */
#ifndef IG_TEST_FAILING_TABLE_H
#define IG_TEST_FAILING_TABLE_H

#include "kernels/backend_iface.h"

static inline ig_status ig_test_failing_topk(ig_be *be, const float *x, int64_t ldx, int rows,
                                             int64_t n, const int32_t *n_rows, int64_t k,
                                             const int32_t *k_rows, int32_t *idx, int64_t ld_idx,
                                             int32_t *counts, ig_error *err) {
    (void)be, (void)x, (void)ldx, (void)rows, (void)n, (void)n_rows, (void)k, (void)k_rows;
    (void)idx, (void)ld_idx, (void)counts;
    return ig_error_set(err, IG_ERR_DEVICE, "topk: failed on purpose (test)");
}

/* Fills *iface and *be (the caller's storage, alive while be is used) from base. */
static inline void ig_test_failing_table(const ig_be *base, ig_be_iface *iface, struct ig_be *be) {
    *iface = *base->iface;
    iface->topk = ig_test_failing_topk;
    *be = *base;
    be->iface = iface;
}

#endif
