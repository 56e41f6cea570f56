/* Topology discovery and loading with hwloc: everything the planner and the host tier need is
 * extracted once at load time into plain arrays. A topology that does not load is an error with
 * the file or string named, never a crash; nothing here binds or allocates memory for tensors. */
#include "offload/topo.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>

#include "core/base/log.h"

struct ig_topo {
    hwloc_topology_t hw;
    ig_topo_source source;
    char *source_desc;
    int this_system;
    int xml_parser; /* XML sources: ig_topo_xml_full_parser() at load */
    int n_packages, n_cores, n_pus;
    int n_numa;
    ig_topo_numa *numa;
    int n_gpus;
    ig_topo_gpu *gpus;
};

/* ---- extraction ------------------------------------------------------------------------------ */

static int count_inside(hwloc_topology_t hw, hwloc_const_cpuset_t set, hwloc_obj_type_t type) {
    if (!set || hwloc_bitmap_iszero(set)) return 0;
    return hwloc_get_nbobjs_inside_cpuset_by_type(hw, set, type);
}

/* Cores and PUs inside every NUMA node's cpuset, as count_inside gives them, in time linear in
 * the topology: count_inside per node walks every core and PU, so a topology of thousands of
 * nodes and PUs (a hostile XML or synthetic description) took seconds to minutes. Counts per
 * subtree are summed bottom-up over the normal tree (indexed by depth and logical index); a node
 * attached under object P (its first normal ancestor) with P's cpuset holds P's subtree and the
 * ancestors of P whose cpusets equal P's. A node whose cpuset differs from P's (hwloc makes them
 * equal; kept for exactness) is counted the slow way. */
static ig_status count_numa_contents(hwloc_topology_t hw, ig_topo_numa *numa, int nn,
                                     ig_error *err) {
    int depth = hwloc_topology_get_depth(hw);
    int **cnt = ig_calloc((size_t)depth * 2, sizeof *cnt, err);
    if (!cnt) return IG_ERR_NOMEM;
    ig_status st = IG_OK;
    for (int d = 0; d < depth; d++)
        for (int w = 0; w < 2; w++) {
            int n = hwloc_get_nbobjs_by_depth(hw, (int)d);
            cnt[2 * d + w] = ig_calloc(n > 0 ? (size_t)n : 1, sizeof(int), err);
            if (!cnt[2 * d + w]) {
                st = IG_ERR_NOMEM;
                goto done;
            }
        }
    static const hwloc_obj_type_t types[2] = {HWLOC_OBJ_CORE, HWLOC_OBJ_PU};
    for (int d = depth - 1; d >= 0; d--) {
        int n = hwloc_get_nbobjs_by_depth(hw, (int)d);
        for (int i = 0; i < n; i++) {
            hwloc_obj_t o = hwloc_get_obj_by_depth(hw, (int)d, (unsigned)i);
            for (int w = 0; w < 2; w++) {
                int c = o->type == types[w] && o->cpuset && !hwloc_bitmap_iszero(o->cpuset);
                for (hwloc_obj_t ch = o->first_child; ch; ch = ch->next_sibling)
                    if (ch->depth > d && ch->depth < depth)
                        c += cnt[2 * ch->depth + w][ch->logical_index];
                cnt[2 * d + w][i] = c;
            }
        }
    }
    for (int i = 0; i < nn; i++) {
        hwloc_obj_t nd = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        hwloc_obj_t p = nd->parent;
        while (p && !hwloc_obj_type_is_normal(p->type)) p = p->parent;
        if (!nd->cpuset || hwloc_bitmap_iszero(nd->cpuset)) continue; /* counts stay 0 */
        if (!p || !p->cpuset || !hwloc_bitmap_isequal(p->cpuset, nd->cpuset)) {
            numa[i].n_cores = count_inside(hw, nd->cpuset, HWLOC_OBJ_CORE);
            numa[i].n_pus = count_inside(hw, nd->cpuset, HWLOC_OBJ_PU);
            continue;
        }
        int c[2] = {cnt[2 * p->depth][p->logical_index], cnt[2 * p->depth + 1][p->logical_index]};
        for (hwloc_obj_t a = p->parent;
             a && a->cpuset && hwloc_bitmap_isequal(a->cpuset, p->cpuset); a = a->parent)
            for (int w = 0; w < 2; w++) c[w] += a->type == types[w];
        numa[i].n_cores = c[0];
        numa[i].n_pus = c[1];
    }
done:
    for (int d = 0; d < 2 * depth; d++) free(cnt[d]);
    free(cnt);
    return st;
}

static int numa_package(hwloc_topology_t hw, hwloc_obj_t node) {
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_PACKAGE, node);
    if (pkg) return (int)pkg->logical_index;
    /* A node attached above the packages (one node for the whole machine) has no package
     * ancestor; it belongs to a package only if its CPUs all lie in one. */
    if (!node->cpuset || hwloc_bitmap_iszero(node->cpuset)) return -1;
    int n = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t p = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PACKAGE, (unsigned)i);
        if (p->cpuset && hwloc_bitmap_isincluded(node->cpuset, p->cpuset)) return i;
    }
    return -1;
}

