/* offload/topo and offload/hostmem: topologies from hand-written hwloc XML fixtures (two sockets,
 * a GPU on each node; a PCI-only GPU of unknown locality), hwloc's own XML files when the shared
 * data is present, synthetic strings, bad input with the path in the message, NUMA-bound host
 * memory and its fallback, and `igen topo`. Only test_this_machine and the binding check depend
 * on the build machine, and only for consistency. */
#include <fcntl.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>

#include "core/base/log.h"
#include "offload/hostmem.h"
#include "offload/topo.h"
#include "tests/test_util.h"

#define GIB ((size_t)1 << 30)

static ig_topo *load_fixture(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s", ig_test_fixture(name));
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_topo_load_xml(path, &t, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    return t;
}

static const char *write_tmp(const char *name, const char *data, size_t n) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s", ig_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    return path;
}

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[len] = '\0';
    fclose(f);
    if (n) *n = (size_t)len;
    return buf;
}

/* ---- the two-socket, two-GPU fixture --------------------------------------------------------- */

static void test_fixture_two_socket(void) {
    ig_topo *t = load_fixture("topo/two_socket_two_gpu.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(ig_topo_source_kind(t), IG_TOPO_SRC_XML);
    CU_ASSERT_PTR_NOT_NULL(strstr(ig_topo_source_desc(t), "two_socket_two_gpu.xml"));
    CU_ASSERT_EQUAL(ig_topo_is_this_system(t), 0);
    CU_ASSERT_EQUAL(ig_topo_n_packages(t), 2);
    CU_ASSERT_EQUAL(ig_topo_n_cores(t), 4);
    CU_ASSERT_EQUAL(ig_topo_n_pus(t), 8);
    CU_ASSERT_EQUAL(ig_topo_n_numa(t), 2);
    for (int i = 0; i < 2 && ig_topo_n_numa(t) == 2; i++) {
        const ig_topo_numa *n = ig_topo_numa_at(t, i);
        CU_ASSERT_EQUAL(n->os_index, i);
        CU_ASSERT_EQUAL(n->local_bytes, 64 * GIB);
        CU_ASSERT_EQUAL(n->n_cores, 2);
        CU_ASSERT_EQUAL(n->n_pus, 4);
        CU_ASSERT_EQUAL(n->package, i);
    }
    CU_ASSERT_PTR_NULL(ig_topo_numa_at(t, 2));
    CU_ASSERT_EQUAL(ig_topo_total_memory(t), 128 * GIB);
    CU_ASSERT_EQUAL(ig_topo_numa_find(t, 1), 1);
    CU_ASSERT_EQUAL(ig_topo_numa_find(t, 7), -1);

    CU_ASSERT_EQUAL_FATAL(ig_topo_n_gpus(t), 2);
    const ig_topo_gpu *g0 = ig_topo_gpu_at(t, 0), *g1 = ig_topo_gpu_at(t, 1);
    CU_ASSERT_EQUAL(g0->cuda_index, 0);
    CU_ASSERT_EQUAL(g0->numa, 0);
    CU_ASSERT_STRING_EQUAL(g0->pci_bus_id, "0000:17:00.0");
    CU_ASSERT_EQUAL(g1->cuda_index, 1);
    CU_ASSERT_EQUAL(g1->numa, 1); /* the point of the fixture: cuda1 hangs off node 1 */
    CU_ASSERT_STRING_EQUAL(g1->pci_bus_id, "0000:97:00.0");
    CU_ASSERT_EQUAL(g1->pci_vendor, 0x10de);
    CU_ASSERT_EQUAL(g1->pci_device, 0x2330);
    CU_ASSERT_STRING_EQUAL(g1->name, "NVIDIA H100 80GB HBM3");
    CU_ASSERT_EQUAL(g1->memory_bytes, 80 * GIB);
    CU_ASSERT_STRING_EQUAL(g1->os_devices, "cuda1,nvml1");
    CU_ASSERT_EQUAL(ig_topo_gpu_find_cuda(t, 1), 1);
    CU_ASSERT_EQUAL(ig_topo_gpu_find_cuda(t, 2), -1);
    CU_ASSERT_PTR_NULL(ig_topo_gpu_at(t, 2));

    ig_machine m;
    memset(&m, 0x5a, sizeof m);
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 1, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, 1);
    CU_ASSERT_EQUAL(m.n_numa, 2);
    CU_ASSERT_EQUAL(m.numa_os[0], 0);
    CU_ASSERT_EQUAL(m.numa_os[1], 1);
    CU_ASSERT_EQUAL(m.numa_bytes[1], 64 * GIB);
    CU_ASSERT_EQUAL(m.device_bytes, 0);
    CU_ASSERT_EQUAL(m.disk_bytes, 0);
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 0, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, 0);
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, -1, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, 0); /* no GPU chosen: the first node */
    m.device_numa = 42;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 2, &m), IG_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(m.device_numa, 42); /* untouched on error */
    ig_topo_free(t);
}

