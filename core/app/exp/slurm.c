/* Slurm job-array scripts for experiments and their submission (see slurm.h). */
#include "core/app/exp/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PATH_MAX_IG 4096

/* ---- quoting ----------------------------------------------------------------------------------
 */

static int shell_safe(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_@%+=:,./-", c) != NULL;
}

size_t ig_slurm_shell_quote(const char *s, char *out, size_t n) {
    int bare = s[0] != '\0';
    for (const char *p = s; *p && bare; p++) bare = shell_safe((unsigned char)*p);
    size_t len = 0;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (len + 1 < n) out[len] = (ch);                                                          \
        len++;                                                                                     \
    } while (0)
    if (bare) {
        for (const char *p = s; *p; p++) PUT(*p);
    } else {
        PUT('\'');
        for (const char *p = s; *p; p++) {
            if (*p == '\'') {
                PUT('\'');
                PUT('\\');
                PUT('\'');
                PUT('\'');
            } else {
                PUT(*p);
            }
        }
        PUT('\'');
    }
#undef PUT
    if (n > 0) out[len < n ? len : n - 1] = '\0';
    return len;
}

ig_status ig_slurm_sbatch_escape(const char *s, char *out, size_t n, ig_error *err) {
    /* sbatch's #SBATCH parser (src/sbatch/opt.c, _get_argument): a backslash takes the next
     * character literally, double quotes let spaces through, and an unescaped '#' starts a comment
     * (even inside quotes in old versions). A backslash before a space does not work (the loop
     * tests for a space before it looks at the escape), hence the quotes. */
    int quote = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '\n' || *p == '\r')
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "'%s': an #SBATCH option cannot hold a line break", s);
        if (strchr(" \t'\"\\#", *p)) quote = 1;
    }
    size_t len = 0;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (len + 1 >= n)                                                                          \
            return ig_error_set(err, IG_ERR_CAPACITY, "'%.64s...': too long for an #SBATCH line",  \
                                s);                                                                \
        out[len++] = (ch);                                                                         \
    } while (0)
    if (quote) PUT('"');
    for (const char *p = s; *p; p++) {
        if (strchr("'\"\\#", *p)) PUT('\\');
        PUT(*p);
    }
    if (quote) PUT('"');
#undef PUT
    if (n == 0) return ig_error_set(err, IG_ERR_CAPACITY, "no room for an #SBATCH value");
    out[len] = '\0';
    return IG_OK;
}

/* ---- a growing text buffer --------------------------------------------------------------------
 */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = 1;
        return;
    }
    if (b->len + (size_t)need + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)need + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)need;
}

/* Appends " " + s shell-quoted. */
static void sb_word(sbuf *b, const char *s) {
    size_t need = ig_slurm_shell_quote(s, NULL, 0);
    char *q = malloc(need + 1);
    if (!q) {
        b->oom = 1;
        return;
    }
    ig_slurm_shell_quote(s, q, need + 1);
    sb_add(b, " %s", q);
    free(q);
}

/* Appends "#SBATCH --OPT=VALUE\n" with VALUE escaped for sbatch. For a file name pattern, value
 * is the directory, whose '%' are doubled so that sbatch keeps them literal, and raw_tail the file
 * name pattern (e.g. "point-%a.out"), appended as is. */
static ig_status sb_sbatch(sbuf *b, const char *opt, const char *value, const char *raw_tail,
                           ig_error *err) {
    char dbl[2 * PATH_MAX_IG], esc[4 * PATH_MAX_IG];
    const char *v = value;
    if (raw_tail) {
        size_t k = 0;
        for (const char *p = value; *p; p++) {
            if (k + 3 >= sizeof dbl)
                return ig_error_set(err, IG_ERR_CAPACITY, "--%s: value too long", opt);
            if (*p == '%') dbl[k++] = '%';
            dbl[k++] = *p;
        }
        if (k + strlen(raw_tail) + 2 > sizeof dbl)
            return ig_error_set(err, IG_ERR_CAPACITY, "--%s: value too long", opt);
        snprintf(dbl + k, sizeof dbl - k, "/%s", raw_tail);
        v = dbl;
    }
    ig_status rc = ig_slurm_sbatch_escape(v, esc, sizeof esc, err);
    if (rc != IG_OK) {
        ig_error_prefix(err, "--%s: ", opt);
        return rc;
    }
    sb_add(b, "#SBATCH --%s=%s\n", opt, esc);
    return IG_OK;
}

/* ---- files ------------------------------------------------------------------------------------
 */

static ig_status make_abs(const char *cwd, const char *path, char *out, size_t n, ig_error *err) {
    int w = path[0] == '/' ? snprintf(out, n, "%s", path) : snprintf(out, n, "%s/%s", cwd, path);
    if (w < 0 || (size_t)w >= n)
        return ig_error_set(err, IG_ERR_CAPACITY, "path too long: %s", path);
    /* Drop a trailing slash (not the root's) so that joined names read cleanly. */
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = '\0';
    return IG_OK;
}

