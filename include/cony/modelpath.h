/* Where a model file named by the user is (libcony, no GStreamer). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* The path of the model file @name: @name itself when it is absolute or names a file
 * relative to the current directory; otherwise the first DIR/@name that is a file, for
 * DIR in order: each directory of $CONY_MODEL_PATH (colon-separated), then the
 * installed models, DATADIR/gst-cony/models (cony_model_path_datadir()). A relative
 * @name like "audio/yamnet-adapted.safetensors" thus finds the installed model.
 * Newly allocated; NULL with CONY_ERROR_IO naming every place looked in. Every libcony
 * loader (cony_safetensors_open(), cony_cnn_load(), cony_model_load()) and every
 * element calls it, so a name means the same file everywhere. */
char *cony_model_path_find (const char *name, GError **error);

/* The directories a relative name is looked up in after the current directory, in
 * order ($CONY_MODEL_PATH's, then the installed models). NULL-terminated, g_strfreev. */
char **cony_model_path_dirs (void);

/* DATADIR/gst-cony/models of the configured prefix (where `meson install` puts models/). */
const char *cony_model_path_datadir (void);

G_END_DECLS
