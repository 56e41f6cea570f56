/* Internal to core/app/exp: the experiment file as a tree of nodes that keep their source location
 * (file line:col, or the --set override they came from), so that --set can edit the document
 * before validation and every later error can point at the value that is wrong. */
#ifndef IG_EXP_TREE_H
#define IG_EXP_TREE_H

#include <stddef.h>

#include "core/base/status.h"

typedef enum exp_kind { EXP_SCALAR = 0, EXP_MAP, EXP_SEQ } exp_kind;

/* Where a node or key was written: origin NULL = the experiment file at line:col (1-based), else
 * the override text ("--set KEY"), borrowed from the tree's owner. */
typedef struct exp_loc {
    const char *origin;
    int line, col;
} exp_loc;

typedef struct exp_node exp_node;

typedef struct exp_entry {
    char *key;
    exp_loc kloc;
    exp_node *val;
} exp_entry;

struct exp_node {
    exp_kind kind;
    exp_loc loc;
    char *str; /* SCALAR: NUL-terminated text */
    size_t len;
    int plain; /* SCALAR: written without quotes (or tag) */
    exp_entry *ents;
    int n_ents; /* MAP */
    exp_node **items;
    int n_items;    /* SEQ */
    int axis;       /* a list-valued key: the index of its axis; else -1 */
    char *resolved; /* a scalar naming a file: the file found (set by validation) */
};

/* Formats an error "LOC: PATH: WHAT" where LOC is "FILE:LINE:COL" or the override text. */
ig_status exp_fail(ig_error *err, const char *file, exp_loc loc, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/* Parses YAML text into a tree (one document; duplicate keys rejected). `file` names the text in
 * messages; origin is NULL for a file, or the override text for a --set value (then an empty text
 * is an empty scalar and locations are the override). *out is NULL for an empty file. */
ig_status exp_tree_parse(const char *text, size_t len, const char *file, const char *origin,
                         exp_node **out, ig_error *err);
void exp_node_free(exp_node *n);

exp_node *exp_node_new(exp_kind kind, exp_loc loc);
exp_node *exp_map_get(const exp_node *map, const char *key);
exp_entry *exp_map_entry(const exp_node *map, const char *key);
/* Appends key -> val (val owned by the map); returns the entry or NULL if out of memory. */
exp_entry *exp_map_add(exp_node *map, const char *key, exp_loc kloc, exp_node *val);

/* "a scalar", "a mapping", "a list" */
const char *exp_kind_name(const exp_node *n);
/* A null scalar: plain ~, null, Null, NULL or empty. */
int exp_is_null(const exp_node *n);

#endif
