// Everything a trainer or the pipeline executor needs from paci::model, in one include: shapes,
// parameter layout and initialisation, stages with their activation slots, AdamW and LR schedule.
// The layers themselves (model/ops.hpp) are for tests and benchmarks.
#pragma once

#include "model/activations.hpp"  // IWYU pragma: export
#include "model/blas.hpp"         // IWYU pragma: export
#include "model/config.hpp"       // IWYU pragma: export
#include "model/init.hpp"         // IWYU pragma: export
#include "model/layout.hpp"       // IWYU pragma: export
#include "model/optimizer.hpp"    // IWYU pragma: export
#include "model/stage.hpp"        // IWYU pragma: export
