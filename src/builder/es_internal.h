/* Internal to the builder: failure helpers the generated functions use. */
#ifndef CGE_BUILDER_ES_INTERNAL_H
#define CGE_BUILDER_ES_INTERNAL_H

#include "cge/es.h"

/* Record a [graph] error on the builder (if it has none yet); CGE_INVALID. */
cge_t cge__es_fail(cge_builder *b, const char *msg);
cge_status cge__es_fail_status(cge_builder *b, const char *msg);

#endif
