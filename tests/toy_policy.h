/* A toy KV policy for the tests (tests/toy_policy.c): random selection, registered at run time. */
#ifndef IG_TEST_TOY_POLICY_H
#define IG_TEST_TOY_POLICY_H

#include "policies/policy.h"

extern const ig_policy_ops ig_toy_random_policy;

#endif