static ig_status mkdir_p(const char *dir, ig_error *err) {
    char tmp[PATH_MAX_IG];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return ig_error_set(err, IG_ERR_CAPACITY, "path too long: %s", dir);
    for (char *p = tmp + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return ig_error_set(err, IG_ERR_IO, "cannot create directory %s: %s", tmp,
                                    strerror(errno));
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ig_error_set(err, IG_ERR_IO, "%s is not a directory", dir);
    return IG_OK;
}

/* Writes text to path via a temporary file and rename, mode 0755. */
static ig_status write_script(const char *path, const char *text, size_t len, ig_error *err) {
    char tmp[PATH_MAX_IG + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || chmod(tmp, 0755) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ig_error_set(err, IG_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return IG_OK;
}

static int has_newline(const char *s) {
    return strchr(s, '\n') || strchr(s, '\r');
}

/* The experiment file's name without directory and extension. */
static void file_stem(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len >= n) len = n - 1;
    memcpy(out, base, len);
    out[len] = '\0';
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
}

/* ---- the scripts ------------------------------------------------------------------------------
 */

typedef struct script_ctx {
    const char *igen, *exp, *workdir, *results, *scripts;
    const char *const *sets;
    int n_sets;
    const ig_slurm_opts *o;
} script_ctx;

/* The lines both scripts share: shebang, job name, log file, partition/account/qos. */
static ig_status common_head(sbuf *b, const script_ctx *c, const char *job_name,
                             const char *log_name, ig_error *err) {
    const ig_slurm_opts *o = c->o;
    sb_add(b, "#!/bin/bash\n");
    IG_TRY(sb_sbatch(b, "job-name", job_name, NULL, err));
    IG_TRY(sb_sbatch(b, "output", c->scripts, log_name, err));
    if (o->partition) IG_TRY(sb_sbatch(b, "partition", o->partition, NULL, err));
    if (o->account) IG_TRY(sb_sbatch(b, "account", o->account, NULL, err));
    if (o->qos) IG_TRY(sb_sbatch(b, "qos", o->qos, NULL, err));
    return IG_OK;
}

/* The user's raw options, a comment saying what the script is, and the shell prologue. */
static void common_tail(sbuf *b, const script_ctx *c, const char *what) {
    for (int i = 0; i < c->o->n_extra; i++) sb_add(b, "#SBATCH %s\n", c->o->extra_sbatch[i]);
    sb_add(b, "# %s\n# Written by igen for the results directory %s\nset -euo pipefail\ncd", what,
           c->results);
    sb_word(b, c->workdir);
    sb_add(b, "\nexec");
    sb_word(b, c->igen);
    sb_add(b, " run");
    sb_word(b, c->exp);
}

static void igen_sets(sbuf *b, const script_ctx *c) {
    for (int i = 0; i < c->n_sets; i++) {
        sb_add(b, " --set");
        sb_word(b, c->sets[i]);
    }
}

static ig_status array_text(sbuf *b, const script_ctx *c, const char *job_name, int n_points,
                            ig_error *err) {
    const ig_slurm_opts *o = c->o;
    char v[64];
    IG_TRY(common_head(b, c, job_name, "point-%a.out", err));
    if (o->max_parallel > 0)
        snprintf(v, sizeof v, "0-%d%%%d", n_points - 1, o->max_parallel);
    else
        snprintf(v, sizeof v, "0-%d", n_points - 1);
    sb_add(b, "#SBATCH --array=%s\n", v);
    if (o->time_limit) IG_TRY(sb_sbatch(b, "time", o->time_limit, NULL, err));
    if (o->cpus_per_task > 0) sb_add(b, "#SBATCH --cpus-per-task=%d\n", o->cpus_per_task);
    if (o->gpus_per_task > 0) sb_add(b, "#SBATCH --gres=gpu:%d\n", o->gpus_per_task);
    if (o->mem) IG_TRY(sb_sbatch(b, "mem", o->mem, NULL, err));
    char what[128];
    snprintf(what, sizeof what, "One task per experiment point (%d points).", n_points);
    common_tail(b, c, what);
    sb_add(b, " --point \"$SLURM_ARRAY_TASK_ID\" --part");
    igen_sets(b, c);
    for (int i = 0; i < o->n_point_args; i++) sb_word(b, o->point_args[i]);
    sb_add(b, "\n");
    return IG_OK;
}

static ig_status merge_text(sbuf *b, const script_ctx *c, const char *job_name, ig_error *err) {
    IG_TRY(common_head(b, c, job_name, "merge.out", err));
    common_tail(b, c,
                "Runs after every array task has ended (afterany): folds parts/ into "
                "results.jsonl, writes results.csv and the plots.");
    sb_add(b, " --merge");
    igen_sets(b, c);
    sb_add(b, "\n");
    return IG_OK;
}

static ig_status check_arg(const char *what, const char *s, ig_error *err) {
    if (!s || !*s) return ig_error_set(err, IG_ERR_INVALID_ARG, "slurm: %s is empty", what);
    if (has_newline(s))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "slurm: %s '%s' contains a line break", what,
                            s);
    return IG_OK;
}

static ig_status copy_out(const char *path, char *out, size_t n, ig_error *err) {
    if (!out) return IG_OK;
    if ((size_t)snprintf(out, n, "%s", path) >= n)
        return ig_error_set(err, IG_ERR_CAPACITY, "slurm: no room for the path %s", path);
    return IG_OK;
}

ig_status ig_slurm_write(const char *script_dir, const char *igen_path, const char *exp_path,
                         const char *const *sets, int n_sets, int n_points, const char *results_dir,
                         const ig_slurm_opts *o, char *array_script, size_t n1, char *merge_script,
                         size_t n2, ig_error *err) {
    static const ig_slurm_opts none;
    if (!o) o = &none;
    IG_TRY(check_arg("the igen path", igen_path, err));
    IG_TRY(check_arg("the experiment path", exp_path, err));
    IG_TRY(check_arg("the results directory", results_dir, err));
    if (script_dir) IG_TRY(check_arg("the script directory", script_dir, err));
    if (n_points < 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "slurm: the experiment has no points (%d)",
                            n_points);
    if (n_sets < 0 || (n_sets > 0 && !sets) || o->n_extra < 0 || o->n_extra > IG_SLURM_MAX_EXTRA ||
        o->n_point_args < 0 || (o->n_point_args > 0 && !o->point_args))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "slurm: bad argument counts");
    for (int i = 0; i < n_sets; i++) IG_TRY(check_arg("a --set value", sets[i], err));
    for (int i = 0; i < o->n_point_args; i++)
        IG_TRY(check_arg("an igen argument", o->point_args[i], err));
    for (int i = 0; i < o->n_extra; i++) {
        IG_TRY(check_arg("an sbatch option", o->extra_sbatch[i], err));
        if (o->extra_sbatch[i][0] != '-')
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "slurm: sbatch option '%s' does not start with '-'",
                                o->extra_sbatch[i]);
    }
    if (o->cpus_per_task < 0 || o->gpus_per_task < 0 || o->max_parallel < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "slurm: negative cpus (%d), gpus (%d) or max parallel (%d)",
                            o->cpus_per_task, o->gpus_per_task, o->max_parallel);

    char cwd[PATH_MAX_IG];
    if (!getcwd(cwd, sizeof cwd))
        return ig_error_set(err, IG_ERR_IO, "slurm: cannot read the current directory: %s",
                            strerror(errno));
    char igen[PATH_MAX_IG], exp[PATH_MAX_IG], results[PATH_MAX_IG], scripts[PATH_MAX_IG],
        workdir[PATH_MAX_IG];
    IG_TRY(make_abs(cwd, igen_path, igen, sizeof igen, err));
    IG_TRY(make_abs(cwd, exp_path, exp, sizeof exp, err));
    IG_TRY(make_abs(cwd, results_dir, results, sizeof results, err));
    IG_TRY(make_abs(cwd, o->workdir ? o->workdir : cwd, workdir, sizeof workdir, err));
    if (script_dir) {
        IG_TRY(make_abs(cwd, script_dir, scripts, sizeof scripts, err));
    } else if ((size_t)snprintf(scripts, sizeof scripts, "%s/slurm", results) >= sizeof scripts) {
        return ig_error_set(err, IG_ERR_CAPACITY, "slurm: path too long: %s/slurm", results);
    }

    char job[512], merge_job[600];
    if (o->job_name) {
        IG_TRY(check_arg("the job name", o->job_name, err));
        snprintf(job, sizeof job, "%s", o->job_name);
    } else {
        char stem[256];
        file_stem(exp, stem, sizeof stem);
        snprintf(job, sizeof job, "igen-%s", stem);
    }
    snprintf(merge_job, sizeof merge_job, "%s-merge", job);

    script_ctx c = {igen, exp, workdir, results, scripts, sets, n_sets, o};
    sbuf a = {0}, m = {0};
    ig_status rc = array_text(&a, &c, job, n_points, err);
    if (rc == IG_OK) rc = merge_text(&m, &c, merge_job, err);
    if (rc == IG_OK && (a.oom || m.oom))
        rc = ig_error_set(err, IG_ERR_NOMEM, "slurm: out of memory writing the scripts");
    char apath[PATH_MAX_IG + 16], mpath[PATH_MAX_IG + 16];
    snprintf(apath, sizeof apath, "%s/array.sbatch", scripts);
    snprintf(mpath, sizeof mpath, "%s/merge.sbatch", scripts);
    if (rc == IG_OK) rc = mkdir_p(scripts, err);
    if (rc == IG_OK) rc = write_script(apath, a.s, a.len, err);
    if (rc == IG_OK) rc = write_script(mpath, m.s, m.len, err);
    free(a.s);
    free(m.s);
    IG_TRY(rc);
    IG_TRY(copy_out(apath, array_script, n1, err));
    return copy_out(mpath, merge_script, n2, err);
}