/* The NUMA node an I/O object hangs off, from its first non-I/O ancestor: the smallest node whose
 * CPUs cover the ancestor's (memory attached at or above it); else, below a package or group,
 * the first node inside it; at the machine level with several nodes inside, unknown (-1). */
static int io_numa(hwloc_topology_t hw, hwloc_obj_t io) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, io);
    if (!anc) return -1;
    int n = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    hwloc_obj_t best = NULL;
    int best_w = INT_MAX;
    if (anc->cpuset && !hwloc_bitmap_iszero(anc->cpuset)) {
        for (int i = 0; i < n; i++) {
            hwloc_obj_t nd = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
            if (!nd->cpuset || !hwloc_bitmap_isincluded(anc->cpuset, nd->cpuset)) continue;
            int w = hwloc_bitmap_weight(nd->cpuset);
            if (w >= 0 && w < best_w) {
                best = nd;
                best_w = w;
            }
        }
    }
    if (best) return (int)best->os_index;
    if (!anc->nodeset) return -1;
    int inside = hwloc_bitmap_weight(anc->nodeset);
    if (inside <= 0) return -1;
    if (inside > 1 && anc == hwloc_get_root_obj(hw)) return -1;
    return hwloc_bitmap_first(anc->nodeset); /* nodesets are indexed by OS index */
}

static int is_nvidia_gpu_pci(hwloc_obj_t o) {
    return o && o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == 0x10de &&
           (o->attr->pcidev.class_id >> 8) == 0x03;
}

static int cuda_index_of(hwloc_obj_t os) {
    if (!os || os->type != HWLOC_OBJ_OS_DEVICE || !os->name) return -1;
    if (strncmp(os->name, "cuda", 4) != 0) return -1;
    const char *p = os->name + 4;
    if (*p < '0' || *p > '9') return -1;
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (*end || v < 0 || v > INT_MAX) return -1;
    return (int)v;
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o) {
    for (hwloc_obj_t p = o ? o->parent : NULL; p; p = p->parent)
        if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
    return NULL;
}

static void copy_str(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src ? src : "");
}

static void fill_gpu(hwloc_topology_t hw, ig_topo_gpu *g, hwloc_obj_t pci, hwloc_obj_t cuda_os) {
    memset(g, 0, sizeof *g);
    g->cuda_index = cuda_index_of(cuda_os);
    g->numa = io_numa(hw, pci ? pci : cuda_os);
    const char *model = cuda_os ? hwloc_obj_get_info_by_name(cuda_os, "GPUModel") : NULL;
    if (pci) {
        snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%04x:%02x:%02x.%01x",
                 (unsigned)pci->attr->pcidev.domain, (unsigned)pci->attr->pcidev.bus,
                 (unsigned)pci->attr->pcidev.dev, (unsigned)pci->attr->pcidev.func);
        g->pci_vendor = pci->attr->pcidev.vendor_id;
        g->pci_device = pci->attr->pcidev.device_id;
        size_t len = 0;
        for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
            if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
            if (!model) model = hwloc_obj_get_info_by_name(c, "GPUModel");
            int w = snprintf(g->os_devices + len, sizeof g->os_devices - len, "%s%s",
                             len ? "," : "", c->name);
            if (w < 0 || (size_t)w >= sizeof g->os_devices - len) break; /* keep what fits */
            len += (size_t)w;
        }
        if (!model) model = hwloc_obj_get_info_by_name(pci, "PCIDevice");
    } else if (cuda_os) {
        copy_str(g->os_devices, sizeof g->os_devices, cuda_os->name);
    }
    if (model)
        copy_str(g->name, sizeof g->name, model);
    else
        snprintf(g->name, sizeof g->name, "NVIDIA [%04x:%04x]", g->pci_vendor, g->pci_device);
    const char *mem = cuda_os ? hwloc_obj_get_info_by_name(cuda_os, "CUDAGlobalMemorySize") : NULL;
    if (mem) g->memory_bytes = (size_t)strtoull(mem, NULL, 10) * 1024; /* hwloc reports KiB */
}

static int cmp_gpu(const void *a, const void *b) {
    const ig_topo_gpu *x = a, *y = b;
    /* CUDA devices first by index; PCI-only ones keep their (PCI) order, made stable by bus id. */
    if ((x->cuda_index < 0) != (y->cuda_index < 0)) return x->cuda_index < 0 ? 1 : -1;
    if (x->cuda_index >= 0)
        return (x->cuda_index > y->cuda_index) - (x->cuda_index < y->cuda_index);
    return strcmp(x->pci_bus_id, y->pci_bus_id);
}

