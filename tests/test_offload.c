/* offload/: the KV home tier's entry tables (take, write, release, reuse, resident bytes, codecs)
 * and the transfer queue (jobs run in order, wait covers earlier tickets, inline mode). */
#include <math.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offload/acthome.h"
#include "offload/kv_home.h"
#include "offload/topo.h"
#include "offload/xfer.h"
#include "tests/test_util.h"

static void test_entries(void) {
    ig_kv_home_opts o = {2, 3, 2, 8, 4, {IG_KV_CODEC_F32, 0, 0}, NULL, -1, NULL, 0};
    ig_kv_home *h = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_kv_home_create(&o, &h, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_kv_home_row_bytes(h), 32);
    CU_ASSERT_EQUAL(ig_kv_home_allocated_bytes(h), 2u * 2 * 3 * 2 * 4 * 32);
    float k[8], v[8], kout[4 * 8], vout[4 * 8];
    for (int p = 0; p < 4; p++) {
        for (int i = 0; i < 8; i++) k[i] = (float)(p * 10 + i), v[i] = -k[i];
        int64_t e = ig_kv_home_take(h, 1, 2, 1);
        CU_ASSERT_EQUAL(e, p);
        ig_kv_home_write(h, 1, 2, 1, e, p, k, v);
    }
    CU_ASSERT_EQUAL(ig_kv_home_take(h, 1, 2, 1), -1); /* full */
    CU_ASSERT_EQUAL(ig_kv_home_n_used(h, 1, 2, 1), 4);
    CU_ASSERT_EQUAL(ig_kv_home_resident_bytes(h), 2u * 4 * 32);
    ig_kv_home_release(h, 1, 2, 1, 2);
    CU_ASSERT_EQUAL(ig_kv_home_pos(h, 1, 2, 1)[2], -1);
    CU_ASSERT_EQUAL(ig_kv_home_resident_bytes(h), 2u * 3 * 32);
    CU_ASSERT_EQUAL(ig_kv_home_take(h, 1, 2, 1), 2); /* the released entry is reused */
    for (int i = 0; i < 8; i++) k[i] = 99, v[i] = 98;
    ig_kv_home_write(h, 1, 2, 1, 2, 7, k, v);
    int32_t ent[2] = {2, 0};
    ig_kv_home_read(h, 1, 2, 1, ent, 2, kout, vout);
    CU_ASSERT_EQUAL(kout[0], 99);
    CU_ASSERT_EQUAL(vout[3], 98);
    CU_ASSERT_EQUAL(kout[8 + 5], 5);
    CU_ASSERT_EQUAL(vout[8 + 5], -5);
    CU_ASSERT_EQUAL(ig_kv_home_pos(h, 1, 2, 1)[2], 7);
    /* the split write: the bytes (no metadata change), then the position */
    int64_t e1 = ig_kv_home_take(h, 1, 2, 0);
    CU_ASSERT_EQUAL(e1, 0);
    ig_kv_home_write_rows(h, 1, 2, 0, e1, k, v);
    CU_ASSERT(ig_kv_home_pos(h, 1, 2, 0)[0] < 0); /* taken, position not yet set */
    ig_kv_home_set_pos(h, 1, 2, 0, e1, 3);
    CU_ASSERT_EQUAL(ig_kv_home_pos(h, 1, 2, 0)[0], 3);
    ig_kv_home_read(h, 1, 2, 0, ent + 1, 1, kout, vout);
    CU_ASSERT(memcmp(kout, k, sizeof k) == 0 && memcmp(vout, v, sizeof v) == 0);
    ig_kv_home_release(h, 1, 2, 0, e1);
    /* other tables untouched */
    CU_ASSERT_EQUAL(ig_kv_home_n_used(h, 1, 2, 0), 0);
    CU_ASSERT_EQUAL(ig_kv_home_n_used(h, 0, 2, 1), 0);
    ig_kv_home_reset_slot(h, 2);
    CU_ASSERT_EQUAL(ig_kv_home_n_used(h, 1, 2, 1), 0);
    CU_ASSERT_EQUAL(ig_kv_home_resident_bytes(h), 0);
    CU_ASSERT_EQUAL(ig_kv_home_take(h, 1, 2, 1), 0);
    ig_kv_home_free(h);
}

static void test_codecs(void) {
    ig_kv_codec f16 = {IG_KV_CODEC_F16, 0, 0};
    CU_ASSERT_EQUAL(ig_kv_codec_row_bytes(&f16, 64), 128);
    float x[64], y[64];
    uint16_t enc[64];
    for (int i = 0; i < 64; i++) x[i] = (float)i / 7.0f - 3.0f;
    ig_kv_codec_encode(&f16, x, 1, 64, enc);
    ig_kv_codec_decode(&f16, enc, 1, 64, y);
    for (int i = 0; i < 64; i++) CU_ASSERT(fabsf(x[i] - y[i]) <= fabsf(x[i]) * 1e-3f + 1e-6f);
    CU_ASSERT(!ig_kv_codec_is_exact(&f16));
    ig_kv_codec q4 = {IG_KV_CODEC_QUANT, 4, 64};
    CU_ASSERT_EQUAL(ig_kv_codec_row_bytes(&q4, 64), 4 + 32);
    ig_kv_home_opts bad = {1, 1, 1, 48, 4, {IG_KV_CODEC_QUANT, 4, 64}, NULL, -1, NULL, 0};
    ig_kv_home *h = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_kv_home_create(&bad, &h, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "head_dim 48"));
}

