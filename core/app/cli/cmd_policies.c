/* igen policies: the registered KV-cache policies and their parameter tables. */
#include <stdio.h>
#include <string.h>

#include "core/app/cli/cli.h"

static const char *type_name(ig_param_type t) {
    switch (t) {
    case IG_PARAM_INT:
        return "int";
    case IG_PARAM_FLOAT:
        return "float";
    case IG_PARAM_ENUM:
        return "enum";
    case IG_PARAM_BOOL:
        return "bool";
    case IG_PARAM_STRING:
        return "string";
    }
    return "?";
}

int ig_cmd_policies(int argc, char **argv) {
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: igen policies [NAME]\n\n"
                   "Lists the KV-cache policies with their parameters (name, type, default, range\n"
                   "or choices, meaning), for use with --policy NAME --set KEY=VALUE.\n");
            return 0;
        }
        if (argv[i][0] == '-' || only) {
            fprintf(stderr, "igen policies: unexpected argument '%s'\n", argv[i]);
            return IG_EXIT_ERROR;
        }
        only = argv[i];
    }
    if (only && !ig_policy_find(only)) {
        fprintf(stderr, "igen policies: unknown policy '%s'\n", only);
        return IG_EXIT_ERROR;
    }
    const ig_policy_ops *const *all = ig_policy_list();
    for (int i = 0; all[i]; i++) {
        const ig_policy_ops *p = all[i];
        if (only && strcmp(only, p->name)) continue;
        printf("%s: %s\n", p->name, p->summary);
        for (int k = 0; k < p->n_params; k++) {
            const ig_param_spec *s = &p->params[k];
            char range[128] = "";
            if (s->type == IG_PARAM_INT || s->type == IG_PARAM_FLOAT)
                snprintf(range, sizeof range, "[%g, %g]", s->min, s->max);
            else if (s->type == IG_PARAM_ENUM)
                snprintf(range, sizeof range, "%s", s->choices);
            printf("  %-16s %-6s default %-10s %-18s %s\n", s->name, type_name(s->type),
                   s->def ? s->def : "-", range, s->doc);
        }
        if (p->n_params == 0) printf("  (no parameters)\n");
    }
    return 0;
}
