/* Slurm job arrays for experiments: one array task per point, then a merge job.
 *
 * ig_slurm_write() writes two bash scripts into SCRIPT_DIR (default RESULTS_DIR/slurm):
 *   array.sbatch  `#SBATCH --array=0-(N-1)[%K]`; task I runs
 *                 `IGEN run EXP --point $SLURM_ARRAY_TASK_ID --part [--set S]... [POINT_ARGS]`,
 *                 which writes RESULTS_DIR/parts/point-NNNNNN.json; its log is
 * SCRIPT_DIR/point-I.out. merge.sbatch  `IGEN run EXP --merge [--set S]...`, which folds the parts
 * into results.jsonl and writes results.csv and the plots; its log is SCRIPT_DIR/merge.out.
 * ig_slurm_submit() submits the array, then the merge with --dependency=afterany:ARRAY_ID (the
 * merge runs when every task has ended, whether it succeeded or not).
 *
 * Every path in the scripts is absolute and both scripts `cd` into the directory igen was started
 * from, so relative paths inside the experiment (its `output`, text files) resolve exactly as in a
 * local run. Every argument is shell-quoted (ig_slurm_shell_quote) and every #SBATCH value is
 * escaped for sbatch's own parser (ig_slurm_sbatch_escape); a value with a newline is rejected. */
#ifndef IG_EXP_SLURM_H
#define IG_EXP_SLURM_H

#include <stddef.h>

#include "core/base/status.h"

#define IG_SLURM_MAX_EXTRA 16

/* Everything optional: NULL / 0 leaves the option out (the cluster's defaults apply). */
typedef struct ig_slurm_opts {
    const char *partition;  /* --partition (both jobs) */
    const char *account;    /* --account (both jobs) */
    const char *qos;        /* --qos (both jobs) */
    const char *time_limit; /* --time for each array task, e.g. "02:00:00" */
    const char *mem;        /* --mem for each array task, e.g. "16G" */
    int cpus_per_task;      /* --cpus-per-task for each array task */
    int gpus_per_task;      /* --gres=gpu:N for each array task (works without cons_tres) */
    int max_parallel;       /* the array's %K: at most K tasks at once */
    const char *job_name;   /* default "igen-<experiment file stem>"; merge job: NAME-merge */
    const char *workdir;    /* directory the jobs cd into; default: the current directory */
    /* Raw sbatch options for both jobs, each one option such as "--constraint=a100" (must start
     * with '-', no newline); written after `#SBATCH ` as given. */
    const char *extra_sbatch[IG_SLURM_MAX_EXTRA];
    int n_extra;
    /* Extra igen arguments for each array task only (e.g. "--force"), quoted like the rest. */
    const char *const *point_args;
    int n_point_args;
} ig_slurm_opts;

/* Writes SCRIPT_DIR/array.sbatch and SCRIPT_DIR/merge.sbatch (mode 0755, creating SCRIPT_DIR and
 * its parents). script_dir NULL means RESULTS_DIR/slurm. igen_path is the igen executable (it must
 * be reachable from the compute nodes), exp_path the experiment file, sets the `--set` values
 * ("a.b=VALUE", without "--set"), n_points >= 1. Relative paths are made absolute against the
 * current directory. o may be NULL. On success the scripts' absolute paths are copied into
 * array_script / merge_script (either may be NULL). */
ig_status ig_slurm_write(const char *script_dir, const char *igen_path, const char *exp_path,
                         const char *const *sets, int n_sets, int n_points, const char *results_dir,
                         const ig_slurm_opts *o, char *array_script, size_t n1, char *merge_script,
                         size_t n2, ig_error *err);

typedef struct ig_slurm_jobs {
    char array_id[64]; /* "" until the array is submitted */
    char merge_id[64]; /* "" until the merge job is submitted */
} ig_slurm_jobs;

/* Runs `sbatch --parsable ARRAY_SCRIPT`, then `sbatch --parsable --dependency=afterany:ID
 * MERGE_SCRIPT` (sbatch from PATH). Fills jobs as far as it got, so that when the merge submission
 * fails the array's id is still reported (the message names it too, for scancel). An sbatch that
 * is missing, exits non-zero or prints no job id is an error whose message carries its stderr. */
ig_status ig_slurm_submit(const char *array_script, const char *merge_script, ig_slurm_jobs *jobs,
                          ig_error *err);

/* `s` as one POSIX shell word: unchanged when it is made only of [A-Za-z0-9_@%+=:,./-] (and is not
 * empty), else in single quotes with each ' written as '\''. Returns the length it needs (like
 * snprintf); the output is cut to n-1 bytes and NUL-terminated when n > 0. */
size_t ig_slurm_shell_quote(const char *s, char *out, size_t n);

/* `s` as one argument of an `#SBATCH` line, as sbatch's parser reads it: unchanged when it has no
 * space, tab, quote, backslash or '#'; else in double quotes with each quote, backslash and '#'
 * preceded by a backslash. Returns IG_ERR_INVALID_ARG for a newline or carriage return (which an
 * #SBATCH line cannot hold), IG_ERR_CAPACITY if out is too small. */
ig_status ig_slurm_sbatch_escape(const char *s, char *out, size_t n, ig_error *err);

#endif
