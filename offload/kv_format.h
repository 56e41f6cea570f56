/* The KV row format: how a KV home encodes one head's key or value row (f32, f16, or group-wise
 * quantized codes), and what that costs in bytes. A description only, with no storage or compute,
 * so that a policy can name the format it wants (policies/policy.h) without the KV store's API;
 * encoding and decoding are offload/kv_home.h's. */
#ifndef IG_KV_FORMAT_H
#define IG_KV_FORMAT_H

#include <stddef.h>

typedef enum ig_kv_codec_kind {
    IG_KV_CODEC_F32 = 0,
    IG_KV_CODEC_F16 = 1,
    IG_KV_CODEC_QUANT = 2, /* group-wise asymmetric min-max, `bits` per value */
} ig_kv_codec_kind;

typedef struct ig_kv_codec {
    ig_kv_codec_kind kind;
    int bits;  /* QUANT: 8, 4 or 2 */
    int group; /* QUANT: values per group along head_dim */
} ig_kv_codec;

/* Bytes of one encoded row of hd values. */
size_t ig_kv_codec_row_bytes(const ig_kv_codec *c, int hd);
/* Whether decode(encode(x)) == x. */
int ig_kv_codec_is_exact(const ig_kv_codec *c);
const char *ig_kv_codec_name(const ig_kv_codec *c, char *buf, size_t n);

#endif