static ig_status extract(ig_topo *t, ig_error *err) {
    hwloc_topology_t hw = t->hw;
    t->this_system = hwloc_topology_is_thissystem(hw);
    t->n_packages = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    t->n_cores = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    t->n_pus = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    int nn = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    if (nn <= 0)
        return ig_error_set(err, IG_ERR_FORMAT, "the topology has no NUMA node (hwloc found %d)",
                            nn);
    t->numa = ig_calloc((size_t)nn, sizeof *t->numa, err);
    if (!t->numa) return IG_ERR_NOMEM;
    t->n_numa = nn;
    for (int i = 0; i < nn; i++) {
        hwloc_obj_t nd = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        ig_topo_numa *o = &t->numa[i];
        o->os_index = (int)nd->os_index;
        o->local_bytes = (size_t)nd->attr->numanode.local_memory;
        o->package = numa_package(hw, nd);
    }
    IG_TRY(count_numa_contents(hw, t->numa, nn, err));

    /* GPUs: every cudaN OS device, then NVIDIA display/3D PCI devices that have none. */
    int cap = 0;
    for (hwloc_obj_t os = hwloc_get_next_osdev(hw, NULL); os; os = hwloc_get_next_osdev(hw, os))
        cap += cuda_index_of(os) >= 0;
    for (hwloc_obj_t p = hwloc_get_next_pcidev(hw, NULL); p; p = hwloc_get_next_pcidev(hw, p))
        cap += is_nvidia_gpu_pci(p);
    if (cap == 0) return IG_OK;
    t->gpus = ig_calloc((size_t)cap, sizeof *t->gpus, err);
    if (!t->gpus) return IG_ERR_NOMEM;
    for (hwloc_obj_t os = hwloc_get_next_osdev(hw, NULL); os; os = hwloc_get_next_osdev(hw, os))
        if (cuda_index_of(os) >= 0) fill_gpu(hw, &t->gpus[t->n_gpus++], pci_ancestor(os), os);
    for (hwloc_obj_t p = hwloc_get_next_pcidev(hw, NULL); p; p = hwloc_get_next_pcidev(hw, p)) {
        if (!is_nvidia_gpu_pci(p)) continue;
        int has_cuda = 0;
        for (hwloc_obj_t c = p->io_first_child; c; c = c->next_sibling)
            has_cuda |= cuda_index_of(c) >= 0;
        if (!has_cuda) fill_gpu(hw, &t->gpus[t->n_gpus++], p, NULL);
    }
    qsort(t->gpus, (size_t)t->n_gpus, sizeof *t->gpus, cmp_gpu);
    return IG_OK;
}

/* ---- loading --------------------------------------------------------------------------------- */

/* hwloc dlopens its plugins (pci, opencl, gl) when the first topology is initialised and dlcloses
 * them when the last one is destroyed. One initialised, never-loaded topology kept for the process
 * keeps them resident: no reloading per topology, and what libpciaccess keeps after a PCI scan
 * stays reachable from its globals (unloaded, it was reported as a leak from an unnamed module,
 * which no LeakSanitizer suppression can match). */
static pthread_once_t g_plugins_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t g_plugins_anchor;

static void keep_plugins_loaded(void) {
    /* Not the gl and opencl plugins (unless the user names the plugins to leave out): igen finds
     * GPUs by PCI and by hwloc's cudaN OS devices. Loading OpenCL (PoCL on Debian) costs time at
     * every start, starts threads, and left a dynamic-TLS entry that crashed LeakSanitizer's
     * check at exit (tests/test_run.c mode_axis, under ASan). */
    if (!getenv("HWLOC_PLUGINS_BLACKLIST"))
        setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl", 0);
    if (hwloc_topology_init(&g_plugins_anchor) != 0) g_plugins_anchor = NULL;
}

static ig_status topo_new(ig_topo_source src, const char *desc, ig_topo **out, ig_error *err) {
    pthread_once(&g_plugins_once, keep_plugins_loaded);
    ig_topo *t = ig_calloc(1, sizeof *t, err);
    if (!t) return IG_ERR_NOMEM;
    t->source = src;
    size_t n = strlen(desc) + 1;
    t->source_desc = ig_malloc(n, err);
    if (!t->source_desc) {
        free(t);
        return IG_ERR_NOMEM;
    }
    memcpy(t->source_desc, desc, n);
    if (hwloc_topology_init(&t->hw) != 0) {
        free(t->source_desc);
        free(t);
        return ig_error_set(err, IG_ERR_NOMEM, "hwloc_topology_init failed: %s", strerror(errno));
    }
    /* I/O objects are dropped by default; GPUs (PCI devices and cudaN/nvmlN OS devices) are the
     * point here. */
    hwloc_topology_set_io_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    *out = t;
    return IG_OK;
}

