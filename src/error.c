#include "cony/error.h"

G_DEFINE_QUARK (cony - error - quark, cony_error)
