/* Internal entry to the registry for the builtin library, which registers
 * while the registry's one-time initialisation is running. */
#ifndef CGE_OPS_REGISTRY_H
#define CGE_OPS_REGISTRY_H

#include "cge/op.h"

cge_status cge__registry_add_library(const cge_op_library *lib);

#endif