static void test_fixture_pci_only_gpu(void) {
    ig_topo *t = load_fixture("topo/gpu_on_machine_no_cuda.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(ig_topo_n_numa(t), 2);
    CU_ASSERT_EQUAL(ig_topo_numa_at(t, 1)->local_bytes, 32 * GIB);
    /* the NVIDIA display controller counts, the Ethernet controller does not */
    CU_ASSERT_EQUAL_FATAL(ig_topo_n_gpus(t), 1);
    const ig_topo_gpu *g = ig_topo_gpu_at(t, 0);
    CU_ASSERT_EQUAL(g->cuda_index, -1);
    CU_ASSERT_EQUAL(g->numa, -1); /* host bridge on the machine, two nodes below: unknown */
    CU_ASSERT_STRING_EQUAL(g->pci_bus_id, "0000:01:00.0");
    CU_ASSERT_STRING_EQUAL(g->name, "AD102 [GeForce RTX 4090]");
    CU_ASSERT_EQUAL(g->memory_bytes, 0);
    CU_ASSERT_EQUAL(ig_topo_gpu_find_cuda(t, 0), -1);
    ig_machine m;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 0, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, -1);
    ig_topo_free(t);
}

static void test_print_and_json(void) {
    ig_topo *t = load_fixture("topo/two_socket_two_gpu.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ig_topo_print(t, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "packages    2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "64.0 GiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "cuda1  0000:97:00.0  1"));
    free(text);

    json_object *o = ig_topo_to_json(t);
    /* through text and back, as a consumer of `igen topo --json` sees it */
    json_object *p = json_tokener_parse(json_object_to_json_string(o));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    json_object *v, *nodes, *gpus;
    CU_ASSERT(json_object_object_get_ex(p, "source_kind", &v) &&
              !strcmp(json_object_get_string(v), "xml"));
    CU_ASSERT(json_object_object_get_ex(p, "this_system", &v) && !json_object_get_boolean(v));
    CU_ASSERT(json_object_object_get_ex(p, "packages", &v) && json_object_get_int(v) == 2);
    CU_ASSERT_FATAL(json_object_object_get_ex(p, "numa_nodes", &nodes));
    CU_ASSERT_EQUAL(json_object_array_length(nodes), 2);
    json_object *n1 = json_object_array_get_idx(nodes, 1);
    CU_ASSERT(json_object_object_get_ex(n1, "memory_bytes", &v) &&
              json_object_get_int64(v) == (int64_t)(64 * GIB));
    CU_ASSERT_FATAL(json_object_object_get_ex(p, "gpus", &gpus));
    CU_ASSERT_EQUAL_FATAL(json_object_array_length(gpus), 2);
    json_object *g1 = json_object_array_get_idx(gpus, 1);
    CU_ASSERT(json_object_object_get_ex(g1, "numa", &v) && json_object_get_int(v) == 1);
    CU_ASSERT(json_object_object_get_ex(g1, "pci_bus_id", &v) &&
              !strcmp(json_object_get_string(v), "0000:97:00.0"));
    CU_ASSERT(json_object_object_get_ex(g1, "os_devices", &v) && json_object_array_length(v) == 2 &&
              !strcmp(json_object_get_string(json_object_array_get_idx(v, 0)), "cuda1"));
    json_object_put(p);
    json_object_put(o);
    ig_topo_free(t);
}

/* ---- hwloc's own XML files (../shared/data/hwloc, not in the repository) --------------------- */

static void test_shared_hwloc_files(void) {
    const char *p32 = ig_test_shared("hwloc/32em64t-2n8c2t-pci-normalio.xml");
    if (!p32) {
        fprintf(stderr, "\n    note: shared data absent, hwloc's XML files not checked ");
        return;
    }
    ig_topo *t = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_xml(p32, &t, &err), IG_OK);
    /* README: 2 packages, 2 NUMA nodes of 32 GiB, 8 cores x 2 threads per package, one cuda0 */
    CU_ASSERT_EQUAL(ig_topo_n_packages(t), 2);
    CU_ASSERT_EQUAL(ig_topo_n_cores(t), 16);
    CU_ASSERT_EQUAL(ig_topo_n_pus(t), 32);
    CU_ASSERT_EQUAL_FATAL(ig_topo_n_numa(t), 2);
    for (int i = 0; i < 2; i++) {
        const ig_topo_numa *n = ig_topo_numa_at(t, i);
        CU_ASSERT(n->local_bytes > 31 * GIB + GIB / 2 && n->local_bytes <= 32 * GIB);
        CU_ASSERT_EQUAL(n->n_cores, 8);
        CU_ASSERT_EQUAL(n->n_pus, 16);
    }
    int c0 = ig_topo_gpu_find_cuda(t, 0);
    CU_ASSERT_FATAL(c0 >= 0);
    CU_ASSERT_EQUAL(c0, 0); /* CUDA devices come first */
    const ig_topo_gpu *g = ig_topo_gpu_at(t, c0);
    CU_ASSERT_STRING_EQUAL(g->pci_bus_id, "0000:84:00.0");
    CU_ASSERT_EQUAL(g->numa, 1);
    CU_ASSERT_STRING_EQUAL(g->name, "Tesla K40m");
    /* the file also has two NVIDIA 3D controllers without a cudaN OS device: listed, marked */
    int cuda = 0, pci_only = 0;
    for (int i = 0; i < ig_topo_n_gpus(t); i++) {
        cuda += ig_topo_gpu_at(t, i)->cuda_index >= 0;
        pci_only += ig_topo_gpu_at(t, i)->cuda_index < 0;
    }
    CU_ASSERT_EQUAL(cuda, 1);
    CU_ASSERT_EQUAL(pci_only, 2);
    ig_machine m;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, c0, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, 1);
    ig_topo_free(t);

    const char *pp8 = ig_test_shared("hwloc/power8gpudistances.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pp8);
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_xml(pp8, &t, &err), IG_OK);
    /* README: POWER8, 2 NUMA nodes (64 GB each), 4 GPUs cuda0..cuda3 with nvml0..nvml3 */
    CU_ASSERT_EQUAL_FATAL(ig_topo_n_numa(t), 2);
    for (int i = 0; i < 2; i++) {
        size_t b = ig_topo_numa_at(t, i)->local_bytes;
        CU_ASSERT(b > 63 * GIB && b <= 64 * GIB);
    }
    CU_ASSERT_EQUAL_FATAL(ig_topo_n_gpus(t), 4);
    for (int i = 0; i < 4; i++) {
        const ig_topo_gpu *x = ig_topo_gpu_at(t, i);
        char nvml[16];
        snprintf(nvml, sizeof nvml, "nvml%d", i);
        CU_ASSERT_EQUAL(x->cuda_index, i);
        CU_ASSERT_EQUAL(x->numa, i < 2 ? 0 : 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(x->os_devices, nvml));
        CU_ASSERT_STRING_EQUAL(x->name, "Tesla P100-SXM2-16GB");
    }
    ig_topo_free(t);
}

