/* Reading a ConyCnnRef from a JSON object (not a public API: cony/ has no json-glib). */
#pragma once
#include "cony/model.h"

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The "cnn", "cnn_sha256", "cnn_output" and "cnn_mode" members of @o into @ref (a missing one stays
 * NULL). FALSE when one is not a string, with *@bad_key naming it and @ref untouched:
 * the caller words the error (model configs and fusion inputs word it differently). */
gboolean cony_cnn_ref_read (JsonObject *o, ConyCnnRef *ref, const char **bad_key);

G_END_DECLS
