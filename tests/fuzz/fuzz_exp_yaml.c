/* Fuzz harness: experiment files with --set overrides (core/app/exp, ig_exp_load). The input is the
 * YAML file; each of its lines "# set: KEY=VALUE" (at most IG_FUZZ_MAX_SETS, a YAML comment to the
 * file itself) is also passed as a --set string, as the bad-experiment corpus (tests/fixtures/exp/
 * bad) writes them. Relative references resolve from tests/fixtures/exp/good (IGEN_HOME, see
 * ig_fuzz_init). An experiment that loads has every point's settings, label, key and canonical
 * config read and its point list printed (to /dev/null). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/exp/exp.h"
#include "tests/fuzz/fuzz_common.h"

#define IG_FUZZ_MAX_SETS 4
#define SET_PREFIX       "# set: "
/* Points whose settings are read one by one (the list printed covers all of them). */
#define MAX_POINTS_USED 256

static void use(const ig_exp *e) {
    (void)ig_exp_name(e);
    (void)ig_exp_output_dir(e);
    (void)ig_exp_path(e);
    int n_axes = ig_exp_n_axes(e);
    for (int i = 0; i < n_axes; i++) {
        if (!ig_exp_axis_name(e, i)) ig_fuzz_fail("exp_yaml", "an axis without a name");
        if (ig_exp_axis_len(e, i) < 1) ig_fuzz_fail("exp_yaml", "an axis of no values");
    }
    int n = ig_exp_n_points(e);
    if (n < 1 || n > IG_EXP_MAX_POINTS) ig_fuzz_fail("exp_yaml", "point count out of range");
    for (int i = 0; i < n && i < MAX_POINTS_USED; i++) {
        ig_exp_point p;
        if (ig_exp_point_get(e, i, &p) != IG_OK) ig_fuzz_fail("exp_yaml", "a point cannot be read");
        if (p.index != i || !p.key || !p.label || !p.policy)
            ig_fuzz_fail("exp_yaml", "a point without its index, key, label or policy");
        for (int k = 0; k < p.n_settings; k++)
            if (!p.settings[k]) ig_fuzz_fail("exp_yaml", "a NULL policy setting");
        char key[17];
        ig_exp_point_key(e, i, key);
        if (strcmp(key, p.key) != 0) ig_fuzz_fail("exp_yaml", "the point's key changed");
        (void)ig_exp_point_label(e, i);
        char *canon = ig_exp_canonical_json(ig_exp_point_config(e, i));
        free(canon);
    }
    ig_exp_point p;
    if (ig_exp_point_get(e, n, &p) == IG_OK)
        ig_fuzz_fail("exp_yaml", "ig_exp_point_get accepted an index past the last point");
    static FILE *null_out;
    if (!null_out) null_out = fopen("/dev/null", "w");
    if (null_out) ig_exp_print_points(e, null_out);
}

int ig_fuzz_exp_yaml(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    char path[4200];
    ig_fuzz_write("exp.yaml", data, size, path, sizeof path);
    char *sets[IG_FUZZ_MAX_SETS];
    int n_sets = 0;
    const size_t plen = strlen(SET_PREFIX);
    for (size_t i = 0; i < size && n_sets < IG_FUZZ_MAX_SETS;) {
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        size_t end = nl ? (size_t)(nl - data) : size;
        if (end - i >= plen && !memcmp(data + i, SET_PREFIX, plen)) {
            size_t l = end - i - plen;
            char *s = malloc(l + 1);
            if (!s) break;
            memcpy(s, data + i + plen, l);
            s[l] = '\0'; /* a NUL inside cuts the string, as on a command line */
            sets[n_sets++] = s;
        }
        i = end + 1;
    }
    ig_exp *e = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_exp_load(path, (const char *const *)sets, n_sets, &e, &err) == IG_OK) {
        ig_fuzz_n_loaded++;
        use(e);
        ig_exp_free(e);
    } else if (e) {
        ig_fuzz_fail("exp_yaml", "ig_exp_load failed but returned an experiment");
    }
    for (int i = 0; i < n_sets; i++) free(sets[i]);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_exp_yaml)