/* ---- synthetic ------------------------------------------------------------------------------- */

static void test_synthetic(void) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_synthetic("pack:2 numa:1 core:4 pu:2", &t, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_topo_source_kind(t), IG_TOPO_SRC_SYNTHETIC);
    CU_ASSERT_STRING_EQUAL(ig_topo_source_desc(t), "pack:2 numa:1 core:4 pu:2");
    CU_ASSERT_EQUAL(ig_topo_is_this_system(t), 0);
    CU_ASSERT_EQUAL(ig_topo_n_packages(t), 2);
    CU_ASSERT_EQUAL(ig_topo_n_numa(t), 2);
    CU_ASSERT_EQUAL(ig_topo_n_cores(t), 8);
    CU_ASSERT_EQUAL(ig_topo_n_pus(t), 16);
    CU_ASSERT_EQUAL(ig_topo_n_gpus(t), 0);
    for (int i = 0; i < ig_topo_n_numa(t); i++) {
        CU_ASSERT_EQUAL(ig_topo_numa_at(t, i)->n_cores, 4);
        CU_ASSERT_EQUAL(ig_topo_numa_at(t, i)->n_pus, 8);
        CU_ASSERT_EQUAL(ig_topo_numa_at(t, i)->package, i);
    }
    ig_machine m;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 0, &m), IG_OK); /* no GPU: the first node */
    CU_ASSERT_EQUAL(m.device_numa, 0);
    CU_ASSERT_EQUAL(m.n_numa, 2);
    ig_topo_free(t);

    /* four nodes in one package, two per group */
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_synthetic("pack:1 group:2 numa:2 core:2 pu:1", &t, &err),
                          IG_OK);
    CU_ASSERT_EQUAL(ig_topo_n_numa(t), 4);
    CU_ASSERT_EQUAL(ig_topo_numa_at(t, 3)->os_index, 3);
    CU_ASSERT_EQUAL(ig_topo_numa_at(t, 3)->package, 0);
    ig_topo_free(t);

    const char *bad[] = {"pack:2 bogus:3", "pack:2 core", "core:x pu:2", "pack:2 pu:2 core:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ig_error_clear(&err);
        t = (ig_topo *)&err; /* must be reset to NULL */
        CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic(bad[i], &t, &err), IG_OK);
        CU_ASSERT_PTR_NULL(t);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i]));
    }
    ig_topo_load_synthetic("pack:2 bogus:3", &t, &err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'bogus' is not an hwloc object type"));
    /* counts read as hwloc reads them (base 0: octal 0030320 = 12496 PUs under one parent, over
     * the arity bound), and no separator the bound's scan would miss (the fuzzer's 36 s input) */
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("pack:1 pu:0030320", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "under one parent"));
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("1pu:\v\v0030320", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "control character 0x0b at offset 4"));
    /* hwloc reads on after base 0's digits: "0383822" is 03 then a level of 83822 */
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("0383822", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "level '0383822' at offset 0"));
    /* a group in parentheses or brackets hides no level from the bound: hwloc reads "()8960" as
     * 8960 PUs (the fuzzer's 10 s input), and a level's attributes may be followed by another */
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("()8960", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a level of 8960 objects under one parent"));
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("[numa]8960", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a level of 8960 objects under one parent"));
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("pack:2()8960", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "asks for more than"));
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_synthetic("pack:2 [numa(memory=1GB)] core:2 pu:2", &t, &err),
                          IG_OK);
    CU_ASSERT_EQUAL(ig_topo_n_pus(t), 8);
    ig_topo_free(t);
    CU_ASSERT_NOT_EQUAL(ig_topo_load_synthetic("pack:2 core:2a", &t, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "level 'core:2a' at offset 7"));
    CU_ASSERT_EQUAL_FATAL(ig_topo_load_synthetic("pack:2 core:0x10 pu:2", &t, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_topo_n_numa(t), 1);
    CU_ASSERT_EQUAL(ig_topo_numa_at(t, 0)->n_pus, 64);
    ig_topo_free(t);
}