static ig_status topo_finish(ig_topo *t, ig_topo **out, ig_error *err) {
    ig_status rc = extract(t, err);
    if (rc != IG_OK) {
        ig_error_prefix(err, "%s: ", t->source_desc);
        ig_topo_free(t);
        return rc;
    }
    *out = t;
    return IG_OK;
}

/* PCI discovery is an hwloc plugin too (Debian: libhwloc-plugins). Without it this machine's
 * topology has no PCI devices, so no GPU and no GPU locality: say so once, when the kernel lists
 * PCI devices that hwloc did not see. */
static void warn_if_no_pci(hwloc_topology_t hw) {
    static int warned;
    if (warned || hwloc_get_next_pcidev(hw, NULL)) return;
    DIR *d = opendir("/sys/bus/pci/devices");
    if (!d) return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    if (n == 0) return;
    warned = 1;
    IG_WARN("hwloc found no PCI device on this machine while /sys/bus/pci lists %d: its PCI "
            "plugin is probably not installed (Debian package libhwloc-plugins), so GPUs and their "
            "NUMA nodes are missing from the topology",
            n);
}

ig_status ig_topo_discover(ig_topo **out, ig_error *err) {
    if (!out) return ig_error_set(err, IG_ERR_INVALID_ARG, "ig_topo_discover: out is NULL");
    *out = NULL;
    ig_topo *t = NULL;
    IG_TRY(topo_new(IG_TOPO_SRC_THIS_SYSTEM, "this system", &t, err));
    if (hwloc_topology_load(t->hw) != 0) {
        int e = errno;
        ig_topo_free(t);
        return ig_error_set(err, IG_ERR_IO, "hwloc could not discover this machine's topology: %s",
                            strerror(e));
    }
    warn_if_no_pci(t->hw);
    return topo_finish(t, out, err);
}

/* hwloc's XML errors say little; look at the file first so the message can say what is wrong. */
static ig_status check_xml_file(const char *path, ig_error *err) {
    struct stat st;
    if (stat(path, &st) != 0)
        return ig_error_set(err, errno == ENOENT ? IG_ERR_NOT_FOUND : IG_ERR_IO,
                            "%s: cannot open hwloc XML topology: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ig_error_set(err, IG_ERR_IO,
                            "%s: is a directory, expected an hwloc XML topology file", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return ig_error_set(err, IG_ERR_IO, "%s: cannot read hwloc XML topology: %s", path,
                            strerror(errno));
    char head[65536];
    ssize_t got = read(fd, head, sizeof head - 1);
    int e = errno;
    close(fd);
    if (got < 0)
        return ig_error_set(err, IG_ERR_IO, "%s: cannot read hwloc XML topology: %s", path,
                            strerror(e));
    head[got] = '\0';
    const char *p = head;
    if ((unsigned char)p[0] == 0xef && (unsigned char)p[1] == 0xbb && (unsigned char)p[2] == 0xbf)
        p += 3; /* UTF-8 byte order mark */
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    if (got == 0 || !*p)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: empty file, not an hwloc XML topology", path);
    if (*p != '<')
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: not an XML file, so not an hwloc XML topology (export one with "
                            "'lstopo FILE.xml')",
                            path);
    const char *top = strstr(p, "<topology");
    if (!top)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: XML but not an hwloc topology (no <topology> element)", path);
    const char *ver = strstr(top, "version=\"");
    const char *close_tag = strchr(top, '>');
    if (ver && close_tag && ver < close_tag && ver[9] >= '3' && ver[9] <= '9')
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "%s: hwloc XML format version %.3s is from a newer hwloc; this build "
                            "uses hwloc %u.%u, which reads format 2.0 (export with hwloc 2.x)",
                            path, ver + 9, hwloc_get_api_version() >> 16,
                            (hwloc_get_api_version() >> 8) & 0xff);
    return IG_OK;
}

/* A one-PU topology as hwloc writes it, with or without an XML comment before <topology>. */
static const char probe_head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                                 "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n";
static const char probe_comment[] = "<!-- igen: does hwloc read XML comments? -->\n";
static const char probe_body[] =
    "<topology version=\"2.0\">\n"
    "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000001\" "
    "complete_cpuset=\"0x00000001\" allowed_cpuset=\"0x00000001\" nodeset=\"0x00000001\" "
    "complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" gp_index=\"1\">\n"
    "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000001\" "
    "complete_cpuset=\"0x00000001\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
    "gp_index=\"2\" local_memory=\"1048576\"/>\n"
    "    <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"3\"/>\n"
    "  </object>\n"
    "</topology>\n";

static int probe_load(int with_comment) {
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "%s%s%s", probe_head, with_comment ? probe_comment : "",
                     probe_body);
    if (n <= 0 || (size_t)n >= sizeof buf) return 0;
    hwloc_topology_t hw;
    if (hwloc_topology_init(&hw) != 0) return 0;
    int ok = hwloc_topology_set_xmlbuffer(hw, buf, n + 1) == 0 && hwloc_topology_load(hw) == 0;
    hwloc_topology_destroy(hw);
    return ok;
}

