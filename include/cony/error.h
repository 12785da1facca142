/* libcony error domain. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

#define CONY_ERROR (cony_error_quark ())
GQuark cony_error_quark (void);

typedef enum
{
  CONY_ERROR_IO,      /* a file could not be opened, read or written */
  CONY_ERROR_FORMAT,  /* a file is malformed or truncated */
  CONY_ERROR_SHAPE,   /* a tensor or array has the wrong shape or dtype */
  CONY_ERROR_MISSING, /* a required tensor or config key is absent */
  CONY_ERROR_INVALID, /* a parameter or value is out of range (NaN weights, bad sizes) */
  CONY_ERROR_NUMERIC, /* a numerical routine failed (e.g. SVD did not converge) */
} ConyErrorCode;

G_END_DECLS
