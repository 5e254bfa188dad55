/* Adding a prebuilt plan whose kernels' cache starts with entries made
 * elsewhere: a model file's packed weights (model_load.c). */
#ifndef CGE_SESSION_SEED_H
#define CGE_SESSION_SEED_H

#include "cge/session.h"
#include "ops/kernel_cache.h"

/* cge_session_add_plan, and when the plan is first compiled its kernel
 * cache (constants declared stable) is handed to seed(owner, cache) before
 * any kernel prepares, so that cge_kernel_shared_get finds what the seed
 * added instead of packing. */
cge_status cge__session_add_plan_seeded(cge_session *s, uint32_t graph_id, const cge_plan *plan,
                                        const void *constants, void (*release)(void *),
                                        void *owner,
                                        cge_status (*seed)(void *owner, cge_kernel_cache *c));

#endif