int ig_topo_xml_full_parser(void) {
    if (!probe_load(0)) return -1;
    return probe_load(1);
}

/* The line of the first construct that hwloc's minimal XML parser does not read (a comment or a
 * CDATA section after the header), 0 when there is none in the file's first 64 KiB. */
static int minimal_parser_obstacle(const char *path, const char **what) {
    enum { CAP = 65536 };
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = malloc(CAP);
    if (!buf) {
        fclose(f);
        return 0;
    }
    size_t got = fread(buf, 1, CAP - 1, f);
    fclose(f);
    buf[got] = '\0';
    const char *c = strstr(buf, "<!--"), *d = strstr(buf, "<![CDATA[");
    const char *hit = c;
    *what = "an XML comment";
    if (d && (!hit || d < hit)) {
        hit = d;
        *what = "a CDATA section";
    }
    int line = 0;
    if (hit) {
        line = 1;
        for (const char *q = buf; q < hit; q++) line += *q == '\n';
    }
    free(buf);
    return line;
}

/* Set in sanitizer builds (compiler-rt), absent otherwise. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* hwloc 2.9's XML importer crashes, hangs or reads past its buffers on some malformed files (the
 * topo fuzz harness found several: tests/fixtures/fuzz/topo/open/). A file is therefore loaded
 * once in a child process first, under a time limit; only a file the child loaded is loaded here.
 * Returns 0 when the child loaded it, 1 when hwloc rejected it normally, or -1 with `why` set
 * when the child crashed or ran out of time. */
static int xml_probe_child(const char *path, char *why, size_t n) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 0; /* cannot tell: load in this process, as before */
    if (pid == 0) {
        /* die of the signal itself, whatever handlers the process had (a fuzzer's or a
         * sanitizer's would report the child's crash as the caller's) */
        if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
        int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
        alarm(IG_TOPO_XML_PROBE_S);
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, STDERR_FILENO); /* hwloc's own complaints: the parent words it */
        hwloc_topology_t hw;
        if (hwloc_topology_init(&hw) != 0) _exit(0);
        hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        int ok = hwloc_topology_set_xml(hw, path) == 0 && hwloc_topology_load(hw) == 0;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 0;
    if (WIFEXITED(st)) return WEXITSTATUS(st) == 0 ? 0 : 1;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        snprintf(why, n, "hwloc's XML parser ran for more than %d s on it", IG_TOPO_XML_PROBE_S);
    else
        snprintf(why, n, "hwloc's XML parser crashed on it (%s)",
                 WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "abnormal exit");
    return -1;
}

ig_status ig_topo_load_xml(const char *path, ig_topo **out, ig_error *err) {
    if (!out || !path || !*path)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "ig_topo_load_xml: no file given");
    *out = NULL;
    IG_TRY(check_xml_file(path, err));
    char probe_why[160];
    int probe = xml_probe_child(path, probe_why, sizeof probe_why);
    if (probe < 0)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: not a valid hwloc XML topology (malformed: %s; export the file "
                            "again with 'lstopo FILE.xml')",
                            path, probe_why);
    ig_topo *t = NULL;
    if (probe == 0) IG_TRY(topo_new(IG_TOPO_SRC_XML, path, &t, err));
    /* a file the child saw rejected is not loaded here again (hwloc leaks when it rejects) */
    if (probe != 0 || hwloc_topology_set_xml(t->hw, path) != 0 || hwloc_topology_load(t->hw) != 0) {
        if (t) ig_topo_free(t);
        /* Debian ships hwloc's libxml2 importer apart (libhwloc-plugins); without it hwloc falls
         * back to a minimal parser that reads only XML as hwloc itself writes it. Say which
         * parser rejected the file, and why where that can be seen. */
        if (ig_topo_xml_full_parser() == 0) {
            const char *env = getenv("HWLOC_LIBXML_IMPORT");
            const char *why = env && !strcmp(env, "0")
                                  ? "HWLOC_LIBXML_IMPORT=0 turns off hwloc's libxml2 importer"
                                  : "hwloc's libxml2 importer is not installed: Debian package "
                                    "libhwloc-plugins";
            const char *what = NULL;
            int line = minimal_parser_obstacle(path, &what);
            if (line > 0)
                return ig_error_set(
                    err, IG_ERR_UNSUPPORTED,
                    "%s:%d: %s, which hwloc's minimal XML parser does not read (%s; or let "
                    "hwloc rewrite the file: 'lstopo --input FILE --of xml OUT.xml')",
                    path, line, what, why);
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s: not a valid hwloc XML topology (malformed or truncated, or "
                                "XML that hwloc did not write: hwloc's minimal XML parser "
                                "rejected it; %s)",
                                path, why);
        }
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: not a valid hwloc XML topology (malformed or truncated: hwloc's "
                            "XML parser rejected it)",
                            path);
    }
    t->xml_parser = ig_topo_xml_full_parser();
    return topo_finish(t, out, err);
}