/* ---- per-node counts against hwloc's own ---------------------------------------------------- */

/* The cores and PUs of every NUMA node as hwloc counts them (objects inside the node's cpuset),
 * computed here from a topology hwloc loads itself, against what ig_topo extracted (summed
 * bottom-up since the fuzzer found the per-node count quadratic). */
static void check_counts_against_hwloc(const ig_topo *t, hwloc_topology_t hw, const char *what) {
    int nn = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    CU_ASSERT_EQUAL_FATAL(ig_topo_n_numa(t), nn);
    for (int i = 0; i < nn; i++) {
        hwloc_obj_t nd = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        int cores = 0, pus = 0;
        if (nd->cpuset && !hwloc_bitmap_iszero(nd->cpuset)) {
            cores = hwloc_get_nbobjs_inside_cpuset_by_type(hw, nd->cpuset, HWLOC_OBJ_CORE);
            pus = hwloc_get_nbobjs_inside_cpuset_by_type(hw, nd->cpuset, HWLOC_OBJ_PU);
        }
        const ig_topo_numa *n = ig_topo_numa_at(t, i);
        if (n->n_cores != cores || n->n_pus != pus)
            fprintf(stderr, "\n    %s node %d: %d cores / %d PUs, hwloc %d / %d\n", what, i,
                    n->n_cores, n->n_pus, cores, pus);
        CU_ASSERT_EQUAL(n->n_cores, cores);
        CU_ASSERT_EQUAL(n->n_pus, pus);
    }
}

/* One topology, synthetic or XML, loaded by ig_topo and independently by hwloc, counts compared;
 * returns 1 if it was checked, 0 if ig_topo refused it (a shape hwloc refuses is no count check).
 */
static int counts_case(const char *src, int xml) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status st = xml ? ig_topo_load_xml(src, &t, &err) : ig_topo_load_synthetic(src, &t, &err);
    if (st != IG_OK) {
        fprintf(stderr, "\n    note: '%s' refused: %s ", src, err.msg);
        return 0;
    }
    hwloc_topology_t hw;
    CU_ASSERT_EQUAL_FATAL(hwloc_topology_init(&hw), 0);
    CU_ASSERT_EQUAL_FATAL(
        xml ? hwloc_topology_set_xml(hw, src) : hwloc_topology_set_synthetic(hw, src), 0);
    CU_ASSERT_EQUAL_FATAL(hwloc_topology_load(hw), 0);
    check_counts_against_hwloc(t, hw, src);
    hwloc_topology_destroy(hw);
    ig_topo_free(t);
    return 1;
}

static void test_counts_match_hwloc(void) {
    const char *synth[] = {"pack:2 numa:1 core:4 pu:2",
                           "pack:1 group:2 numa:2 core:2 pu:1",
                           "numa:3 pack:2 core:2 pu:2",
                           "pack:2 l3:2 numa:2 core:3 pu:1",
                           "7 60 4",
                           "pack:4 core:8 numa:2 pu:2"};
    int checked = 0;
    for (size_t k = 0; k < sizeof synth / sizeof synth[0]; k++) checked += counts_case(synth[k], 0);
    CU_ASSERT(checked >= 5); /* not a check that passes by refusing every shape */
    CU_ASSERT_EQUAL(counts_case(ig_test_fixture("topo/two_socket_two_gpu.xml"), 1), 1);
    CU_ASSERT_EQUAL(counts_case(ig_test_fixture("topo/gpu_on_machine_no_cuda.xml"), 1), 1);
    const char *xml[] = {"hwloc/32em64t-2n8c2t-pci-normalio.xml",
                         "hwloc/8intel64-4n2t-memattrs.xml", "hwloc/96em64t-4n4d3ca2co-pci.xml",
                         "hwloc/power8gpudistances.xml"};
    for (size_t k = 0; k < sizeof xml / sizeof xml[0]; k++) {
        const char *p = ig_test_shared(xml[k]);
        if (p) CU_ASSERT_EQUAL(counts_case(p, 1), 1);
    }
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void expect_xml_error(const char *path, ig_status code, const char *needle) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_topo_load_xml(path, &t, &err);
    if (rc != code || !strstr(err.msg, path) || !strstr(err.msg, needle))
        fprintf(stderr, "\n    %s -> %d: %s\n", path, (int)rc, err.msg);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
}

