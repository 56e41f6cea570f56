/* Table-driven loading of small YAML configuration files (hardware profiles, model shapes) with
 * libyaml's document API: every error is one line "FILE:LINE:COL: key.path: what is wrong" (1-based
 * line and column), unknown keys are rejected naming the closest valid key. Internal to offload/;
 * it never allocates on behalf of the caller (values land in the caller's struct). */
#ifndef IG_YAMLCFG_H
#define IG_YAMLCFG_H

#include <stddef.h>

#include "core/base/status.h"

typedef enum ig_ykind {
    IG_YK_STR = 0, /* char[size] */
    IG_YK_NUM,     /* double, finite, in [min, max] (min exclusive when min_exclusive) */
    IG_YK_INT,     /* int in [min, max] */
    IG_YK_BOOL,    /* int, from true/false */
    IG_YK_ENUM,    /* int: index into names */
    IG_YK_MAP,     /* a nested mapping described by sub */
    IG_YK_LIST,    /* a sequence of mappings described by sub; elements of size `size` */
} ig_ykind;

typedef struct ig_yfield {
    const char *key; /* NULL ends a table */
    ig_ykind kind;
    size_t off;   /* offset of the value in the destination */
    size_t size;  /* STR: buffer size; LIST: element size */
    int required; /* a missing required key is an error naming the mapping */
    double min, max;
    int min_exclusive;
    const struct ig_yfield *sub; /* MAP / LIST element */
    size_t count_off;            /* LIST: offset of the int element count */
    int max_count;               /* LIST */
    const char *const *names;    /* ENUM: NULL-terminated */
    long present_off;            /* MAP: offset of an int set to 1 when the key is present, or -1 */
    /* MAP: optional cross-field check run after the mapping loaded; returns 0 if fine, else writes
     * the offending key (relative to the mapping) and what is wrong. */
    int (*check)(const void *obj, const char **key, char *why, size_t n);
} ig_yfield;

/* Loads the top-level mapping of `path` into dst following `root` (a field of kind IG_YK_MAP with
 * offset 0, whose `sub` table is NULL-key-terminated). Fields not in the file keep the values dst
 * had. */
ig_status ig_yamlcfg_load_file(const char *path, const ig_yfield *root, void *dst, ig_error *err);
/* The same from memory; `name` is the file name used in messages. */
ig_status ig_yamlcfg_load_string(const char *text, size_t len, const char *name,
                                 const ig_yfield *root, void *dst, ig_error *err);

/* Levenshtein distance (for "did you mean"); strings of up to 63 characters, longer ones compare
 * their first 63. */
int ig_yamlcfg_edit_distance(const char *a, const char *b);

/* Writes a double so that strtod reads back the same value, as short as possible. */
void ig_yamlcfg_fmt_double(char *buf, size_t n, double v);
/* Writes s as a YAML double-quoted scalar (with escapes) to buf. */
void ig_yamlcfg_fmt_string(char *buf, size_t n, const char *s);

#endif
