/* igen profile-hw: measures this machine as a hardware profile for the CPU backend (the device is
 * the CPU: its f32 linear kernel at prefill- and decode-like shapes, memory read and copy
 * bandwidth, a temp file's disk bandwidth) and writes YAML that configs/hardware profiles share.
 * Leaves no file behind but the profile. */
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/app/cli/cli.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/measure.h"
#include "offload/hwprof.h"

static void help(void) {
    printf(
        "usage: igen profile-hw [--out FILE] [--disk-dir DIR] [--quick] [--threads N]\n\n"
        "Measures this machine for the CPU backend and writes a hardware profile (YAML, the\n"
        "schema of configs/hardware/, docs/planner.md): the device is the CPU (GFLOPS at\n"
        "a prefill shape 512x2048x2048 and a decode shape 8x4096x4096, 64 MiB of weights\n"
        "beyond the caches, through igen's own f32 linear kernel; memory read bandwidth),\n"
        "the device<->host link is a memcpy (half the copy bandwidth each way), the disk is a\n"
        "temporary file in DIR (O_DIRECT when the filesystem allows it; removed), capacities\n"
        "come from hwloc and statvfs. About 10-30 s; --quick takes a second (smaller, noisier).\n\n"
        "  --out FILE        write the profile here (default: print the YAML on stdout)\n"
        "  --disk-dir DIR    directory for the disk measurement (default: $TMPDIR or /tmp)\n"
        "  --quick           small buffers and one repetition (tests)\n"
        "  --name NAME       profile name (default: cpu-<hostname>)\n"
        "  --threads N       compute threads (default: all cores)\n"
        "  --kernel-shape H,KVH,HD\n"
        "                    also time the decode kernels a KV policy's step runs at this\n"
        "                    attention shape (query heads, KV heads, head dim; e.g. 9,3,64 for\n"
        "                    SmolLM2-135M): attention over f32 and over 4-bit rows, and a\n"
        "                    speculating policy's selection (the cost model prices attended\n"
        "                    rows and partial keys at these rates for models of this shape;\n"
        "                    without it, at memory bandwidth). igen run's 'hardware: this'\n"
        "                    passes the experiment model's shape.\n"
        "  --matmul-shape D,Q,KV,FF,NF,V,L,M\n"
        "                    also time one model's decode matmuls at its own shapes, f32\n"
        "                    weights, M rows (the GPU batch): a layer's chain (q: Q x D,\n"
        "                    k and v: KV x D, o: D x Q, NF = 3: gate, up FF x D and down\n"
        "                    D x FF; NF = 2: fc1, fc2 as OPT; q/k/v and gate/up one call\n"
        "                    each, as the layer runs them) over L copies of the layer\n"
        "                    (fewer if they pass 4 GiB), then the logits (V x D), a step's\n"
        "                    working set; e.g. 576,576,192,1536,3,49152,30,8 for\n"
        "                    SmolLM2-135M at batch 8. The cost model prices that model's\n"
        "                    decode matmuls at these rates (small shapes stream slower\n"
        "                    than the one large decode shape).\n"
        "                    igen run's 'hardware: this' passes the first point's shape.\n"
        "  -h, --help        this help\n");
}

static int clampi(double v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : (int)v;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Writes then reads `bytes` through one unlinked temp file in dir. */
static int measure_disk(const char *dir, size_t bytes, double *rd, double *wr, int *direct,
                        char *why, size_t nwhy) {
    char path[4096];
    snprintf(path, sizeof path, "%s/igen-profile-hw-%d.tmp", dir, (int)getpid());
    *direct = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
        *direct = 0;
        fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0) {
        snprintf(why, nwhy, "%s: cannot create a temporary file: %s", dir, strerror(errno));
        return -1;
    }
    unlink(path); /* nothing is left behind, whatever happens next */
    const size_t chunk = 1 << 20;
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, chunk)) {
        close(fd);
        snprintf(why, nwhy, "out of memory");
        return -1;
    }
    memset(buf, 0x5a, chunk);
    int rc = 0;
    double t0 = now_s();
    for (size_t off = 0; off < bytes && rc == 0; off += chunk)
        if (write(fd, buf, chunk) != (ssize_t)chunk) rc = -1;
    if (rc == 0 && fdatasync(fd) != 0) rc = -1;
    double t1 = now_s();
    if (rc) {
        snprintf(why, nwhy, "%s: writing the temporary file failed: %s", dir, strerror(errno));
        free(buf);
        close(fd);
        return -1;
    }
    if (!*direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (lseek(fd, 0, SEEK_SET) != 0) rc = -1;
    double t2 = now_s();
    for (size_t off = 0; off < bytes && rc == 0; off += chunk)
        if (read(fd, buf, chunk) != (ssize_t)chunk) rc = -1;
    double t3 = now_s();
    free(buf);
    close(fd);
    if (rc) {
        snprintf(why, nwhy, "%s: reading the temporary file back failed: %s", dir, strerror(errno));
        return -1;
    }
    *wr = (double)bytes / (t1 - t0) / 1e9;
    *rd = (double)bytes / (t3 - t2) / 1e9;
    return 0;
}