static void test_bad_xml(void) {
    expect_xml_error("/nonexistent/topo.xml", IG_ERR_NOT_FOUND, "No such file");
    expect_xml_error(ig_test_tmpdir(), IG_ERR_IO, "is a directory");
    expect_xml_error(write_tmp("empty.xml", "", 0), IG_ERR_FORMAT, "empty file");
    const char *notxml = "pack:2 numa:1 core:4 pu:2\n";
    expect_xml_error(write_tmp("not_xml.xml", notxml, strlen(notxml)), IG_ERR_FORMAT,
                     "not an XML file");
    const char *html = "<?xml version=\"1.0\"?>\n<html><body>hi</body></html>\n";
    expect_xml_error(write_tmp("html.xml", html, strlen(html)), IG_ERR_FORMAT,
                     "not an hwloc topology");
    const char *v3 = "<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n</topology>\n";
    expect_xml_error(write_tmp("v3.xml", v3, strlen(v3)), IG_ERR_UNSUPPORTED, "version 3.0");

    /* the fixture cut in the middle of an element, and cut after its second package opens */
    size_t n = 0;
    char *full = read_all(ig_test_fixture("topo/two_socket_two_gpu.xml"), &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    expect_xml_error(write_tmp("trunc_half.xml", full, n / 2), IG_ERR_FORMAT, "truncated");
    const char *second = strstr(full, "<object type=\"Package\" os_index=\"1\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(second);
    expect_xml_error(write_tmp("trunc_pkg.xml", full, (size_t)(second - full)), IG_ERR_FORMAT,
                     "truncated");
    free(full);
    ig_topo *t = NULL;
    CU_ASSERT_EQUAL(ig_topo_load_xml(NULL, &t, NULL), IG_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(ig_topo_load_xml("", &t, NULL), IG_ERR_INVALID_ARG);
}

/* ---- both of hwloc's XML parsers ------------------------------------------------------------- */

/* HWLOC_LIBXML_IMPORT=0 makes hwloc use its minimal parser, as on a Debian machine without
 * libhwloc-plugins. hwloc reads it once per process, so these loads run `igen topo` with it set. */
static void igen_topo_minimal(ig_test_run *r, const char *path) {
    char args[4500];
    snprintf(args, sizeof args, "topo --xml '%s' --json", path);
    ig_test_igen(r, "HWLOC_LIBXML_IMPORT=0", args);
}

/* The topology's JSON without the parser's name, for comparing loads across parsers. */
static char *json_without_parser(const char *text) {
    json_object *j = json_tokener_parse(text);
    if (!j) return NULL;
    json_object_object_del(j, "hwloc_xml_parser");
    char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    return s;
}

static char *topo_json(const char *path) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_topo_load_xml(path, &t, &err) != IG_OK) {
        fprintf(stderr, "\n    %s\n", err.msg);
        return NULL;
    }
    json_object *j = ig_topo_to_json(t);
    char *s = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    ig_topo_free(t);
    return s;
}

static void test_fixtures_either_parser(void) {
    const char *names[] = {"topo/two_socket_two_gpu.xml", "topo/gpu_on_machine_no_cuda.xml"};
    static ig_test_run r;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *path = ig_test_fixture(names[i]);
        char *dflt = topo_json(path);
        igen_topo_minimal(&r, path);
        if (r.status != 0) fprintf(stderr, "\n    minimal parser: %s\n", r.err);
        CU_ASSERT_EQUAL(r.status, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"hwloc_xml_parser\":\"minimal\""));
        char *a = dflt ? json_without_parser(dflt) : NULL, *b = json_without_parser(r.out);
        CU_ASSERT_PTR_NOT_NULL(a);
        CU_ASSERT_PTR_NOT_NULL(b);
        if (a && b) CU_ASSERT_STRING_EQUAL(a, b);
        free(a);
        free(b);
        free(dflt);
    }
}

/* A hand-written topology with a comment: the minimal parser's error names the line and the way
 * out; the libxml2 importer, where installed, reads it like the fixture it was made from. */
static void test_comment_minimal_parser(void) {
    size_t n = 0;
    char *full = read_all(ig_test_fixture("topo/two_socket_two_gpu.xml"), &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(full);
    const char *top = strstr(full, "<topology");
    CU_ASSERT_PTR_NOT_NULL_FATAL(top);
    const char *comment = "<!-- written by hand -->\n";
    size_t head = (size_t)(top - full), cn = strlen(comment);
    char *buf = malloc(n + cn + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    memcpy(buf, full, head);
    memcpy(buf + head, comment, cn);
    memcpy(buf + head + cn, top, n - head + 1);
    char path[4400];
    snprintf(path, sizeof path, "%s", write_tmp("commented.xml", buf, n + cn));
    free(buf);

    static ig_test_run r;
    igen_topo_minimal(&r, path);
    CU_ASSERT_EQUAL(r.status, 2);
    char where[4500];
    snprintf(where, sizeof where, "%s:3: an XML comment", path); /* after <?xml and DOCTYPE */
    if (!strstr(r.err, where)) fprintf(stderr, "\n    %s\n", r.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, where));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "HWLOC_LIBXML_IMPORT=0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "lstopo --input"));
    CU_ASSERT_PTR_NULL(strstr(r.err, "malformed"));

    /* truncation under the minimal parser is still called truncation */
    igen_topo_minimal(&r, write_tmp("trunc_min.xml", full, n / 2));
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "minimal XML parser"));

    if (ig_topo_xml_full_parser() == 1) {
        char *want = topo_json(ig_test_fixture("topo/two_socket_two_gpu.xml"));
        char *got = topo_json(path);
        CU_ASSERT_PTR_NOT_NULL(got);
        CU_ASSERT(want && strstr(want, "\"hwloc_xml_parser\":\"libxml2\""));
        if (want && got) {
            /* the same machine; only the source path differs */
            CU_ASSERT_PTR_NOT_NULL(strstr(got, "commented.xml"));
            CU_ASSERT_STRING_EQUAL(strstr(want, "\"source_kind\""), strstr(got, "\"source_kind\""));
        }
        free(want);
        free(got);
    } else {
        fprintf(stderr, "\n    hwloc's libxml2 importer is not installed here "
                        "(libhwloc-plugins): the commented file was checked only under the "
                        "minimal parser\n");
    }
    free(full);
}