/* Names the first level of a rejected synthetic description whose type hwloc does not know. */
static void synthetic_hint(const char *desc, char *hint, size_t n) {
    hint[0] = '\0';
    const char *p = desc;
    while (*p) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        size_t tlen = strcspn(p, ":( \t");
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)(tlen < sizeof tok ? tlen : sizeof tok - 1), p);
        hwloc_obj_type_t type;
        union hwloc_obj_attr_u attr;
        /* a level "TYPE:N"; memory-only and attribute syntax ([...], (...)) is left to hwloc */
        if (tok[0] && tok[0] != '[' && isalpha((unsigned char)tok[0]) &&
            hwloc_type_sscanf(tok, &type, &attr, sizeof attr) != 0) {
            snprintf(hint, n, ": '%s' is not an hwloc object type", tok);
            return;
        }
        if (tok[0] && p[tlen] != ':' && isalpha((unsigned char)tok[0])) {
            snprintf(hint, n, ": level '%.*s' has no ':COUNT'", (int)(len < 40 ? len : 40), p);
            return;
        }
        p += len;
    }
}

/* Objects a synthetic description asks for: the running product of its levels' counts ("TYPE:N"
 * or a bare N), summed over the levels, saturated just past IG_TOPO_MAX_SYNTHETIC_OBJECTS. A group
 * in parentheses or brackets (global attributes, a level's attributes, a memory level) is stepped
 * over, and what follows it in the same word is another level: hwloc reads "()8960" as 8960 PUs
 * (the fuzzer's 10 s input). */
static size_t synthetic_objects(const char *desc, size_t *max_arity, const char **bad) {
    size_t per_level = 1, total = 0;
    *max_arity = 0;
    *bad = NULL;
    for (const char *p = desc; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        const char *end_word = p + strcspn(p, " \t");
        while (p < end_word) {
            if (*p == '(' || *p == '[') { /* a group: to its matching close */
                int depth = 0;
                for (; p < end_word; p++) {
                    if (*p == '(' || *p == '[') {
                        depth++;
                    } else if ((*p == ')' || *p == ']') && --depth == 0) {
                        p++;
                        break;
                    }
                }
                continue;
            }
            /* a level: TYPE:N, or N, up to the end of the word or the group after its count */
            size_t len = (size_t)(end_word - p);
            const char *colon = memchr(p, ':', len);
            const char *num = colon ? colon + 1 : p;
            if (!isdigit((unsigned char)*num)) { /* no count here: hwloc judges the word */
                p = end_word;
                break;
            }
            /* base 0, as hwloc reads counts: "0030320" is octal 12496, not 30320 */
            char *end = NULL;
            unsigned long long n = strtoull(num, &end, 0);
            /* hwloc goes on reading after the digits base 0 accepts ("0383822" is 03, then a
             * level of 83822): a count must end the level or open its attributes */
            if (end < end_word && *end != '(') {
                *bad = p;
                return 0;
            }
            if (n > IG_TOPO_MAX_SYNTHETIC_OBJECTS) n = IG_TOPO_MAX_SYNTHETIC_OBJECTS + 1;
            if (n > *max_arity) *max_arity = (size_t)n;
            per_level *= n ? (size_t)n : 1;
            if (per_level > IG_TOPO_MAX_SYNTHETIC_OBJECTS) return IG_TOPO_MAX_SYNTHETIC_OBJECTS + 1;
            total += per_level;
            if (total > IG_TOPO_MAX_SYNTHETIC_OBJECTS) return IG_TOPO_MAX_SYNTHETIC_OBJECTS + 1;
            p = end; /* its attributes, and whatever follows them in the word */
        }
        p = end_word;
    }
    return total;
}