/* NUMA nodes (OS index, bytes) from hwloc; falls back to sysconf for one node. */
static int numa_nodes(ig_hwprof *p) {
    hwloc_topology_t topo;
    int n = 0;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            int cnt = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
            for (int i = 0; i < cnt && n < IG_MAX_NUMA; i++) {
                hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
                if (!o || !o->attr || !o->attr->numanode.local_memory) continue;
                p->host.numa[n].os_index = (int)o->os_index;
                p->host.numa[n].memory_gib = (double)o->attr->numanode.local_memory / 1073741824.0;
                n++;
            }
        }
        hwloc_topology_destroy(topo);
    }
    if (n == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        p->host.numa[0].os_index = 0;
        p->host.numa[0].memory_gib = (double)pages * (double)psz / 1073741824.0;
        n = 1;
    }
    p->host.n_numa = n;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += p->host.numa[i].memory_gib;
    p->host.memory_gib = sum;
    return n;
}

/* The decode matmuls of one model shape (see --matmul-shape) as a step runs them: a layer's chain
 * over as many copies of the layer as fit 4 GiB (at most L), then the logits; GFLOP/s of each into
 * *layer and *logits, the copies into *sets (may be NULL). Returns 0, or -1 when the measurement
 * failed (out of memory). */
int ig_cli_measure_matmul_shape(int md, int mq, int mkv, int mff, int mnf, int mv, int ml, int mm,
                                int quick, double *layer, double *logits, int *sets) {
    /* q, k, v in one call, o, gate and up in one call, down (core/engine/layer.c) */
    int outs[7] = {mq, mkv, mkv, md, mff, mff, md}, ins[7] = {md, md, md, mq, md, md, mff};
    int calls[7] = {0, 0, 0, 1, 2, 2, 3};
    int nm = 7;
    if (mnf == 2) { /* fc1 FF x D, fc2 D x FF */
        outs[5] = md;
        ins[5] = mff;
        calls[5] = 3;
        nm = 6;
    }
    double lb = 0;
    for (int i = 0; i < nm; i++) lb += 4.0 * outs[i] * ins[i];
    double cap = (quick ? 32.0 : 4096.0) * 1048576 - 4.0 * mv * md;
    int lsets = clampi(floor(cap / lb), 1, ml);
    *layer = *logits = 0;
    if (sets) *sets = lsets;
    if (ig_cpu_measure_step_matmuls(mm, outs, ins, calls, nm, lsets, mv, md, quick ? 3 : 9, layer,
                                    logits) != 0 ||
        !(*layer > 0 && *logits > 0))
        return -1;
    return 0;
}