/* ---- this machine (consistency only) --------------------------------------------------------- */

static void test_this_machine(void) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_topo_discover(&t, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, IG_OK);
    CU_ASSERT_EQUAL(ig_topo_source_kind(t), IG_TOPO_SRC_THIS_SYSTEM);
    CU_ASSERT_EQUAL(ig_topo_is_this_system(t), 1);
    CU_ASSERT(ig_topo_n_numa(t) >= 1);
    CU_ASSERT(ig_topo_total_memory(t) > 0);
    CU_ASSERT(ig_topo_n_cores(t) >= 1);
    CU_ASSERT(ig_topo_n_pus(t) >= ig_topo_n_cores(t));
    /* every core lies in some node's cpuset; node core counts add up to at least all cores */
    hwloc_topology_t hw = ig_topo_hwloc(t);
    int orphans = 0, sum = 0;
    for (int c = 0; c < ig_topo_n_cores(t); c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(hw, HWLOC_OBJ_CORE, (unsigned)c);
        int in = 0;
        for (int i = 0; i < ig_topo_n_numa(t); i++) {
            hwloc_obj_t nd =
                hwloc_get_numanode_obj_by_os_index(hw, (unsigned)ig_topo_numa_at(t, i)->os_index);
            in |= nd && nd->cpuset && hwloc_bitmap_isincluded(core->cpuset, nd->cpuset);
        }
        orphans += !in;
    }
    for (int i = 0; i < ig_topo_n_numa(t); i++) sum += ig_topo_numa_at(t, i)->n_cores;
    CU_ASSERT_EQUAL(orphans, 0);
    CU_ASSERT(sum >= ig_topo_n_cores(t));
    for (int i = 0; i < ig_topo_n_gpus(t); i++) {
        const ig_topo_gpu *g = ig_topo_gpu_at(t, i);
        CU_ASSERT(g->numa == -1 || ig_topo_numa_find(t, g->numa) >= 0);
        CU_ASSERT(g->cuda_index >= 0 || strlen(g->pci_bus_id) == 12);
    }
    ig_machine m;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, -1, &m), IG_OK);
    CU_ASSERT_EQUAL(m.device_numa, ig_topo_numa_at(t, 0)->os_index);
    CU_ASSERT_EQUAL(m.n_numa, ig_topo_n_numa(t) < IG_MAX_NUMA ? ig_topo_n_numa(t) : IG_MAX_NUMA);
    ig_topo_free(t);
}

/* ---- host memory ----------------------------------------------------------------------------- */

static int page_aligned(const void *p) {
    return ((uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE)) == 0;
}

static int fill_and_check(ig_hostmem *h) {
    unsigned char *p = ig_hostmem_ptr(h);
    size_t n = ig_hostmem_size(h);
    for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)(i >> 12);
    p[n - 1] = 0xab;
    int bad = 0;
    for (size_t i = 0; i < n; i += 4096) bad += p[i] != (unsigned char)(i >> 12);
    return bad == 0 && p[n - 1] == 0xab;
}

