/* A real Slurm submission: tools/slurm_local.sh starts a one-node cluster in the scratch
 * directory, ig_slurm_write + ig_slurm_submit send a 4-task array and its merge job, with a fake
 * igen (a shell script: `--point I --part` writes parts/point-I.json, task 2 fails on purpose,
 * `--merge` concatenates the parts into results.jsonl). Checks that every task ran with its index,
 * that the merge ran after all of them although one failed (afterany), that sbatch read the
 * quoted #SBATCH paths (a results directory with a space and a '%'), the per-task logs, and the
 * job name and throttle Slurm recorded. SKIPPED where the Slurm daemons are not installed (Debian:
 * slurmctld slurmd slurm-client). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/app/exp/slurm.h"
#include "tests/test_util.h"

#define N_POINTS 4
#define WAIT_S   120

static char *read_all(const char *path) {
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
    return buf;
}

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* True once `squeue` lists none of the given jobs (they all ended). */
static int jobs_done(const ig_slurm_jobs *j) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test -z \"$(squeue -h -j %s,%s 2>/dev/null)\"", j->array_id,
             j->merge_id);
    return sh(cmd) == 0;
}

static const char FAKE_IGEN[] =
    "#!/bin/bash\n"
    "# Fake igen for the Slurm test: run EXP --point I --part | run EXP --merge\n"
    "set -euo pipefail\n"
    "out=$IGEN_FAKE_OUT\n"
    "[ \"$1\" = run ] || exit 64\n"
    "case \"$3\" in\n"
    "--point)\n"
    "  i=$4; [ \"$5\" = --part ] || exit 65\n"
    "  [ \"$i\" = 2 ] && { echo \"point $i fails on purpose\" >&2; exit 3; }\n"
    "  mkdir -p \"$out/parts\"\n"
    "  printf '{\"point\": %d, \"set\": \"%s\", \"cwd\": \"%s\"}\\n' \"$i\" \"$7\" \"$PWD\" \\\n"
    "    > \"$out/parts/point-$(printf %06d \"$i\").json\"\n"
    "  echo \"point $i done\" ;;\n"
    "--merge)\n"
    "  cat \"$out\"/parts/point-*.json > \"$out/results.tmp\"\n"
    "  mv \"$out/results.tmp\" \"$out/results.jsonl\"\n"
    "  echo merged ;;\n"
    "*) exit 66 ;;\n"
    "esac\n";

static void stop_cluster(const char *cluster) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s/tools/slurm_local.sh' stop '%s'", IG_SOURCE_DIR, cluster);
    CU_ASSERT_EQUAL(sh(cmd), 0);
    unsetenv("SLURM_CONF");
}