ig_status ig_topo_load_synthetic(const char *desc, ig_topo **out, ig_error *err) {
    if (!out || !desc)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "ig_topo_load_synthetic: no description");
    *out = NULL;
    if (strlen(desc) > 4096)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "synthetic topology of %zu characters: longer than 4096", strlen(desc));
    size_t arity = 0;
    /* hwloc separates levels at any white space; the count below only at blanks and tabs, so a
     * description with another control character (a vertical tab) could hide a level from it */
    for (const char *c = desc; *c; c++)
        if ((unsigned char)*c < 0x20 && *c != '\t')
            return ig_error_set(
                err, IG_ERR_INVALID_ARG,
                "synthetic topology: control character 0x%02x at offset %td (levels "
                "are separated by spaces)",
                (unsigned char)*c, c - desc);
    const char *bad = NULL;
    size_t objects = synthetic_objects(desc, &arity, &bad);
    if (bad)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "synthetic topology: level '%.*s' at offset %td: its count is not a "
                            "number (decimal, 0x hex or 0 octal) ending the level",
                            (int)strcspn(bad, " \t"), bad, bad - desc);
    if (objects > IG_TOPO_MAX_SYNTHETIC_OBJECTS)
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "synthetic topology '%.80s' asks for more than %d objects (the levels' "
                            "counts multiply): more than any real machine has",
                            desc, IG_TOPO_MAX_SYNTHETIC_OBJECTS);
    if (arity > IG_TOPO_MAX_SYNTHETIC_ARITY)
        return ig_error_set(
            err, IG_ERR_CAPACITY,
            "synthetic topology '%.80s' has a level of %zu objects under one parent: "
            "more than %d (hwloc's load time grows with the cube of it; split the "
            "level, e.g. 'pack:2 core:64 pu:2')",
            desc, arity, IG_TOPO_MAX_SYNTHETIC_ARITY);
    ig_topo *t = NULL;
    IG_TRY(topo_new(IG_TOPO_SRC_SYNTHETIC, desc, &t, err));
    if (hwloc_topology_set_synthetic(t->hw, desc) != 0 || hwloc_topology_load(t->hw) != 0) {
        ig_topo_free(t);
        char hint[128];
        synthetic_hint(desc, hint, sizeof hint);
        return ig_error_set(err, IG_ERR_FORMAT,
                            "bad synthetic topology '%s'%s (expected levels TYPE:COUNT from the "
                            "top down, e.g. \"pack:2 numa:1 core:4 pu:2\")",
                            desc, hint);
    }
    return topo_finish(t, out, err);
}

void ig_topo_free(ig_topo *t) {
    if (!t) return;
    if (t->hw) hwloc_topology_destroy(t->hw);
    free(t->numa);
    free(t->gpus);
    free(t->source_desc);
    free(t);
}

/* ---- accessors ------------------------------------------------------------------------------- */

ig_topo_source ig_topo_source_kind(const ig_topo *t) {
    return t->source;
}
const char *ig_topo_source_desc(const ig_topo *t) {
    return t->source_desc;
}
int ig_topo_is_this_system(const ig_topo *t) {
    return t->this_system;
}
int ig_topo_n_packages(const ig_topo *t) {
    return t->n_packages;
}
int ig_topo_n_cores(const ig_topo *t) {
    return t->n_cores;
}
int ig_topo_n_pus(const ig_topo *t) {
    return t->n_pus;
}
int ig_topo_n_numa(const ig_topo *t) {
    return t->n_numa;
}
const ig_topo_numa *ig_topo_numa_at(const ig_topo *t, int i) {
    return i >= 0 && i < t->n_numa ? &t->numa[i] : NULL;
}
int ig_topo_numa_find(const ig_topo *t, int os_index) {
    for (int i = 0; i < t->n_numa; i++)
        if (t->numa[i].os_index == os_index) return i;
    return -1;
}
size_t ig_topo_total_memory(const ig_topo *t) {
    size_t s = 0;
    for (int i = 0; i < t->n_numa; i++) s += t->numa[i].local_bytes;
    return s;
}
void ig_topo_numa_list(const ig_topo *t, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < t->n_numa && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%d", i ? ", " : "", t->numa[i].os_index);
        if (w < 0) break;
        len += (size_t)w;
    }
}
int ig_topo_n_gpus(const ig_topo *t) {
    return t->n_gpus;
}
const ig_topo_gpu *ig_topo_gpu_at(const ig_topo *t, int i) {
    return i >= 0 && i < t->n_gpus ? &t->gpus[i] : NULL;
}
int ig_topo_gpu_find_cuda(const ig_topo *t, int cuda_index) {
    for (int i = 0; i < t->n_gpus; i++)
        if (cuda_index >= 0 && t->gpus[i].cuda_index == cuda_index) return i;
    return -1;
}
struct hwloc_topology *ig_topo_hwloc(const ig_topo *t) {
    return t->hw;
}

ig_status ig_topo_fill_machine(const ig_topo *t, int gpu, ig_machine *m) {
    if (gpu >= 0 && t->n_gpus > 0 && gpu >= t->n_gpus) return IG_ERR_INVALID_ARG;
    memset(m, 0, sizeof *m);
    int n = t->n_numa;
    if (n > IG_MAX_NUMA) {
        IG_WARN("topology %s has %d NUMA nodes; planning with the first %d", t->source_desc, n,
                IG_MAX_NUMA);
        n = IG_MAX_NUMA;
    }
    m->n_numa = n;
    for (int i = 0; i < n; i++) {
        m->numa_os[i] = t->numa[i].os_index;
        m->numa_bytes[i] = t->numa[i].local_bytes;
    }
    m->device_numa = (gpu >= 0 && t->n_gpus > 0) ? t->gpus[gpu].numa : t->numa[0].os_index;
    return IG_OK;
}

/* ---- output ---------------------------------------------------------------------------------- */