/* Runs first among the allocation tests: the first unbound fallback of the process warns, once. */
static void test_hostmem_fallback_warns_once(void) {
    ig_topo *t = load_fixture("topo/two_socket_two_gpu.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    ig_log_level old = ig_log_get_level();
    ig_log_set_level(IG_LOG_WARN);
    char log[4300];
    snprintf(log, sizeof log, "%s/stderr_hostmem.txt", ig_test_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    ig_hostmem *a = NULL, *b = NULL;
    ig_error err;
    int node1 = 1;
    ig_status ra = ig_hostmem_alloc(t, IG_NUMA_NODES, &node1, 1, 1 << 20, &a, &err);
    ig_status rb = ig_hostmem_alloc(t, IG_NUMA_INTERLEAVE, NULL, 0, 1 << 20, &b, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ig_log_set_level(old);
    CU_ASSERT_EQUAL(ra, IG_OK);
    CU_ASSERT_EQUAL(rb, IG_OK);
    char *text = read_all(log, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int warnings = 0;
    for (const char *p = text; (p = strstr(p, "not NUMA-bound")); p++) warnings++;
    CU_ASSERT_EQUAL(warnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "not this system"));
    free(text);
    if (a) {
        CU_ASSERT_EQUAL(ig_hostmem_bound(a), IG_HOSTMEM_UNBOUND);
        CU_ASSERT_EQUAL(ig_hostmem_numa(a), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(ig_hostmem_unbound_reason(a), "two_socket_two_gpu.xml"));
        CU_ASSERT(page_aligned(ig_hostmem_ptr(a)));
        CU_ASSERT(fill_and_check(a));
    }
    if (b) CU_ASSERT_EQUAL(ig_hostmem_bound(b), IG_HOSTMEM_UNBOUND);
    ig_hostmem_free(a);
    ig_hostmem_free(b);
    ig_topo_free(t);
}

static void test_hostmem_bad_requests(void) {
    ig_topo *t = load_fixture("topo/two_socket_two_gpu.xml");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    ig_hostmem *h = NULL;
    ig_error err;
    int nodes[2] = {1, 5};
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_NODES, nodes, 2, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "NUMA node 5 does not exist"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "0, 1"));
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_INTERLEAVE, &nodes[1], 1, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "5"));
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_NODES, NULL, 0, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "empty"));
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_LOCAL, nodes, 2, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_LOCAL, NULL, 0, 0, &h, &err), IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "0 bytes"));
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, (ig_numa_mode)9, NULL, 0, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_NODES, NULL, 1, 4096, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(h);
    /* the GPU's node from fill_machine is a valid 'local' request on that topology */
    ig_machine m;
    CU_ASSERT_EQUAL(ig_topo_fill_machine(t, 1, &m), IG_OK);
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_LOCAL, &m.device_numa, 1, 1000, &h, &err), IG_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(ig_hostmem_size(h), 1000);
    CU_ASSERT(page_aligned(ig_hostmem_ptr(h)));
    CU_ASSERT(fill_and_check(h));
    ig_hostmem_free(h);
    ig_topo_free(t);
}

static void test_hostmem_this_machine(void) {
    ig_topo *t = NULL;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(ig_topo_discover(&t, &err), IG_OK);
    hwloc_topology_t hw = ig_topo_hwloc(t);
    int node = ig_topo_numa_at(t, 0)->os_index;
    const size_t sz = 8u << 20;

    ig_hostmem *h = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_hostmem_alloc(t, IG_NUMA_LOCAL, &node, 1, sz, &h, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_hostmem_size(h), sz);
    CU_ASSERT(page_aligned(ig_hostmem_ptr(h)));
    CU_ASSERT(fill_and_check(h));
    CU_ASSERT_EQUAL(ig_hostmem_dma_registered(h), 0);
    if (ig_hostmem_bound(h) == IG_HOSTMEM_BOUND) {
        CU_ASSERT_EQUAL(ig_hostmem_numa(h), node);
        CU_ASSERT_STRING_EQUAL(ig_hostmem_unbound_reason(h), "");
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_membind_policy_t pol = HWLOC_MEMBIND_DEFAULT;
        int rc =
            hwloc_get_area_membind(hw, ig_hostmem_ptr(h), sz, set, &pol, HWLOC_MEMBIND_BYNODESET);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(pol, HWLOC_MEMBIND_BIND);
        CU_ASSERT(hwloc_bitmap_isset(set, (unsigned)node));
        CU_ASSERT_EQUAL(hwloc_bitmap_weight(set), 1);
        hwloc_bitmap_free(set);
    } else {
        CU_ASSERT_EQUAL(ig_hostmem_bound(h), IG_HOSTMEM_UNBOUND);
        CU_ASSERT(strlen(ig_hostmem_unbound_reason(h)) > 0);
        fprintf(stderr, "\n    note: binding not obtained here (%s) ",
                ig_hostmem_unbound_reason(h));
    }
    ig_hostmem_free(h);

    h = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_hostmem_alloc(t, IG_NUMA_INTERLEAVE, NULL, 0, sz, &h, &err), IG_OK);
    CU_ASSERT(page_aligned(ig_hostmem_ptr(h)));
    CU_ASSERT(fill_and_check(h));
    CU_ASSERT_EQUAL(ig_hostmem_numa(h), -1);
    if (ig_hostmem_bound(h) == IG_HOSTMEM_INTERLEAVED) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_membind_policy_t pol = HWLOC_MEMBIND_DEFAULT;
        CU_ASSERT_EQUAL(
            hwloc_get_area_membind(hw, ig_hostmem_ptr(h), sz, set, &pol, HWLOC_MEMBIND_BYNODESET),
            0);
        CU_ASSERT_EQUAL(pol, HWLOC_MEMBIND_INTERLEAVE);
        CU_ASSERT_EQUAL(hwloc_bitmap_weight(set), ig_topo_n_numa(t));
        hwloc_bitmap_free(set);
    } else {
        CU_ASSERT_EQUAL(ig_hostmem_bound(h), IG_HOSTMEM_UNBOUND);
    }
    ig_hostmem_free(h);

    int bogus = 999;
    h = NULL;
    CU_ASSERT_EQUAL(ig_hostmem_alloc(t, IG_NUMA_NODES, &bogus, 1, sz, &h, &err),
                    IG_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "999"));
    char first[16];
    snprintf(first, sizeof first, "%d", node);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, first)); /* the valid nodes are listed */
    ig_topo_free(t);
}

