/* A KV policy's measured fetch profile: the fraction of the context's KV rows it read per decode
 * step, as a function of the context length, from a policy-active run (`igen ppl --fetch-profile
 * FILE`). The cost model prices a policy's KV traffic with it instead of the policy's cap, so that
 * a policy whose fetch count does not grow with the sequence (InfiniGen's threshold rule) is
 * modeled as it behaves. A small YAML file (docs/planner.md, "Fetch profiles"). */
#ifndef IG_FETCHPROF_H
#define IG_FETCHPROF_H

#include "core/base/status.h"

#define IG_FETCH_PROFILE_MAX 64

typedef struct ig_fetch_profile_point {
    double ctx;      /* mean context length of the steps measured (tokens) */
    double fraction; /* KV rows read / rows in the context, over all layers and KV heads */
    double steps;    /* decode steps x sequences behind it */
} ig_fetch_profile_point;

typedef struct ig_fetch_profile {
    char policy[64];
    char params[1024];  /* the policy's effective parameters */
    char model[256];    /* the model measured on */
    char text[1024];    /* what it decoded */
    char command[2048]; /* the command that made the file */
    int n;              /* points, ascending in ctx */
    ig_fetch_profile_point pts[IG_FETCH_PROFILE_MAX];
} ig_fetch_profile;

/* Writes p to path (atomically: path.part, then renamed). */
ig_status ig_fetch_profile_save(const ig_fetch_profile *p, const char *path, ig_error *err);
/* Loads a profile; fractions must lie in (0, 1] and contexts ascend. */
ig_status ig_fetch_profile_load(const char *path, ig_fetch_profile *out, ig_error *err);
/* The fraction read at context length ctx: linear between the measured points, the end points'
 * value outside them. */
double ig_fetch_profile_at(const ig_fetch_profile *p, double ctx);

#endif