static const char *source_kind_name(ig_topo_source s) {
    switch (s) {
    case IG_TOPO_SRC_THIS_SYSTEM:
        return "this_system";
    case IG_TOPO_SRC_XML:
        return "xml";
    case IG_TOPO_SRC_SYNTHETIC:
        return "synthetic";
    }
    return "?";
}

void ig_topo_print(const ig_topo *t, FILE *f) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if (t->source == IG_TOPO_SRC_THIS_SYSTEM)
        fprintf(f, "topology    this system\n");
    else
        fprintf(f, "topology    %s %s%s\n", t->source == IG_TOPO_SRC_XML ? "XML" : "synthetic",
                t->source_desc, t->this_system ? " (this system)" : " (not this system)");
    fprintf(f, "packages    %d\n", t->n_packages);
    fprintf(f, "cores       %d (%d PUs)\n", t->n_cores, t->n_pus);
    fprintf(f, "NUMA nodes  %d, %.1f GiB in all\n", t->n_numa,
            (double)ig_topo_total_memory(t) / gib);
    fprintf(f, "  %-6s %12s %6s %6s %8s\n", "node", "memory", "cores", "PUs", "package");
    for (int i = 0; i < t->n_numa; i++) {
        const ig_topo_numa *n = &t->numa[i];
        char pkg[16] = "-";
        if (n->package >= 0) snprintf(pkg, sizeof pkg, "%d", n->package);
        fprintf(f, "  %-6d %8.1f GiB %6d %6d %8s\n", n->os_index, (double)n->local_bytes / gib,
                n->n_cores, n->n_pus, pkg);
    }
    fprintf(f, "GPUs        %d\n", t->n_gpus);
    if (t->n_gpus == 0) return;
    fprintf(f, "  %-4s %-6s %-13s %-5s %s\n", "gpu", "cuda", "bus id", "node", "name");
    for (int i = 0; i < t->n_gpus; i++) {
        const ig_topo_gpu *g = &t->gpus[i];
        char cuda[16] = "-", node[16] = "?";
        if (g->cuda_index >= 0) snprintf(cuda, sizeof cuda, "cuda%d", g->cuda_index);
        if (g->numa >= 0) snprintf(node, sizeof node, "%d", g->numa);
        fprintf(f, "  %-4d %-6s %-13s %-5s %s%s\n", i, cuda, g->pci_bus_id[0] ? g->pci_bus_id : "-",
                node, g->name, g->cuda_index < 0 ? " (PCI device only, no CUDA OS device)" : "");
    }
}

json_object *ig_topo_to_json(const ig_topo *t) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "source", json_object_new_string(t->source_desc));
    json_object_object_add(o, "source_kind", json_object_new_string(source_kind_name(t->source)));
    json_object_object_add(o, "this_system", json_object_new_boolean(t->this_system));
    if (t->source == IG_TOPO_SRC_XML)
        json_object_object_add(o, "hwloc_xml_parser",
                               json_object_new_string(t->xml_parser == 1   ? "libxml2"
                                                      : t->xml_parser == 0 ? "minimal"
                                                                           : "unknown"));
    json_object_object_add(o, "packages", json_object_new_int(t->n_packages));
    json_object_object_add(o, "cores", json_object_new_int(t->n_cores));
    json_object_object_add(o, "pus", json_object_new_int(t->n_pus));
    json_object *nodes = json_object_new_array();
    for (int i = 0; i < t->n_numa; i++) {
        const ig_topo_numa *n = &t->numa[i];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "os_index", json_object_new_int(n->os_index));
        json_object_object_add(j, "memory_bytes", json_object_new_int64((int64_t)n->local_bytes));
        json_object_object_add(j, "cores", json_object_new_int(n->n_cores));
        json_object_object_add(j, "pus", json_object_new_int(n->n_pus));
        json_object_object_add(j, "package", json_object_new_int(n->package));
        json_object_array_add(nodes, j);
    }
    json_object_object_add(o, "numa_nodes", nodes);
    json_object *gpus = json_object_new_array();
    for (int i = 0; i < t->n_gpus; i++) {
        const ig_topo_gpu *g = &t->gpus[i];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "index", json_object_new_int(i));
        json_object_object_add(j, "cuda_index", json_object_new_int(g->cuda_index));
        json_object_object_add(j, "name", json_object_new_string(g->name));
        json_object_object_add(j, "pci_bus_id", json_object_new_string(g->pci_bus_id));
        json_object_object_add(j, "numa", json_object_new_int(g->numa));
        json_object_object_add(j, "memory_bytes", json_object_new_int64((int64_t)g->memory_bytes));
        json_object *osd = json_object_new_array();
        const char *p = g->os_devices;
        while (*p) {
            size_t len = strcspn(p, ",");
            json_object_array_add(osd, json_object_new_string_len(p, (int)len));
            p += len + (p[len] == ',');
        }
        json_object_object_add(j, "os_devices", osd);
        json_object_array_add(gpus, j);
    }
    json_object_object_add(o, "gpus", gpus);
    return o;
}