static void test_hostmem_no_topology(void) {
    ig_hostmem *h = NULL;
    ig_error err;
    int node = 999; /* ignored without a topology */
    CU_ASSERT_EQUAL_FATAL(ig_hostmem_alloc(NULL, IG_NUMA_NODES, &node, 1, 12345, &h, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_hostmem_bound(h), IG_HOSTMEM_UNBOUND);
    CU_ASSERT_STRING_EQUAL(ig_hostmem_binding_name(ig_hostmem_bound(h)), "unbound");
    CU_ASSERT_PTR_NOT_NULL(strstr(ig_hostmem_unbound_reason(h), "no topology"));
    CU_ASSERT_EQUAL(ig_hostmem_size(h), 12345);
    CU_ASSERT(page_aligned(ig_hostmem_ptr(h)));
    CU_ASSERT(fill_and_check(h));
    ig_hostmem_free(h);
    ig_hostmem_free(NULL);
    CU_ASSERT_STRING_EQUAL(ig_hostmem_binding_name(IG_HOSTMEM_INTERLEAVED), "interleaved");
}

/* ---- igen topo ------------------------------------------------------------------------------- */

typedef ig_test_run run_out;

static void run_igen(run_out *r, const char *args) {
    char full[8192];
    snprintf(full, sizeof full, "topo %s", args);
    ig_test_igen(r, NULL, full);
}

static void test_cli(void) {
    char args[4400];
    static run_out r;
    snprintf(args, sizeof args, "--xml '%s' --json",
             ig_test_fixture("topo/two_socket_two_gpu.xml"));
    run_igen(&r, args);
    CU_ASSERT_EQUAL(r.status, 0);
    json_object *o = json_tokener_parse(r.out);
    CU_ASSERT_PTR_NOT_NULL(o);
    json_object *gpus = NULL, *v = NULL;
    CU_ASSERT(o && json_object_object_get_ex(o, "gpus", &gpus) &&
              json_object_array_length(gpus) == 2);
    CU_ASSERT(gpus && json_object_object_get_ex(json_object_array_get_idx(gpus, 1), "numa", &v) &&
              json_object_get_int(v) == 1);
    json_object_put(o);

    snprintf(args, sizeof args, "--xml '%s'", ig_test_fixture("topo/two_socket_two_gpu.xml"));
    run_igen(&r, args);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "NUMA nodes  2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "cuda1"));

    run_igen(&r, "--synthetic 'pack:2 numa:1 core:4 pu:2' --json");
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"cores\":8"));

    run_igen(&r, "--help");
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "usage: igen topo"));

    struct {
        const char *args, *needle;
    } bad[] = {
        {"--xml /nonexistent", "/nonexistent"},
        {"--synthetic 'pack:2 bogus:3'", "bogus"},
        {"--xml a.xml --synthetic pack:2", "exclude each other"},
        {"--frobnicate", "igen topo --help"},
        {"extra", "unexpected argument 'extra'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_igen(&r, bad[i].args);
        if (r.status != 2 || !strstr(r.err, bad[i].needle))
            fprintf(stderr, "\n    igen topo %s -> %d: %s", bad[i].args, r.status, r.err);
        CU_ASSERT_EQUAL(r.status, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.err, bad[i].needle));
        CU_ASSERT_EQUAL(r.out[0], '\0');
    }
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("topo", NULL, NULL);
    CU_add_test(s, "fixture_two_socket", test_fixture_two_socket);
    CU_add_test(s, "fixture_pci_only_gpu", test_fixture_pci_only_gpu);
    CU_add_test(s, "print_and_json", test_print_and_json);
    CU_add_test(s, "shared_hwloc_files", test_shared_hwloc_files);
    CU_add_test(s, "synthetic", test_synthetic);
    CU_add_test(s, "counts_match_hwloc", test_counts_match_hwloc);
    CU_add_test(s, "bad_xml", test_bad_xml);
    CU_add_test(s, "fixtures_either_parser", test_fixtures_either_parser);
    CU_add_test(s, "comment_minimal_parser", test_comment_minimal_parser);
    CU_add_test(s, "this_machine", test_this_machine);
    CU_pSuite h = CU_add_suite("hostmem", NULL, NULL);
    CU_add_test(h, "fallback_warns_once", test_hostmem_fallback_warns_once);
    CU_add_test(h, "bad_requests", test_hostmem_bad_requests);
    CU_add_test(h, "this_machine", test_hostmem_this_machine);
    CU_add_test(h, "no_topology", test_hostmem_no_topology);
    CU_pSuite c = CU_add_suite("cli", NULL, NULL);
    CU_add_test(c, "igen_topo", test_cli);
}
