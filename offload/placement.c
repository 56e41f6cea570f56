/* Names of the offloading core's shared enums (placement.h). */
#include "offload/placement.h"

const char *ig_tier_kind_name(ig_tier_kind k) {
    switch (k) {
    case IG_TIER_DEVICE:
        return "device";
    case IG_TIER_HOST:
        return "host";
    case IG_TIER_DISK:
        return "disk";
    default:
        return "?";
    }
}

const char *ig_wtensor_name(ig_wtensor t) {
    static const char *const names[IG_WT_COUNT] = {"attn_norm", "q",    "k",  "v",   "o",
                                                   "ffn_norm",  "gate", "up", "down"};
    return (int)t >= 0 && t < IG_WT_COUNT ? names[t] : "?";
}