int ig_cmd_profile_hw(int argc, char **argv) {
    enum { O_OUT = IG_OPT_FIRST_FREE, O_DIR, O_QUICK, O_NAME, O_THREADS, O_SHAPE, O_MSHAPE };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, O_OUT},
        {"disk-dir", required_argument, NULL, O_DIR},
        {"quick", no_argument, NULL, O_QUICK},
        {"name", required_argument, NULL, O_NAME},
        {"threads", required_argument, NULL, O_THREADS},
        {"kernel-shape", required_argument, NULL, O_SHAPE},
        {"matmul-shape", required_argument, NULL, O_MSHAPE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL, *dir = NULL, *name = NULL;
    int quick = 0, opt, kh = 0, kkv = 0, khd = 0;
    int md = 0, mq = 0, mkv = 0, mff = 0, mnf = 0, mv = 0, ml = 0, mm = 0;
    long v;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_OUT:
            out = optarg;
            break;
        case O_DIR:
            dir = optarg;
            break;
        case O_QUICK:
            quick = 1;
            break;
        case O_NAME:
            name = optarg;
            break;
        case O_THREADS:
            if (ig_cli_parse_int("profile-hw", "--threads", optarg, 1, 1024, &v))
                return IG_EXIT_ERROR;
            ig_cpu_set_threads((int)v);
            break;
        case O_SHAPE: {
            char tail = 0;
            if (sscanf(optarg, "%d,%d,%d%c", &kh, &kkv, &khd, &tail) != 3 || kh < 1 || kkv < 1 ||
                kh > 1024 || kkv > 64 || kh % kkv || kh / kkv > 16 || khd < 1 || khd > 1024) {
                fprintf(stderr,
                        "igen profile-hw: --kernel-shape '%s': expected H,KVH,HD (query heads, "
                        "KV heads dividing them, at most 64 KV heads and 16 query heads per KV "
                        "head, head dim 1..1024), e.g. 9,3,64\n",
                        optarg);
                return IG_EXIT_ERROR;
            }
            break;
        }
        case O_MSHAPE: {
            char tail = 0;
            if (sscanf(optarg, "%d,%d,%d,%d,%d,%d,%d,%d%c", &md, &mq, &mkv, &mff, &mnf, &mv, &ml,
                       &mm, &tail) != 8 ||
                md < 1 || md > 65536 || mq < 1 || mq > 65536 || mkv < 1 || mkv > 65536 || mff < 1 ||
                mff > 262144 || (mnf != 2 && mnf != 3) || mv < 1 || mv > 1048576 || ml < 1 ||
                ml > 4096 || mm < 1 || mm > 4096 || 4.0 * mv * md > 2.0 * 1073741824.0) {
                fprintf(stderr,
                        "igen profile-hw: --matmul-shape '%s': expected D,Q,KV,FF,NF,V,L,M "
                        "(d_model, query dim, KV dim, FFN dim, FFN matrices 2 or 3, vocabulary, "
                        "layers, rows 1..4096; dims 1..65536, FFN up to 262144, vocabulary up to "
                        "1048576, layers up to 4096, the lm_head at most 2 GiB in f32), e.g. "
                        "576,576,192,1536,3,49152,30,8\n",
                        optarg);
                return IG_EXIT_ERROR;
            }
            break;
        }
        default:
            fprintf(stderr, "igen profile-hw: see 'igen profile-hw --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("profile-hw", argc, argv)) return IG_EXIT_ERROR;
    if (!dir) {
        const char *t = getenv("TMPDIR");
        dir = t && *t ? t : "/tmp";
    }
    ig_hwprof *p = calloc(1, sizeof *p);
    if (!p) return IG_EXIT_ERROR;
    p->device.numa_node = -1;
    char host[256] = "machine";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    if (name)
        snprintf(p->name, sizeof p->name, "%s", name);
    else
        snprintf(p->name, sizeof p->name, "cpu-%.100s", host);

    /* disk first: it fails fast on a bad directory, before the long measurements */
    size_t disk_bytes = quick ? (size_t)16 << 20 : (size_t)256 << 20;
    double drd = 0, dwr = 0;
    int direct = 0;
    char why[4400];
    if (measure_disk(dir, disk_bytes, &drd, &dwr, &direct, why, sizeof why)) {
        fprintf(stderr, "igen profile-hw: %s\n", why);
        free(p);
        return IG_EXIT_ERROR;
    }
    struct statvfs sv;
    double disk_free_gib = 0;
    if (statvfs(dir, &sv) == 0)
        disk_free_gib = (double)sv.f_bavail * (double)sv.f_frsize / 1073741824.0;

    size_t bw_bytes = quick ? (size_t)32 << 20 : (size_t)512 << 20;
    int reps = quick ? 2 : 5;
    double rd_bw = ig_cpu_measure_bandwidth_gbps(bw_bytes, 0, reps);
    double cp_bw = ig_cpu_measure_copy_bandwidth_gbps(bw_bytes, 0, reps);
    int pm = quick ? 128 : 512, pn = quick ? 256 : 2048, dm = quick ? 4 : 8;
    /* both through ig_cpu_linear, the kernel the engine runs (sgemm for large M; its own
     * row-streaming path for decode's small M, faster there than sgemm) */
    double g_pre = ig_cpu_measure_linear_gflops(pm, pn, pn, reps);
    /* decode: a weight matrix well beyond the last-level cache (64 MiB in f32), as a decode step
     * streams every layer's weights from memory */
    int dn = quick ? pn : 4096;
    /* the median of 9 timed calls, not the best: the cost model predicts a typical run, and the
     * best of a few calls was 10-20% above what a decode step's matmuls reach here */
    double gd[9];
    int nd = quick ? 3 : 9;
    for (int i = 0; i < nd; i++) gd[i] = ig_cpu_measure_linear_gflops(dm, dn, dn, 1);
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0 && gd[j - 1] > gd[j]; j--) {
            double t = gd[j];
            gd[j] = gd[j - 1];
            gd[j - 1] = t;
        }
    double g_dec = gd[nd / 2];
    if (!(rd_bw > 0 && cp_bw > 0 && g_pre > 0 && g_dec > 0)) {
        fprintf(stderr, "igen profile-hw: a measurement failed (out of memory?)\n");
        free(p);
        return IG_EXIT_ERROR;
    }
    /* the decode kernels at the given attention shape, each sequence's rows as one call reads
     * them (1024 rows or entries: the middle of the quickstart's lengths) and as many sequences as
     * make what the kernel reads at least the last-level cache (and 512 MiB): a step streams
     * every layer's rows and weights past the cache, and a probe that fits in it is flattered
     * (docs/planner.md, "Decode-kernel rates", has the figures of this project's VM); the
     * scattered probe allocates
     * five times what it reads, at most 1 GiB. The selection with InfiniGen's default 20% of the
     * columns, keeping 20% of the entries */
    double a32 = 0, a4 = 0, asp = 0, sel = 0, adn = 0, apr = 0;
    int kc = 0, s32 = 0, s4 = 0, ssp = 0, ssel = 0;
    const int64_t arows = 1024, srows = 1024;
    double tgt = 0;
    if (kh > 0) {
        long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
        tgt = quick ? 8.0 * 1048576 : 512.0 * 1048576;
        if (!quick && llc > tgt && llc < (8L << 30)) tgt = (double)llc;
        kc = (int)ceil(0.2 * khd - 1e-9);
        int grp4 = khd < 64 ? khd : 64;
        double b32 = (double)arows * kkv * 2.0 * khd * 4.0;
        double b4 = (double)arows * kkv * 2.0 * (double)(khd / grp4) * (4.0 + grp4 / 2.0);
        double bsel = (double)srows * kkv * kc * 2.0;
        s32 = clampi(tgt / b32, 8, 8192);
        s4 = clampi(tgt / b4, 8, 8192);
        ssp = clampi(fmin(tgt / (b32 / 5), 1073741824.0 / b32), 8, 8192);
        ssel = clampi(tgt / bsel, 8, 8192);
        /* medians of at least 15 passes of a few ms each, and of as many more as fill a second:
         * this VM's speed moves from one second to the next, and 15 passes (20-100 ms) caught
         * single fast or slow moments (a layer-matmul rate of 141 GFLOPS where profiles minutes
         * before gave 103-117) */
        int kr = quick ? 3 : 15;
        ig_cpu_measure_set_min_seconds(quick ? 0 : 1.0);
        a32 = ig_cpu_measure_attention_gbps(kh, kkv, khd, s32, arows, 1, 0, kr);
        a4 = khd % grp4 == 0 ? ig_cpu_measure_attention_gbps(kh, kkv, khd, s4, arows, 1, 4, kr) : 0;
        asp = ig_cpu_measure_attention_gbps(kh, kkv, khd, ssp, arows, 5, 0, kr);
        /* the dense kernel over contiguous rows (stride 0), the engine's path for a dense policy
         * whose f32 rows never move: no index lists, and the hardware prefetchers see one stream
         * per head (on an AMD EPYC VM 1.5x the gather kernel's rate, on a Xeon VM about equal) */
        adn = ig_cpu_measure_attention_gbps(kh, kkv, khd, s32, arows, 0, 0, kr);
        /* as H2O runs it: the kernel writes every query head's probabilities, and each is added
         * to its row's score */
        apr = ig_cpu_measure_attention_probs_gbps(kh, kkv, khd, s32, arows, kr);
        sel = ig_cpu_measure_select_gbps(kh, kkv, kc, ssel, srows, 0.2, kr);
        if (!(a32 > 0 && asp > 0 && sel > 0 && adn > 0 && apr > 0)) {
            fprintf(stderr,
                    "igen profile-hw: a decode-kernel measurement failed (out of memory?)\n");
            free(p);
            return IG_EXIT_ERROR;
        }
        p->device.attn_gbps = a32;
        p->device.attn_int4_gbps = a4;
        p->device.attn_sparse_gbps = asp;
        p->device.attn_dense_gbps = adn;
        p->device.attn_probs_gbps = apr;
        p->device.select_gbps = sel;
        snprintf(p->device.kernel_shape, sizeof p->device.kernel_shape, "%d,%d,%d", kh, kkv, khd);
    }
    /* the model's decode matmuls at its own shapes and with a step's working set: a layer's chain
     * over one copy per layer of the model (fewer when they would pass 4 GiB), then the logits;
     * medians of at least 9 passes and a second of them (as the kernels above) */
    double g_layer = 0, g_logits = 0;
    int lsets = 0;
    if (mm > 0) {
        if (ig_cli_measure_matmul_shape(md, mq, mkv, mff, mnf, mv, ml, mm, quick, &g_layer,
                                        &g_logits, &lsets) != 0) {
            fprintf(stderr, "igen profile-hw: --matmul-shape: the matmul measurement failed (out "
                            "of memory, or more than 8 GiB of weights?)\n");
            free(p);
            return IG_EXIT_ERROR;
        }
        p->device.gemm_tflops_layer = g_layer / 1000;
        p->device.gemm_tflops_logits = g_logits / 1000;
        snprintf(p->device.matmul_shape, sizeof p->device.matmul_shape, "%d,%d,%d,%d,%d,%d,%d,%d",
                 md, mq, mkv, mff, mnf, mv, ml, mm);
    }
    numa_nodes(p);
    snprintf(p->device.name, sizeof p->device.name, "CPU (%d threads, %s)", ig_cpu_get_threads(),
             ig_cpu_simd_name());
    p->device.memory_gib = p->host.memory_gib;
    p->device.gemm_tflops = g_pre / 1000;
    p->device.gemm_tflops_decode = g_dec / 1000;
    p->device.mem_bandwidth_gbps = rd_bw;
    p->device.numa_node = p->host.numa[0].os_index;
    p->host.cpu_gflops = g_pre;
    p->host.mem_bandwidth_gbps = rd_bw;
    p->link.h2d_gbps = cp_bw / 2;
    p->link.d2h_gbps = cp_bw / 2;
    p->has_disk = 1;
    p->disk.read_gbps = drd;
    p->disk.write_gbps = dwr;
    p->disk.capacity_gib = disk_free_gib;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    snprintf(p->description, sizeof p->description,
             "measured by igen profile-hw%s on %.100s, %s, %d threads", quick ? " --quick" : "",
             host, date, ig_cpu_get_threads());
    char kern[1536] = "";
    if (kh > 0)
        snprintf(kern, sizeof kern,
                 "\nattn_gbps / attn_int4_gbps: igen's decode attention (ig_cpu_attention_gather) "
                 "at kernel_shape\n"
                 "(query heads, KV heads, head dim), %d / %d sequences x %lld rows read through "
                 "index lists, f32 rows / 4-bit\n"
                 "codes decoded in the kernel, in GB/s of f32-equivalent KV; attn_sparse_gbps: "
                 "the same over every fifth\n"
                 "row of %d sequences (f32); attn_dense_gbps: the %d f32 sequences through the "
                 "dense\nkernel (ig_cpu_attention, contiguous rows, no index lists); "
                 "attn_probs_gbps: as attn_gbps, the\nkernel also writing each query head's "
                 "probabilities and each added to its row's sum (H2O's\nscoring); select_gbps: "
                 "InfiniGen's selection (partial\n"
                 "scores over %d f16 columns, threshold counts, top 20%%) over %d x %lld entries, "
                 "in GB/s of partial keys;\n"
                 "each probe reads %.0f MiB per pass (at least the last-level cache) but the "
                 "scattered one (1 GiB allocated).",
                 s32, s4, (long long)arows, ssp, s32, kc, ssel, (long long)srows, tgt / 1048576);
    if (mm > 0) {
        size_t kl = strlen(kern);
        snprintf(kern + kl, sizeof kern - kl,
                 "\ngemm_tflops_layer / gemm_tflops_logits: igen's f32 linear kernel at "
                 "matmul_shape (d_model, q, kv,\n"
                 "ffn, ffn matrices, vocab, layers, rows): one layer's matmuls in order over %d "
                 "copies of the layer, then\n"
                 "the logits, as a decode step streams them (median of passes).",
                 lsets);
    }
    char comment[4096];
    snprintf(comment, sizeof comment,
             "Hardware profile of this machine for igen's CPU backend, written by igen "
             "profile-hw%s.\n"
             "device = the CPU: gemm_tflops is igen's f32 linear kernel at %dx%dx%d, "
             "gemm_tflops_decode at "
             "%dx%dx%d (median of calls; sgemm for large M,\n"
             "%d threads); mem_bandwidth_gbps is the read bandwidth over %zu MiB. The device and "
             "the host\n"
             "share the same RAM, so device.memory_gib is all of it: lower it to the region the "
             "device may use.\n"
             "link = a memcpy: half the copy bandwidth (%.2f GB/s read+written) each way.\n"
             "disk = %zu MiB written (then fdatasync) and read back in %s, %s.%s",
             quick ? " --quick" : "", pm, pn, pn, dm, dn, dn, ig_cpu_get_threads(), bw_bytes >> 20,
             cp_bw, disk_bytes >> 20, dir,
             direct ? "with O_DIRECT" : "without O_DIRECT (the page cache may flatter reads)",
             kern);
    ig_error err;
    ig_error_clear(&err);
    int rc = 0;
    if (out) {
        /* written beside OUT, read back and compared, then renamed into place: a profile that
         * would not load back as written never appears under OUT */
        static ig_hwprof check;
        char part[4200];
        snprintf(part, sizeof part, "%s.part-%d", out, (int)getpid());
        ig_status st = ig_hwprof_save(p, part, comment, &err);
        if (st == IG_OK) st = ig_hwprof_load(part, &check, &err);
        if (st == IG_OK &&
            (strcmp(check.name, p->name) || strcmp(check.device.name, p->device.name)))
            st = ig_error_set(&err, IG_ERR_FORMAT,
                              "%s: the profile's name or device name does not read back as "
                              "given (not UTF-8?): '%s' became '%s'",
                              out, p->name, check.name);
        if (st == IG_OK && rename(part, out) != 0)
            st = ig_error_set(&err, IG_ERR_IO, "%s: cannot rename %s into place: %s", out, part,
                              strerror(errno));
        if (st != IG_OK) {
            remove(part);
            ig_cli_error("profile-hw", &err);
            rc = IG_EXIT_ERROR;
        } else {
            printf("profile    %s -> %s\n", p->name, out);
            printf("device     %s: linear kernel %.1f GFLOPS (prefill shape), %.1f GFLOPS (decode "
                   "shape)\n",
                   p->device.name, g_pre, g_dec);
            if (mm > 0)
                printf("matmuls    at %s: %.1f GFLOPS (a layer), %.1f GFLOPS (logits)\n",
                       p->device.matmul_shape, g_layer, g_logits);
            printf("memory     read %.2f GB/s, copy %.2f GB/s; %.1f GiB in %d NUMA node(s)\n",
                   rd_bw, cp_bw, p->host.memory_gib, p->host.n_numa);
            printf("disk       %s: read %.2f GB/s, write %.2f GB/s%s, %.0f GiB free\n", dir, drd,
                   dwr, direct ? " (O_DIRECT)" : " (page cache)", disk_free_gib);
        }
    } else {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s/igen-profile-hw-%d.yaml", dir, (int)getpid());
        if (ig_hwprof_save(p, tmp, comment, &err) != IG_OK) {
            ig_cli_error("profile-hw", &err);
            rc = IG_EXIT_ERROR;
        } else {
            FILE *f = fopen(tmp, "rb");
            char b[4096];
            size_t n;
            while (f && (n = fread(b, 1, sizeof b, f)) > 0) fwrite(b, 1, n, stdout);
            if (f) fclose(f);
            remove(tmp);
        }
    }
    free(p);
    return rc;
}