/* ---- submission -------------------------------------------------------------------------------
 */

/* Runs argv (PATH search) and captures stdout and stderr. *status: exit status, or -1 if the
 * program did not exit normally. Fails only if it could not be started. */
static ig_status run_capture(char *const argv[], char *out, size_t nout, char *errb, size_t nerr,
                             int *status, ig_error *err) {
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) != 0) return ig_error_set(err, IG_ERR_IO, "pipe: %s", strerror(errno));
    if (pipe2(pe, O_CLOEXEC) != 0) {
        int e = errno;
        close(po[0]);
        close(po[1]);
        return ig_error_set(err, IG_ERR_IO, "pipe: %s", strerror(e));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    pid_t pid;
    int src = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (src != 0) {
        close(po[0]);
        close(pe[0]);
        if (src == ENOENT)
            return ig_error_set(err, IG_ERR_NOT_FOUND,
                                "%s not found in PATH: is this a Slurm login node? (the scripts "
                                "are written; submit them by hand or from such a node)",
                                argv[0]);
        return ig_error_set(err, IG_ERR_IO, "cannot run %s: %s", argv[0], strerror(src));
    }
    size_t lens[2] = {0, 0}, caps[2] = {nout, nerr};
    char *bufs[2] = {out, errb};
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char tmp[4096];
            ssize_t r = read(fds[i].fd, tmp, sizeof tmp);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            size_t keep = caps[i] > lens[i] + 1 ? caps[i] - lens[i] - 1 : 0;
            if (keep > (size_t)r) keep = (size_t)r;
            memcpy(bufs[i] + lens[i], tmp, keep);
            lens[i] += keep;
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    out[lens[0]] = '\0';
    errb[lens[1]] = '\0';
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) return ig_error_set(err, IG_ERR_IO, "waitpid: %s", strerror(errno));
    }
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return IG_OK;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = '\0';
}

