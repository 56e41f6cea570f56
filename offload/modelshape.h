/* Model shapes without weights: the sizes the planner needs, from configs/models/NAME.yaml (numbers
 * taken from each model's Hugging Face config.json) or from a loaded model. Never reads weights. */
#ifndef IG_MODELSHAPE_H
#define IG_MODELSHAPE_H

#include "core/model/model.h"
#include "core/base/status.h"
#include "offload/plan.h"

typedef struct ig_model_shape {
    char name[128];
    char source[512];
    ig_model_config config;
    ig_plan_dtype weight_dtype; /* the checkpoint's dtype (f16 for the shipped shapes) */
} ig_model_shape;

ig_status ig_model_shape_load(const char *path, ig_model_shape *out, ig_error *err);
ig_status ig_model_shape_load_string(const char *text, size_t len, const char *name,
                                     ig_model_shape *out, ig_error *err);
/* A name (configs/models/NAME.yaml under $IGEN_HOME, then the source dir) or a path. */
ig_status ig_model_shape_open(const char *name_or_path, ig_model_shape *out, ig_error *err);
/* The shape of a loaded model; weight_dtype from its storage dtype (f32, f16, bf16). */
void ig_model_shape_from_model(const ig_model *m, ig_model_shape *out);

#endif