typedef struct job_arg {
    atomic_int *counter;
    int expect;
    int ok;
} job_arg;

static void job(void *p) {
    job_arg *a = p;
    usleep(1000);
    a->ok = atomic_fetch_add(a->counter, 1) == a->expect;
}

static void test_xfer(void) {
    for (int threads = 0; threads <= 1; threads++) {
        ig_xfer *q = NULL;
        ig_error err;
        CU_ASSERT_EQUAL_FATAL(ig_xfer_create(threads, &q, &err), IG_OK);
        atomic_int counter = 0;
        job_arg a[10];
        uint64_t last = 0;
        for (int i = 0; i < 10; i++) {
            a[i] = (job_arg){&counter, i, 0};
            uint64_t t = ig_xfer_submit(q, job, &a[i]);
            CU_ASSERT(t > last);
            last = t;
        }
        ig_xfer_wait(q, last);
        CU_ASSERT_EQUAL(atomic_load(&counter), 10);
        for (int i = 0; i < 10; i++) CU_ASSERT(a[i].ok); /* in order */
        /* a lower bound only: each job sleeps at least 1 ms, and a loaded machine only adds */
        CU_ASSERT(ig_xfer_busy_s(q) > 0.005);
        ig_xfer_free(q);
    }
}

/* The home's rows in NUMA-bound host memory (this machine's first node): rows round-trip, the
 * binding is reported, and a node the machine does not have is refused by name. */
static void test_numa_home(void) {
    ig_topo *t = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_topo_discover(&t, &err), IG_OK);
    int node = ig_topo_numa_at(t, 0)->os_index;
    ig_kv_home_opts o = {2, 2, 2, 8, 4, {IG_KV_CODEC_F32, 0, 0}, t, node, NULL, 0};
    ig_kv_home *h = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_kv_home_create(&o, &h, &err), IG_OK);
    float k[8], v[8], k2[8], v2[8];
    for (int i = 0; i < 8; i++) k[i] = (float)i, v[i] = (float)(10 - i);
    int64_t e = ig_kv_home_take(h, 1, 1, 1);
    ig_kv_home_write(h, 1, 1, 1, e, 0, k, v);
    int32_t ent = (int32_t)e;
    ig_kv_home_read(h, 1, 1, 1, &ent, 1, k2, v2);
    CU_ASSERT(memcmp(k, k2, sizeof k) == 0 && memcmp(v, v2, sizeof v) == 0);
    int bound = ig_kv_home_numa(h);
    printf("\n    KV rows bound to node %d (asked %d; -1 = the kernel refused binding)", bound,
           node);
    CU_ASSERT(bound == node || bound == -1);
    ig_kv_home_free(h);
    o.numa = 999;
    CU_ASSERT_NOT_EQUAL(ig_kv_home_create(&o, &h, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "999"));
    ig_topo_free(t);
    printf("\n    ");
}

/* Activations homed off the device: rows stored then loaded come back as they were, through host
 * memory or the disk file; each direction's bytes are counted; a span outside the home, or a disk
 * row without a disk, is refused with a message. */
static void test_act_home(void) {
    enum { N = 256 };
    static float dev[N], back[N];
    for (int i = 0; i < N; i++) dev[i] = (float)i * 0.5f - 3.0f;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/acthome", ig_test_tmpdir());
    mkdir(dir, 0700);
    ig_error err;
    ig_disk *d = NULL;
    CU_ASSERT_FATAL(ig_disk_create(dir, 0, 1, &d, &err) == IG_OK);
    for (int with_disk = 0; with_disk < 2; with_disk++) {
        ig_act_home *h = NULL;
        CU_ASSERT_EQUAL_FATAL(ig_act_home_create(sizeof dev, NULL, with_disk ? d : NULL, &h, &err),
                              IG_OK);
        size_t half = sizeof dev / 2;
        CU_ASSERT_EQUAL(ig_act_home_store(h, 0, dev, half, 0, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_act_home_store(h, half, dev + N / 2, half, with_disk, &err), IG_OK);
        memset(back, 0, sizeof back);
        CU_ASSERT_EQUAL(ig_act_home_load(h, 0, back, half, 0, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_act_home_load(h, half, back + N / 2, half, with_disk, &err), IG_OK);
        CU_ASSERT(memcmp(back, dev, sizeof dev) == 0);
        ig_act_home_stats st = ig_act_home_get_stats(h);
        CU_ASSERT(st.d2h_bytes == (double)sizeof dev && st.h2d_bytes == (double)sizeof dev);
        CU_ASSERT(st.disk_write_bytes == (with_disk ? (double)half : 0.0));
        CU_ASSERT(st.disk_read_bytes == (with_disk ? (double)half : 0.0));
        CU_ASSERT_EQUAL(ig_act_home_store(h, half + 4, dev, half, 0, &err), IG_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outside its"));
        if (!with_disk) {
            CU_ASSERT_EQUAL(ig_act_home_load(h, 0, back, 4, 1, &err), IG_ERR_INVALID_ARG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no disk file"));
        }
        ig_act_home_reset_stats(h);
        CU_ASSERT(ig_act_home_get_stats(h).d2h_bytes == 0);
        ig_act_home_free(h);
    }
    ig_disk_free(d);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("offload", NULL, NULL);
    CU_add_test(s, "kv_home_entries", test_entries);
    CU_add_test(s, "kv_codecs", test_codecs);
    CU_add_test(s, "xfer_queue", test_xfer);
    CU_add_test(s, "numa_home", test_numa_home);
    CU_add_test(s, "act_home", test_act_home);
}