static void test_real_array(void) {
    if (sh("'" IG_SOURCE_DIR "/tools/slurm_local.sh' check") != 0) {
        ig_test_skip("Slurm is not installed (apt-get install slurmctld slurmd slurm-client)");
        return;
    }
    char cluster[4300], res[4300], igen[4300], cmd[16000];
    snprintf(cluster, sizeof cluster, "%s/cluster", ig_test_tmpdir());
    snprintf(res, sizeof res, "%s/results dir 100%%", ig_test_tmpdir());
    snprintf(igen, sizeof igen, "%s/igen", ig_test_tmpdir());
    FILE *f = fopen(igen, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(FAKE_IGEN, f);
    fclose(f);
    chmod(igen, 0755);

    snprintf(cmd, sizeof cmd, "'%s/tools/slurm_local.sh' start '%s' >/dev/null", IG_SOURCE_DIR,
             cluster);
    if (sh(cmd) != 0) { /* the daemons' log went to stderr above */
        stop_cluster(cluster);
        /* installed but not runnable here (a container refusing the daemons): environmental,
         * like a missing GPU, so SKIPPED with the reason, never passed */
        ig_test_skip("Slurm is installed but a one-node cluster did not start on this machine "
                     "(its log is above)");
        return;
    }
    char conf[4400];
    snprintf(conf, sizeof conf, "%s/slurm.conf", cluster);
    setenv("SLURM_CONF", conf, 1);
    setenv("IGEN_FAKE_OUT", res, 1); /* sbatch exports the environment to the jobs */

    const char *sets[] = {"workload.batch=[4, 8]"};
    ig_slurm_opts o = {0};
    o.max_parallel = 2;
    o.cpus_per_task = 1;
    o.time_limit = "5";
    o.workdir = ig_test_tmpdir();
    char a[4400], m[4400];
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_slurm_write(NULL, igen, "/nowhere/exp.yaml", sets, 1, N_POINTS, res, &o, a,
                                  sizeof a, m, sizeof m, &err);
    if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, IG_OK);
    ig_slurm_jobs jobs = {{0}, {0}};
    if (rc == IG_OK) {
        rc = ig_slurm_submit(a, m, &jobs, &err);
        if (rc != IG_OK) fprintf(stderr, "\n    %s\n", err.msg);
        CU_ASSERT_EQUAL(rc, IG_OK);
    }
    char results[4400];
    snprintf(results, sizeof results, "%s/results.jsonl", res);
    int done = 0;
    for (int i = 0; rc == IG_OK && i < WAIT_S * 10 && !done; i++) {
        done = exists(results) && jobs_done(&jobs);
        if (!done) sleep_ms(100);
    }
    CU_ASSERT(done);
    if (!done) {
        snprintf(cmd, sizeof cmd, "squeue; tail -n 30 '%s/log/slurmctld.log'", cluster);
        sh(cmd);
    }

    /* The three good points, in order, each with its own index, the --set value and the workdir;
     * point 2 failed and the merge ran anyway. */
    char *text = read_all(results);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text) {
        char want[9000];
        size_t off = 0;
        for (int i = 0; i < N_POINTS; i++) {
            if (i == 2) continue;
            int w =
                snprintf(want, sizeof want, "{\"point\": %d, \"set\": \"%s\", \"cwd\": \"%s\"}\n",
                         i, sets[0], ig_test_tmpdir());
            int same = strncmp(text + off, want, (size_t)w) == 0;
            CU_ASSERT(same);
            if (!same) {
                fprintf(stderr, "\n    results.jsonl: %s\n", text);
                break;
            }
            off += (size_t)w;
        }
        CU_ASSERT_EQUAL(strlen(text), off);
        free(text);
    }
    /* Logs where --output said, in the directory with a space and a '%'. */
    for (int i = 0; i < N_POINTS; i++) {
        char log[4500], want[64];
        snprintf(log, sizeof log, "%s/slurm/point-%d.out", res, i);
        char *t = read_all(log);
        CU_ASSERT_PTR_NOT_NULL(t);
        snprintf(want, sizeof want, i == 2 ? "point %d fails on purpose" : "point %d done", i);
        if (t) CU_ASSERT_PTR_NOT_NULL(strstr(t, want));
        free(t);
    }
    char mlog[4500];
    snprintf(mlog, sizeof mlog, "%s/slurm/merge.out", res);
    char *t = read_all(mlog);
    CU_ASSERT_PTR_NOT_NULL(t);
    if (t) CU_ASSERT_PTR_NOT_NULL(strstr(t, "merged"));
    free(t);
    /* Slurm read the #SBATCH lines: the job name and the array's throttle (the records stay
     * MinJobAge=30 s after the end). */
    if (jobs.array_id[0]) {
        snprintf(cmd, sizeof cmd,
                 "scontrol show job %s_0 | grep -q 'JobName=igen-exp$' && "
                 "scontrol show job %s_0 | grep -q 'ArrayTaskThrottle=2'",
                 jobs.array_id, jobs.array_id);
        CU_ASSERT_EQUAL(sh(cmd), 0);
    }
    stop_cluster(cluster);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("slurm_local", NULL, NULL);
    CU_add_test(s, "real_array", test_real_array);
}
