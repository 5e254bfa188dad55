/* cge: a graph engine. This header includes the whole public API. */
#ifndef CGE_CGE_H
#define CGE_CGE_H

#include "cge/version.h" /* generated from the CMake project version */
#include "cge/status.h"
#include "cge/types.h"
#include "cge/sequence.h"
#include "cge/runtime.h"
#include "cge/graph.h"
#include "cge/op.h"
#include "cge/fused_ops.h"
#include "cge/compiler.h"
#include "cge/dist.h"
#include "cge/es.h"
#include "cge/session.h"
#include "cge/onnx.h"
#include "cge/model_file.h"
#include "cge/opcheck.h"

#endif
