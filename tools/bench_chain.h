/* The audio chain as the elements run it (conymel -> 96-frame windows -> conyvggish ->
 * conytransformer), in libcony for the benchmarks: `cony bench pipeline` (one stream,
 * CPU time per stage) and `cony bench streams` (many live streams in one process). */
#pragma once
#include "cony/cnn-continual.h"
#include "cony/cnn.h"
#include "cony/encoder.h"
#include "cony/mel.h"

#define CONY_BENCH_RATE 16000

/* One stream's chain: its own mel, CNN and encoder state (the CNN's weights and the
 * encoder's model may be shared with other streams). */
typedef struct {
  ConyMel *mel;
  ConyCnn *cnn;
  ConyEncoder *enc;
  ConyCnnContinual *co; /* continual mode (borrowed), or NULL: a window every stride */
  guint stride, win, n_mels, have, since;
  float *frames, *frame, *embedding, *logits;
  gboolean timed;                 /* measure each stage's CPU time (costs clock reads) */
  double mel_s, cnn_s, encoder_s; /* CPU seconds per stage (timed only) */
  guint64 n_frames, windows;      /* windows: the tokens out (CNN windows or continual tokens) */
  GArray *tokens;                 /* every embedding, or NULL */
} ConyBenchChain;

/* @c over @mel, @cnn and @enc (borrowed), a CNN window every @stride frames. */
void cony_bench_chain_init (ConyBenchChain *c, ConyMel *mel, ConyCnn *cnn, ConyEncoder *enc,
    guint stride, gboolean timed, gboolean keep_tokens);
/* Continual mode: the frames go through @co (made on the chain's CNN, borrowed) in
 * blocks of its time stride, as conyvggish mode=continual pushes them, and each token
 * out is an encoder step. */
void cony_bench_chain_set_continual (ConyBenchChain *c, ConyCnnContinual *co);
/* @n samples of audio through the chain. */
void cony_bench_chain_push (ConyBenchChain *c, const float *x, gsize n);
void cony_bench_chain_clear (ConyBenchChain *c);

/* @n samples of deterministic test audio: a slow chirp over pink-ish noise (the content
 * does not change the cost). */
float *cony_bench_audio (gsize n);
/* The CNN the classifier @transformer was trained on, by the name its config records
 * (frontend.cnn), beside it or in a sibling folder; vggish.safetensors beside it when
 * it names none (or does not load). */
char *cony_bench_default_cnn (const char *transformer);
