/* Internal to core/app/exp: the experiment file's schema as tables, and the experiment's state
 * shared by the loader (exp.c), the validator (exp_check.c) and the expander (exp_expand.c). */
#ifndef IG_EXP_SCHEMA_H
#define IG_EXP_SCHEMA_H

#include <json-c/json.h>

#include "core/app/exp/exp.h"
#include "core/app/exp/exp_tree.h"
#include "policies/policy.h"

typedef enum exp_ftype {
    F_STR = 0,
    F_INT,
    F_NUM,
    F_BOOL,
    F_ENUM,
    F_MAP,
    F_POLICIES,
    F_METRICS,
    F_SWEEP,
} exp_ftype;

enum {
    FL_NOSWEEP = 1,  /* a list is not a sweep here: rejected */
    FL_OPTMAP = 2,   /* MAP: absent (or false / null) = off, resolved as null */
    FL_REQUIRED = 4, /* missing = an error */
    FL_POSITIVE = 8, /* NUM: must be > min */
    FL_OMIT = 16,    /* absent: left out of the point's config (a key added later keeps the
                      * point keys of experiments that do not set it) */
};

typedef enum exp_check {
    CK_NONE = 0,
    CK_NAME,  /* experiment name: usable as a directory name */
    CK_NUMA,  /* local | interleave | "0,1" */
    CK_MODEL, /* "default" or an existing file / directory (measured mode) */
    CK_SHAPE, /* configs/models/NAME.yaml or a path, loaded */
    CK_HW,    /* configs/hardware/NAME.yaml or a path, loaded */
    CK_TEXT,  /* an existing file */
} exp_check;

typedef struct exp_field {
    const char *key; /* NULL ends a table */
    exp_ftype t;
    const char *def; /* leaf default as YAML text; NULL: absent = null (or computed) */
    double min, max;
    unsigned flags;
    exp_check check;
    const char *const *names;    /* ENUM, NULL-terminated */
    const struct exp_field *sub; /* MAP */
} exp_field;

extern const exp_field exp_schema_top[];
extern const char *const exp_metric_names[]; /* throughput, ppl, recall, bytes */

const exp_field *exp_field_find(const exp_field *fields, const char *key);
/* The field of a dotted key path ("placement.kv.gpu"), or NULL. */
const exp_field *exp_field_lookup(const char *path);
/* The key of `fields` closest to `key` (for "did you mean"). */
const char *exp_field_closest(const exp_field *fields, const char *key);

/* One swept axis. */
typedef struct exp_axis {
    char *name;     /* key path, or "policy" */
    exp_node *node; /* the list (NULL for the policies) */
    int len;
    int zip; /* index of its sweep.zip group, or -1 */
    int dim; /* which dimension of the product it advances with */
    exp_loc loc;
} exp_axis;

/* One entry of the policies axis after expanding the param lists. */
typedef struct exp_policy {
    const ig_policy_ops *ops;
    char **settings; /* "k=v" */
    int n_settings;
    const ig_param_spec **specs; /* [n_settings] */
    char *label;                 /* "h2o(heavy_ratio=0.2)" */
} exp_policy;

struct ig_exp {
    char *path, *dir, *name, *output;
    exp_node *root;
    char **origins; /* "--set KEY" texts the nodes point to */
    int n_origins;
    ig_exp_mode mode;
    exp_node *mode_node;
    int any_modeled;  /* some point is modeled (mode: modeled, or [measured, modeled]) */
    unsigned metrics; /* bit i: exp_metric_names[i] */
    exp_node *metrics_node;
    exp_axis *axes;
    int n_axes;
    int policy_axis;
    exp_policy *pol;
    int n_pol;
    exp_node *zip_node;
    int n_dims;
    int *dim_len;
    int n_points;
    json_object **configs;
    char **labels;
    char (*keys)[17];
};

enum { EXP_MAX_AXES = 64 };

/* Validates the (overridden) tree and collects axes and policy variants (exp_check.c). */
ig_status exp_validate(ig_exp *e, ig_error *err);
/* Expands the product, checks each point's cross-field rules and builds configs, labels and keys
 * (exp_expand.c). */
ig_status exp_expand(ig_exp *e, ig_error *err);
/* Axis choices of point i: ch[a] for each axis. */
void exp_point_choices(const ig_exp *e, int i, int *ch);
/* The value node a point uses for key node v (v itself, or the chosen item of a swept list). */
exp_node *exp_pick(const exp_node *v, const int *ch);

#endif
