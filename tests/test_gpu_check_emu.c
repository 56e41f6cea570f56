/* The GPU check's experiment (bench/gpu/check.yaml) end to end on the CUDA backend, run by
 * igen-emu (the CLI on the CUDA emulator, tests/cuda_emu) on the tiny OPT fixture: every point
 * (full with the rows gathered to the device, full with decode attention on the CPU, int4, h2o,
 * infinigen; two sequence lengths) must finish on the CUDA backend, and the dense points must move
 * exactly the bytes that the same experiment moves on the CPU backend (the byte accounting is the
 * same code; only where the data is computed differs). A GPU run of bench/gpu/check.sh exercises
 * the same plumbing at the OPT-6.7B shape. (InfiniGen reads everything here: its default
 * dense_layers=2 covers both layers of the fixture.) */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"

#define N_POINTS 10

typedef struct point {
    char label[256];
    char policy[32];
    char access[16];
    char backend[16];
    char gpu[128];
    double kv_h2d, kv_read;
    int ok;
} point;

/* Runs BIN over check.yaml on the tiny OPT model with backend B into DIR; reads its points. */
static int run_check(const char *bin, const char *backend, const char *dir, point *pts) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' run '%s/bench/gpu/check.yaml' --set model.path='%s' --set backend=%s "
             "--set 'workload.prompt_len=[24,56]' --set workload.gen_len=8 --output '%s' "
             "--quiet --no-plot > '%s.log' 2>&1",
             bin, IG_SOURCE_DIR, ig_test_fixture("tiny_opt"), backend, dir, dir);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "%s.log", dir);
        char *log = ig_test_slurp(cmd, NULL);
        fprintf(stderr, "igen run failed:\n%s\n", log ? log : "(no log)");
        free(log);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "%s/results.jsonl", dir);
    char *text = ig_test_slurp(cmd, NULL);
    if (!text) return -1;
    int n = 0;
    for (char *line = strtok(text, "\n"); line && n < N_POINTS + 1; line = strtok(NULL, "\n")) {
        json_object *r = json_tokener_parse(line), *v, *m, *c;
        if (!r) continue;
        point *p = &pts[n < N_POINTS ? n : N_POINTS - 1];
        memset(p, 0, sizeof *p);
        if (json_object_object_get_ex(r, "label", &v))
            snprintf(p->label, sizeof p->label, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(r, "status", &v))
            p->ok = !strcmp(json_object_get_string(v), "ok");
        if (json_object_object_get_ex(r, "config", &c)) {
            json_object *pol, *pl;
            if (json_object_object_get_ex(c, "policy", &pol) &&
                json_object_object_get_ex(pol, "name", &v))
                snprintf(p->policy, sizeof p->policy, "%s", json_object_get_string(v));
            if (json_object_object_get_ex(c, "placement", &pl) &&
                json_object_object_get_ex(pl, "kv_access", &v))
                snprintf(p->access, sizeof p->access, "%s", json_object_get_string(v));
        }
        if (json_object_object_get_ex(r, "machine", &m) && json_object_object_get_ex(m, "gpu", &v))
            snprintf(p->gpu, sizeof p->gpu, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(r, "metrics", &m)) {
            if (json_object_object_get_ex(m, "backend", &v))
                snprintf(p->backend, sizeof p->backend, "%s", json_object_get_string(v));
            if (json_object_object_get_ex(m, "kv_h2d_bytes", &v))
                p->kv_h2d = json_object_get_double(v);
            if (json_object_object_get_ex(m, "kv_read_fraction", &v))
                p->kv_read = json_object_get_double(v);
        }
        json_object_put(r);
        n++;
    }
    free(text);
    return n;
}

static void test_check_sweep(void) {
    static point cu[N_POINTS], cpu[N_POINTS];
    char emu[4096], igen[4096];
    snprintf(emu, sizeof emu, "%s/igen-emu", IG_BINARY_DIR);
    snprintf(igen, sizeof igen, "%s/igen", IG_BINARY_DIR);
    int n_cu = run_check(emu, "cuda", ig_test_fresh_dir("check-cuda"), cu);
    int n_cpu = run_check(igen, "cpu", ig_test_fresh_dir("check-cpu"), cpu);
    CU_ASSERT_EQUAL_FATAL(n_cu, N_POINTS);
    CU_ASSERT_EQUAL_FATAL(n_cpu, N_POINTS);
    int seen_cpu_access = 0, seen_sparse = 0;
    for (int i = 0; i < N_POINTS; i++) {
        const point *a = &cu[i], *b = &cpu[i];
        fprintf(stderr, "  %-60s cuda: %s %.0f B read %.3f | cpu: %.0f B read %.3f\n", a->label,
                a->ok ? "ok" : "FAILED", a->kv_h2d, a->kv_read, b->kv_h2d, b->kv_read);
        CU_ASSERT(a->ok);
        CU_ASSERT(b->ok);
        CU_ASSERT_STRING_EQUAL(a->label, b->label);
        CU_ASSERT_STRING_EQUAL(a->backend, "cuda");
        CU_ASSERT_STRING_EQUAL(b->backend, "cpu");
        CU_ASSERT(strstr(a->gpu, "emulator") != NULL); /* never passed off as a GPU */
        CU_ASSERT(a->kv_h2d > 0);
        /* dense points: the same rows move, so the same bytes */
        int dense = !strcmp(a->policy, "full") || !strcmp(a->policy, "int4");
        if (dense) {
            CU_ASSERT(a->kv_h2d == b->kv_h2d);
            CU_ASSERT(a->kv_read == 1.0);
        } else {
            CU_ASSERT(a->kv_read > 0.0 && a->kv_read <= 1.0);
        }
        if (!strcmp(a->access, "cpu")) seen_cpu_access = 1;
        if (!strcmp(a->policy, "h2o")) {
            seen_sparse = 1;
            CU_ASSERT(a->kv_read < 0.5); /* heavy 10% + recent 10% of the context */
        }
    }
    CU_ASSERT(seen_cpu_access);
    CU_ASSERT(seen_sparse);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("gpu_check_emu", NULL, NULL);
    CU_add_test(s, "bench/gpu/check.yaml on igen-emu (tiny OPT)", test_check_sweep);
}
