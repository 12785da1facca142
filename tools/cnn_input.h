/* Input windows for the CNN commands (cony embed, cony tag): a WAV file's log-mel
 * frames, log-mel frames from a .npy, ready patches from a .npy, or an image file. */
#pragma once
#include "cony/cnn.h"
#include "cony/image.h"
#include "cony/mel.h"
#include "cony/npy.h"

typedef struct {
  float *frames;         /* (T, W) log-mel frames to window, or NULL */
  gsize n_frames;        /* padding included */
  gsize n_padded;        /* silent frames added at the end (pad) */
  ConyNpyArray *patches; /* ready examples (N, H, W) / (N, 1, H, W), or NULL */
  gsize n_windows;
  guint stride;         /* frames between window starts (frames only) */
  double frame_seconds; /* seconds per frame (0: unknown, ready patches) */
  ConyImageCrop crop;   /* image files: set before cony_cnn_input_read() (kept by it) */
  guint64 max_pixels;   /* image files: the largest accepted (0: the default; kept) */
} ConyCnnInput;

/* The log-mel settings @cnn was trained on: its `frontend` metadata (conymel's property
 * names) applied over VGGish's front end. */
gboolean cony_cnn_mel_config (ConyCnn *cnn, ConyMelConfig *config, GError **error);
/* Reads @path for @cnn, recognised by its content (media_file.h). Audio (WAV, or any
 * format GStreamer decodes): the log-mel of the model's `frontend` metadata (conymel's
 * property names; VGGish's front end when absent). An image (PNG, JPEG, BMP, GIF, WebP
 * where GStreamer decodes it; refused when over in->max_pixels or truncated, a warning
 * when under half the model's input): one example, cropped (in->crop) and resized to the
 * model's input. .npy (by its magic): frames or patches.
 * Errors name the file and what was expected. @pad: frames (WAV, log-mel .npy) that
 * no full window covers give one more window, completed with silent frames,
 * log(log offset), as YAMNet pads and conyvggish pad-tail does; otherwise they are
 * dropped. */
gboolean cony_cnn_input_read (ConyCnnInput *in, ConyCnn *cnn, const char *path, guint stride,
    gboolean pad, GError **error);
/* Runs every window through @cnn into @out (n_windows x output size). */
void cony_cnn_input_run (const ConyCnnInput *in, ConyCnn *cnn, float *out);
/* The same windows' tokens from the continual CNN (cony/cnn-continual.h) at the input's
 * stride: every frame through the network once, then silent frames until the last
 * window's token is out. FALSE with @error for ready patches or a stride or network the
 * continual CNN refuses. */
gboolean cony_cnn_input_run_continual (const ConyCnnInput *in, ConyCnn *cnn, float *out,
    GError **error);
void cony_cnn_input_clear (ConyCnnInput *in);
/* The --precision option of the CNN commands (NULL: the file decides). */
#define CONY_CNN_PRECISION_OPTION(var) \
  { \
    "precision", 0, 0, G_OPTION_ARG_STRING, &(var), \
        "auto (default: int8 for files with activation quantisation, else float), float, int8", \
        "P" \
  }
/* The --max-pixels option of the CNN commands (a gint64 variable; 0: the default). */
#define CONY_CNN_MAX_PIXELS_OPTION(var) \
  { \
    "max-pixels", 0, 0, G_OPTION_ARG_INT64, &(var), \
        "images: refuse a picture whose header claims more pixels (default 100000000)", "N" \
  }
/* Checks a --max-pixels value into @in; FALSE with @error when out of range. */
gboolean cony_cnn_input_set_max_pixels (ConyCnnInput *in, gint64 value, GError **error);
/* Applies a --precision value to @cnn; FALSE with @error naming what was wrong. */
gboolean cony_cnn_input_set_precision (ConyCnn *cnn, const char *name, GError **error);
