/* Fuzz harness: hardware profiles (offload/hwprof, ig_hwprof_load_string; the input is not
 * NUL-terminated). A profile that loads is saved with ig_hwprof_save and loaded back from the file,
 * and must come back with the same values (the round trip `igen profile-hw` relies on); it is also
 * turned into a machine and cost-model numbers. */
#include <stdio.h>
#include <string.h>

#include "offload/cost.h"
#include "offload/hwprof.h"
#include "tests/fuzz/fuzz_common.h"

static int same(const ig_hwprof *a, const ig_hwprof *b) {
    if (strcmp(a->name, b->name) || strcmp(a->description, b->description) ||
        strcmp(a->device.name, b->device.name))
        return 0;
    if (a->device.memory_gib != b->device.memory_gib ||
        a->device.gemm_tflops != b->device.gemm_tflops ||
        a->device.gemm_tflops_decode != b->device.gemm_tflops_decode ||
        a->device.mem_bandwidth_gbps != b->device.mem_bandwidth_gbps ||
        a->device.numa_node != b->device.numa_node ||
        a->device.gemm_tflops_layer != b->device.gemm_tflops_layer ||
        a->device.gemm_tflops_logits != b->device.gemm_tflops_logits ||
        strcmp(a->device.kernel_shape, b->device.kernel_shape) ||
        strcmp(a->device.matmul_shape, b->device.matmul_shape))
        return 0;
    if (a->host.memory_gib != b->host.memory_gib || a->host.n_numa != b->host.n_numa ||
        a->host.cpu_gflops != b->host.cpu_gflops ||
        a->host.mem_bandwidth_gbps != b->host.mem_bandwidth_gbps)
        return 0;
    for (int i = 0; i < a->host.n_numa; i++)
        if (a->host.numa[i].os_index != b->host.numa[i].os_index ||
            a->host.numa[i].memory_gib != b->host.numa[i].memory_gib)
            return 0;
    if (a->link.h2d_gbps != b->link.h2d_gbps || a->link.d2h_gbps != b->link.d2h_gbps ||
        a->link.h2d_latency_us != b->link.h2d_latency_us ||
        a->link.d2h_latency_us != b->link.d2h_latency_us)
        return 0;
    if (a->has_disk != b->has_disk) return 0;
    return !a->has_disk ||
           (a->disk.read_gbps == b->disk.read_gbps && a->disk.write_gbps == b->disk.write_gbps &&
            a->disk.capacity_gib == b->disk.capacity_gib);
}

int ig_fuzz_hwprof(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    static ig_hwprof p, q; /* 3 KB each: off the stack */
    ig_error err;
    ig_error_clear(&err);
    if (ig_hwprof_load_string((const char *)data, size, "fuzz.yaml", &p, &err) != IG_OK) return 0;
    ig_fuzz_n_loaded++;
    if (p.host.n_numa < 1 || p.host.n_numa > IG_MAX_NUMA)
        ig_fuzz_fail("hwprof", "a loaded profile with a NUMA node count out of range");
    char path[4200];
    snprintf(path, sizeof path, "%s/hw.yaml", ig_fuzz_dir());
    if (ig_hwprof_save(&p, path, "fuzz_hwprof round trip\nsecond line", &err) != IG_OK)
        ig_fuzz_fail("hwprof", "ig_hwprof_save failed on a loaded profile");
    if (ig_hwprof_load(path, &q, &err) != IG_OK) {
        fprintf(stderr, "fuzz_hwprof: %s\n", err.msg);
        ig_fuzz_fail("hwprof", "a saved profile does not load back");
    }
    if (!same(&p, &q)) ig_fuzz_fail("hwprof", "a saved profile loads back with other values");
    ig_machine m;
    memset(&m, 0, sizeof m);
    ig_hwprof_to_machine(&p, &m);
    ig_cost_hw hw;
    ig_cost_hw_from_profile(&p, &hw);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_hwprof)
