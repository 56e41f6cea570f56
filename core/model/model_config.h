/* A model's shape and architecture (ig_model_config), apart from the model itself: what layers
 * above the model that only need the shape (policies, the planner) include, without the loader,
 * the tokenizer and the file readers that core/model/model.h brings. */
#ifndef IG_MODEL_CONFIG_H
#define IG_MODEL_CONFIG_H

#include <stdint.h>

typedef enum ig_arch {
    IG_ARCH_OPT = 0,   /* learned positions (+2), pre-LayerNorm, ReLU MLP, biases */
    IG_ARCH_LLAMA = 1, /* RMSNorm, RoPE, SwiGLU, grouped-query attention */
} ig_arch;

typedef enum ig_model_format {
    IG_FORMAT_HF = 0, /* directory: config.json + safetensors + tokenizer.json */
    IG_FORMAT_GGUF = 1,
} ig_model_format;

typedef struct ig_model_config {
    ig_arch arch;
    int n_layer;
    int d_model;
    int n_head;
    int n_kv_head;
    int head_dim;
    int d_ffn;
    int vocab;
    int max_pos;    /* context length the model was trained for */
    float norm_eps; /* LayerNorm / RMSNorm epsilon */
    float rope_theta;
    int rot_dim;    /* dims rotated by RoPE (Llama), usually head_dim */
    int pos_offset; /* OPT's learned-position offset (2) */
    int attn_bias;  /* q/k/v/o projections have biases */
    int mlp_bias;
    int tied_embeddings;
    int32_t bos, eos; /* -1 when absent */
} ig_model_config;

/* "opt", "llama" (core/model/model.c). */
const char *ig_arch_name(ig_arch a);

/* The loaded model itself is opaque here (core/model/model.h). */
typedef struct ig_model ig_model;

#endif
