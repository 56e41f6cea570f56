/* Fetch profiles of KV policies; see fetchprof.h. */
#include "offload/fetchprof.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "offload/yamlcfg.h"

static const ig_yfield k_point[] = {
    {"ctx", IG_YK_NUM, offsetof(ig_fetch_profile_point, ctx), 0, 1, 0, 1e9, 1, NULL, 0, 0, NULL, -1,
     NULL},
    {"fraction", IG_YK_NUM, offsetof(ig_fetch_profile_point, fraction), 0, 1, 0, 1, 1, NULL, 0, 0,
     NULL, -1, NULL},
    {"steps", IG_YK_NUM, offsetof(ig_fetch_profile_point, steps), 0, 0, 0, 1e18, 0, NULL, 0, 0,
     NULL, -1, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, -1, NULL},
};

static int check_profile(const void *obj, const char **key, char *why, size_t n) {
    const ig_fetch_profile *p = obj;
    for (int i = 1; i < p->n; i++)
        if (!(p->pts[i].ctx > p->pts[i - 1].ctx)) {
            *key = "fetch";
            snprintf(why, n, "context lengths must ascend (entry %d: %g after %g)", i,
                     p->pts[i].ctx, p->pts[i - 1].ctx);
            return 1;
        }
    if (p->n < 1) {
        *key = "fetch";
        snprintf(why, n, "needs at least one {ctx, fraction} entry");
        return 1;
    }
    return 0;
}

static const ig_yfield k_fields[] = {
    {"policy", IG_YK_STR, offsetof(ig_fetch_profile, policy), 64, 1, 0, 0, 0, NULL, 0, 0, NULL, -1,
     NULL},
    {"params", IG_YK_STR, offsetof(ig_fetch_profile, params), 1024, 0, 0, 0, 0, NULL, 0, 0, NULL,
     -1, NULL},
    {"model", IG_YK_STR, offsetof(ig_fetch_profile, model), 256, 0, 0, 0, 0, NULL, 0, 0, NULL, -1,
     NULL},
    {"text", IG_YK_STR, offsetof(ig_fetch_profile, text), 1024, 0, 0, 0, 0, NULL, 0, 0, NULL, -1,
     NULL},
    {"command", IG_YK_STR, offsetof(ig_fetch_profile, command), 2048, 0, 0, 0, 0, NULL, 0, 0, NULL,
     -1, NULL},
    {"fetch", IG_YK_LIST, offsetof(ig_fetch_profile, pts), sizeof(ig_fetch_profile_point), 1, 0, 0,
     0, k_point, offsetof(ig_fetch_profile, n), IG_FETCH_PROFILE_MAX, NULL, -1, NULL},
    {NULL, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, -1, NULL},
};

static const ig_yfield k_root = {NULL, IG_YK_MAP, 0, 0, 1,    0,  0,
                                 0,    k_fields,  0, 0, NULL, -1, check_profile};

ig_status ig_fetch_profile_load(const char *path, ig_fetch_profile *out, ig_error *err) {
    memset(out, 0, sizeof *out);
    ig_status st = ig_yamlcfg_load_file(path, &k_root, out, err);
    if (st != IG_OK) memset(out, 0, sizeof *out);
    return st;
}

ig_status ig_fetch_profile_save(const ig_fetch_profile *p, const char *path, ig_error *err) {
    char part[4200];
    snprintf(part, sizeof part, "%s.part", path);
    FILE *f = fopen(part, "w");
    if (!f) return ig_error_set(err, IG_ERR_IO, "cannot create %s", part);
    char b[8300];
    fprintf(f,
            "# A KV policy's fetch profile (docs/planner.md, \"Fetch profiles\"): the fraction of\n"
            "# the context's KV rows read per decode step, over all layers, by context length.\n");
    ig_yamlcfg_fmt_string(b, sizeof b, p->policy);
    fprintf(f, "policy: %s\n", b);
    ig_yamlcfg_fmt_string(b, sizeof b, p->params);
    fprintf(f, "params: %s\n", b);
    ig_yamlcfg_fmt_string(b, sizeof b, p->model);
    fprintf(f, "model: %s\n", b);
    ig_yamlcfg_fmt_string(b, sizeof b, p->text);
    fprintf(f, "text: %s\n", b);
    ig_yamlcfg_fmt_string(b, sizeof b, p->command);
    fprintf(f, "command: %s\nfetch:\n", b);
    for (int i = 0; i < p->n; i++) {
        char c[64], fr[64], s[64];
        ig_yamlcfg_fmt_double(c, sizeof c, p->pts[i].ctx);
        ig_yamlcfg_fmt_double(fr, sizeof fr, p->pts[i].fraction);
        ig_yamlcfg_fmt_double(s, sizeof s, p->pts[i].steps);
        fprintf(f, "  - {ctx: %s, fraction: %s, steps: %s}\n", c, fr, s);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(part);
        return ig_error_set(err, IG_ERR_IO, "cannot write %s", part);
    }
    /* it must load back as written before it replaces anything */
    ig_fetch_profile back;
    ig_status st = ig_fetch_profile_load(part, &back, err);
    if (st == IG_OK && (back.n != p->n || strcmp(back.policy, p->policy) != 0))
        st = ig_error_set(err, IG_ERR_INTERNAL, "%s does not load back as written", part);
    if (st == IG_OK && rename(part, path) != 0)
        st = ig_error_set(err, IG_ERR_IO, "cannot rename %s to %s", part, path);
    if (st != IG_OK) remove(part);
    return st;
}

double ig_fetch_profile_at(const ig_fetch_profile *p, double ctx) {
    if (p->n <= 0) return 1.0;
    if (ctx <= p->pts[0].ctx) return p->pts[0].fraction;
    for (int i = 1; i < p->n; i++)
        if (ctx <= p->pts[i].ctx) {
            double t = (ctx - p->pts[i - 1].ctx) / (p->pts[i].ctx - p->pts[i - 1].ctx);
            return (1 - t) * p->pts[i - 1].fraction + t * p->pts[i].fraction;
        }
    return p->pts[p->n - 1].fraction;
}