/* One sbatch call; the job id (before any ";cluster") goes to id. */
static ig_status sbatch(const char *script, const char *dependency, char *id, size_t n,
                        ig_error *err) {
    char dep[128];
    char *argv[5];
    int k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    if (dependency) {
        snprintf(dep, sizeof dep, "--dependency=afterany:%s", dependency);
        argv[k++] = dep;
    }
    argv[k++] = (char *)script;
    argv[k] = NULL;
    char out[1024], errb[4096];
    int status = 0;
    IG_TRY(run_capture(argv, out, sizeof out, errb, sizeof errb, &status, err));
    trim(out);
    trim(errb);
    if (status != 0)
        return ig_error_set(err, IG_ERR_IO, "sbatch %s failed (%s %d): %s", script,
                            status < 0 ? "killed," : "exit status", status,
                            errb[0] ? errb : "(no message)");
    /* --parsable prints "JOBID" or "JOBID;CLUSTER"; anything before it (warnings) is on stderr,
     * but take the last line to be safe. */
    char *line = strrchr(out, '\n');
    line = line ? line + 1 : out;
    size_t len = strcspn(line, ";");
    int digits = len > 0;
    for (size_t i = 0; i < len; i++) digits = digits && line[i] >= '0' && line[i] <= '9';
    if (!digits || len >= n)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "sbatch %s printed no job id (stdout '%s', stderr '%s')", script, out,
                            errb);
    memcpy(id, line, len);
    id[len] = '\0';
    return IG_OK;
}

ig_status ig_slurm_submit(const char *array_script, const char *merge_script, ig_slurm_jobs *jobs,
                          ig_error *err) {
    jobs->array_id[0] = jobs->merge_id[0] = '\0';
    IG_TRY(sbatch(array_script, NULL, jobs->array_id, sizeof jobs->array_id, err));
    ig_status rc = sbatch(merge_script, jobs->array_id, jobs->merge_id, sizeof jobs->merge_id, err);
    if (rc != IG_OK)
        ig_error_prefix(err,
                        "the array job %s is submitted but its merge job is not (scancel %s, or "
                        "submit %s with --dependency=afterany:%s): ",
                        jobs->array_id, jobs->array_id, merge_script, jobs->array_id);
    return rc;
}
