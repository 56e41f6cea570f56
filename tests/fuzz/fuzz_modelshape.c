/* Fuzz harness: model shapes (offload/modelshape, ig_model_shape_load_string; the input is not
 * NUL-terminated). A shape that loads is planned (offload/plan) for a short workload on a machine
 * large enough for any accepted shape, so that the planner's byte counts see every shape the
 * loader lets through. */
#include <string.h>

#include "offload/modelshape.h"
#include "offload/plan.h"
#include "tests/fuzz/fuzz_common.h"

int ig_fuzz_modelshape(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    ig_model_shape s;
    ig_error err;
    ig_error_clear(&err);
    if (ig_model_shape_load_string((const char *)data, size, "fuzz.yaml", &s, &err) != IG_OK)
        return 0;
    ig_fuzz_n_loaded++;
    const ig_model_config *c = &s.config;
    if (c->n_layer < 1 || c->d_model < 1 || c->n_head < 1 || c->n_kv_head < 1 || c->vocab < 1)
        ig_fuzz_fail("modelshape", "a loaded shape with a non-positive size");
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = s.config;
    o.weight_dtype = s.weight_dtype;
    o.wl = (ig_workload){16, 2, 1, 1};
    ig_machine m;
    memset(&m, 0, sizeof m);
    m.device_bytes = (size_t)1 << 60;
    m.n_numa = 1;
    m.numa_bytes[0] = (size_t)1 << 60;
    m.device_numa = 0;
    ig_plan *p = NULL;
    if (ig_plan_create(&o, &m, &p, &err) == IG_OK) {
        (void)ig_plan_get_usage(p);
        (void)ig_plan_outer_bytes(p);
        (void)ig_plan_kv_bytes_per_sequence(p);
        (void)ig_plan_layer(p, 0);
        ig_plan_free(p);
    }
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_modelshape)
