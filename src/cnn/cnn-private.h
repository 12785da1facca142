/* Private parts of the CNN engine shared by src/cnn*.c (see include/cony/cnn.h).
 * The files, callers before callees:
 * cnn.c           ConyCnn: lifetime, getters and setters, the PCA postprocess;
 * cnn-shared.c    the process-wide registry that shares loaded weights;
 * cnn-load.c      model files and random networks: the common metadata, then the
 *                 loader of the file's `network` kind (its networks table):
 * cnn-vgg.c       VGG-style networks (no `network` key);
 * cnn-mobilenet.c MobileNet networks;
 * cnn-continual.c the continual (streaming) CNN on the kernels below;
 * cnn-forward.c   the forward pass (batching, the conv stack, the head);
 * cnn-weights.c   CnnWeights: lifetime, copies, the geometry pass;
 * cnn-layers.c    the table of layer kinds (CnnLayerClass), one row per LayerKind:
 *                 the passes above reach a kind only through cnn_layer_class();
 * cnn-layer-conv.c, -depthwise.c, -pointwise.c, -pool.c (max-pool, mean), -add.c,
 *                 -fc.c, -activation.c (sigmoid, softmax): each family's rows;
 * cnn-int8.c      the integer path of quantised MobileNet-v1/v2 files (qkernels*.c):
 *                 the rows' int8 hooks, and the loader and runner that call them;
 * cnn-winograd.c  Winograd F(2x2)/F(4x4) convolutions and the CPU kernel choice;
 * cnn-tensors.c   reading weights and metadata, random weights (for the loaders).
 * Upward calls: the rows use cnn-weights.c's cnn_same_out()/cnn_chain_error() and
 * cnn-forward.c's cnn_bias_act(). */
#pragma once
#include "cony/cnn.h"
#include "cony/safetensors.h"
#include "cpu-private.h"
#include "gemv-private.h"

#include <pthread.h>

/* The integer network of a quantised file, one integer layer of it and a ConyCnn's
 * scratch for it (cnn-int8.c). */
typedef struct _CnnInt8 CnnInt8;
typedef struct _CnnQLayer CnnQLayer;
typedef struct _CnnInt8Scratch CnnInt8Scratch;

typedef enum
{
  /* In the order of cnn-layers.c's rows (MobileNet words are listed in it). */
  LAYER_CONV,    /* 3x3 SAME conv (stride 1 or 2) + ReLU / ReLU6 */
  LAYER_DW,      /* MobileNet: 3x3 depthwise SAME conv (stride 1 or 2) + ReLU / ReLU6 */
  LAYER_PW,      /* MobileNet: 1x1 pointwise conv + ReLU / ReLU6 */
  LAYER_ADD,     /* MobileNet-v2 residual: the map plus layer add_from's output */
  LAYER_POOL,    /* 2x2 max-pool, stride 2 */
  LAYER_GAP,     /* global average pool: H x W x C -> 1 x 1 x C */
  LAYER_FC,      /* fully connected (+ ReLU when relu) */
  LAYER_SIGMOID, /* MobileNet head: logistic of the previous (FC) output */
  LAYER_SOFTMAX, /* MobileNet head: softmax of the previous (FC) output */
  LAYER_KIND_COUNT
} LayerKind;

typedef struct {
  LayerKind kind;
  char *name; /* "features.3", "embeddings.0", "pool" */
  guint in_h, in_w, in_c;
  guint out_h, out_w, out_c; /* for FC: out_h = out_w = 1, out_c = width */
  gboolean relu;
  float relu_max;          /* CONV/DW/PW: 6 for ReLU6, INFINITY for ReLU (0 is read as INFINITY) */
  guint stride;            /* CONV/DW: 1 or 2 (0 is read as 1) */
  guint pad_top, pad_left; /* CONV/DW: TensorFlow SAME padding before the map */
  guint add_from;          /* ADD: the layer whose output is added */
  gboolean keep;           /* its output is added later: the forward pass saves it */
  /* CONV: w is (9 * in_c) x out_c row-major, row = (ky * 3 + kx) * in_c + ci.
   * DW:   w is 9 x C row-major, row = ky * 3 + kx.
   * PW:   w is in_c x out_c row-major.
   * FC:   w is out x in row-major (torch layout). */
  float *w;
  float *b;
  ConyGemvMatrix w16; /* FC with F16 weights only: w16.f16 (w is then NULL), see fc_f16() */
  gint8 *q;           /* PW from I8 file weights: the int8 values, out x in, then (once
                          * packed, q_packed) in the 16-column panels of wino[0] */
  float *qscale;      /* their scales, out */
  gboolean q_packed;
  float *wino[2]; /* CONV, Winograd F(2x2) / F(4x4): n*n x in_c x out_c (made on first use);
                          * PW: wino[0] = w in 16-column panels for the wino_gemm kernel */
  gboolean wino_packed[2]; /* wino[] in 16-column panels for the wino_gemm kernel */
} Layer;

/* The immutable part of a network: geometry, layers and their weights, metadata.
 * One is shared by every ConyCnn loaded from the same file (see cnn-shared.c); after
 * loading only the forms derived on first use change (Winograd-transformed and
 * panel-packed weights: wino[], q packing), each made once under @lazy. The locks
 * are pthread mutexes rather than GMutex so that ThreadSanitizer, which does not
 * see GLib's futex-based locks, can check this code. */
typedef struct {
  char *source; /* file name or "random" (for messages) */
  guint in_h, in_w, in_c;
  guint out_dim;  /* floats of the last layer's output (the scores) */
  guint feat_dim; /* floats per example at the end of the conv stack (first_fc) */
  guint emb_dim;  /* floats of the embedding (the gap output before the head); 0: none */
  const struct _CnnNetwork *network; /* its row in cnn-load.c's table */
  GHashTable *metadata; /* the file's __metadata__ (key -> value), NULL for random networks */
  char **labels;        /* the `labels` metadata, out_dim strings, or NULL */
  gboolean final_relu;  /* the file's final_relu (each ConyCnn starts with it) */
  Layer *layers;
  guint n_layers;
  guint first_fc; /* index of the first FC layer */

  float *pca_e;  /* D x D [out, in], from the model file */
  float *pca_mu; /* D */

  /* Scratch sizes of one example. */
  gsize max_act;        /* largest activation (floats) */
  gsize conv_batch;     /* examples a batch runs through the conv stack together */
  gsize max_col;        /* largest im2col matrix (floats) */
  gsize max_wv, max_wm; /* Winograd scratch: n*n x tiles x Cin, n*n x tiles x Cout */
  gsize max_ch;         /* widest conv layer (channels) */
  gsize max_keep;       /* largest map a residual add needs saved (floats; 0: none) */

  /* Input normalisation (x - mean[c]) / std[c], from input_mean / input_std; NULL when
   * the file declares none. */
  float *in_mean, *in_std;
  /* center_height: each input column (one width position and channel: a mel band)
   * has its mean over the input's height (the patch's frames) removed first. */
  gboolean center_height;
  gboolean global_pool;

  /* Sharing (cnn-shared.c). */
  int users;            /* ConyCnn holding these weights (under the registry's lock) */
  char *key;            /* registry key; NULL: private (random, sharing off, or modified) */
  pthread_mutex_t lazy; /* makes the derived forms (wino[], q packing) once */

  CnnInt8 *q8; /* the integer layers (reference counted, immutable); NULL: float only */
} CnnWeights;

/* Called right before (@ran FALSE) and right after (@ran TRUE) layer @layer of an
 * integer forward pass runs on @examples examples: a benchmark reads its clock there. */
typedef void (*CnnInt8LayerHook) (guint layer, gboolean ran, gsize examples, gpointer data);

/* One user of a network: its settings and its scratch (not thread-safe). */
struct _ConyCnn {
  CnnWeights *w; /* shared, read-only here but for the derived forms */
  ConyCnnOutput output;
  gboolean final_relu;
  /* PCA in use: the file's (w->pca_*), or this instance's own after cony_cnn_load_pca(). */
  const float *pca_e, *pca_mu;
  float *own_pca_e, *own_pca_mu;

  /* Scratch. */
  gsize conv_cap; /* examples the conv scratch (act, col, norm, Winograd) holds */
  gsize col_cap;  /* floats allocated in col (made when an im2col layer runs) */
  float *act_a, *act_b, *col;
  float *res;         /* the saved map of a residual (conv_cap x max_keep floats) */
  gsize fc_batch_cap; /* examples the FC scratch holds */
  float *fc_a, *fc_b;
  float *fc_w32; /* F16 FC weights expanded for a batch, fc_w32_cap floats */
  gsize fc_w32_cap;

  gboolean profiling;
  ConyCnnProfile prof;

  ConyCnnConvAlgorithm conv_algo;
  float *wv, *wm, *wt;
  float *panel; /* one expanded int8 panel of a pointwise layer (16 x widest input) */
  gsize panel_cap;

  /* norm: the normalised copy of the examples; col_sum (in_w * in_c): center_height's
   * column sums, made with norm; norm_row (2 * in_w * in_c, where in_mean): a row's
   * means, then their 1 / std, column by column. */
  float *norm;
  double *col_sum;
  float *norm_row;

  ConyCnnPrecision precision; /* requested; the integer path runs when w->q8 and not FLOAT */
  CnnInt8Scratch *q8s;

  /* A developer hook (cony bench int8; NULL: none) around each integer layer of a
   * forward pass (cnn_set_int8_layer_hook). */
  CnnInt8LayerHook int8_hook;
  gpointer int8_hook_data;
};

#define FC_CHUNK 128
/* forward_batch runs up to this many examples through each conv layer at once
 * (their tiles share each product, so the weights are read once per batch). */
#define CONV_BATCH 8
/* AUTO uses F(4x4,3x3) on layers whose map has at least this many 4x4 tiles. */
#define WINO4_MIN_TILES 24
/* Batched F16 FC layers expand at most this many weights (8 MB) at a time. */
#define FC_F16_BLOCK ((gsize) 1 << 21)

/* Hot loops are built for x86-64-v3 too (AVX2/FMA, 8 floats per instruction
 * instead of SSE2's 4), chosen at load time: cpu-private.h's CONY_CLONES. */

typedef struct {
  gboolean portable; /* FC products with the portable gemv (cony_gemv_portable) */
  /* Winograd products on packed weights (NULL: OpenBLAS sgemm), see wino_gemm_avx2. */
  void (*wino_gemm) (gsize T, gsize K, gsize cin, const float *v, const float *up, float *out);
  /* One 16-column panel of it: out (T x 16, row stride ldo) = v (T x cin) panel. */
  void (
      *gemm_panel) (gsize T, gsize ldo, gsize cin, const float *v, const float *panel, float *out);
} CnnKernels;

/* ---------------------------------------------------------------- layer kinds */

/* A word of a MobileNet `layers` list (docs/model-format.md) and what it sets. */
typedef struct {
  const char *word; /* "conv3x3s2"; with @index the prefix of "add@K" */
  guint stride;
  gboolean relu;  /* the layer's activation (linear1x1 has none) */
  gboolean v2;    /* MobileNet-v2 (and random layouts) only */
  gboolean index; /* followed by a layer index K below the word's own (add@K) */
} CnnLayerWord;

/* Where a loader's tensors come from: a file, or (st NULL) random numbers. */
typedef struct {
  const ConySafetensors *st;
  guint64 rng;
} CnnTensorSource;

/* The map a layer gets (and, after it, gives): h x w x c, or flat (the head's
 * vectors, h = w = 1 and c their length). */
typedef struct {
  guint h, w, c;
  gboolean flat;
} CnnShape;

/* cnn_layer_forward() flags. */
enum
{
  CNN_FORWARD_WINOGRAD = 1 << 0, /* CONV may run as Winograd (cnn_wino_tile()) */
  CNN_FORWARD_RELU = 1 << 1,     /* ReLU after the layer even without l->relu (final_relu) */
};

/* One row per LayerKind (cnn-layers.c's table; the static assert there fails until a
 * new kind has one). NULL hooks: the kind has no such step. */
typedef struct {
  const char *name;          /* for people and the docs (cony_cnn_layer_kind_name()) */
  const CnnLayerWord *words; /* its words in a MobileNet `layers` list, up to a { NULL } */
  gboolean flat;             /* runs in the head on flat vectors (FC and what follows it) */
  gboolean width;            /* a layout gives its output width ("conv1x1:64") */
  /* Continual CNN: input rows one output row reads, and its stride (0: l->stride). */
  guint taps, stride;
  /* Multiply-add weights per output position (the floats of l->w). The parameters are
   * these plus one bias per output channel, the FLOPs twice these per position. */
  gsize (*n_weights) (const Layer *l);
  /* Layer @i of @cnn on the map @s (the previous layer's output): checks its input,
   * fills in its geometry and sets @s to its output; FALSE with @error. */
  gboolean (*geometry) (CnnWeights *cnn, guint i, CnnShape *s, GError **error);
  /* What `cony info` prints after the layer's name; @relu: ReLU follows (FC). */
  void (*describe) (GString *out, const CnnWeights *w, const Layer *l, gboolean relu);
  /* @l on @nb examples of @in into @out (CNN_FORWARD_* @flags). */
  void (*forward) (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb, guint flags);
  /* A MobileNet loader: reads (or draws) @l's tensors, @width its output width (0: the
   * file's), and moves @s past the layer. */
  gboolean (*tensors) (CnnTensorSource *src, Layer *l, guint64 width, CnnShape *s, GError **error);
  /* The integer path (cnn-int8.c): loads layer @i of @w into q8->layers[i] (its scales
   * set) and grows q8's scratch sizes; runs it (geometry @l: the layer or a slab copy)
   * on @nb examples. NULL: no integer kernel. */
  gboolean (*int8_load) (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
      GError **error);
  void (*int8_run) (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
      gsize nb, gint8 *out);
} CnnLayerClass;

/* The rows, one per file of a family (cnn-layer-*.c). */
extern const CnnLayerClass cnn_layer_conv, cnn_layer_pool, cnn_layer_fc, cnn_layer_gap,
    cnn_layer_dw, cnn_layer_pw, cnn_layer_sigmoid, cnn_layer_add, cnn_layer_softmax;

/* cnn-layers.c */
const CnnLayerClass *cnn_layer_class (LayerKind kind);
/* "ReLU6" or "ReLU": @l's activation, for describe. */
const char *cnn_layer_act_name (const Layer *l);
/* A MobileNet layer word's entry and *@kind (*add_from = K for "add@K", which must be
 * below @index); NULL: unknown, or a v2 word where !@v2. */
const CnnLayerWord *cnn_layer_find_word (const char *word, gboolean v2, guint index,
    LayerKind *kind, guint *add_from);
/* TRUE when @layout starts (after spaces) with a MobileNet layer word. */
gboolean cnn_layer_starts_word (const char *layout);
/* The MobileNet words @v2 allows, for messages ("conv3x3s1, conv3x3s2, ..."). */
char *cnn_layer_words (gboolean v2);
guint64 cnn_layer_n_params (const Layer *l);

/* cnn.c */
void cnn_ensure_conv_scratch (ConyCnn *cnn, gsize nb);
/* A ConyCnn on @w (taking the caller's reference; NULL @w gives NULL). */
ConyCnn *cnn_new (CnnWeights *w);

/* cnn-shared.c */
/* The weights of @path: the already loaded ones, or loaded now (and registered when
 * @share); a reference for one more ConyCnn. */
CnnWeights *cnn_weights_acquire (const char *path, gboolean share, GError **error);
void cnn_weights_release (CnnWeights *w);
/* Makes @cnn's weights its own (a copy when others use them) before changing them. */
void cnn_weights_make_private (ConyCnn *cnn);

/* cnn-load.c: the weights of a model file or of a random layout. */
CnnWeights *cnn_weights_load (const char *path, GError **error);
CnnWeights *cnn_weights_random (const char *layout, guint input_height, guint input_width,
    guint input_channels, guint32 seed, GError **error);

/* cnn-vgg.c, cnn-mobilenet.c: the layers of one network kind into @cnn (whose input
 * size, normalisation and source are set), ending with cnn_finish_geometry(). */
/* One row per network kind, in cnn-load.c's table: a file's `network` metadata picks
 * its loader; a random layout goes to the first row whose is_layout accepts it. */
typedef struct _CnnNetwork {
  const char *network;      /* the metadata value; NULL: a file without the key */
  const char *display_name; /* what `cony info` prints */
  gboolean needs_fc;        /* the network must end in fully connected layers */
  gboolean (*load) (CnnWeights *cnn, const ConySafetensors *st, GError **error);
  gboolean (*is_layout) (const char *layout); /* NULL: takes any random layout */
  gboolean (*random) (CnnWeights *cnn, const char *layout, guint32 seed, GError **error);
} CnnNetwork;

gboolean cnn_vgg_load (CnnWeights *cnn, const ConySafetensors *st, GError **error);
gboolean cnn_vgg_random (CnnWeights *cnn, const char *layout, guint32 seed, GError **error);
/* The PCA tensors of a file (cony_cnn_load_pca()). */
gboolean cnn_read_pca_file (const char *path, guint d, float **e, float **mu, GError **error);
gboolean cnn_mobilenet_v1_load (CnnWeights *cnn, const ConySafetensors *st, GError **error);
gboolean cnn_mobilenet_v2_load (CnnWeights *cnn, const ConySafetensors *st, GError **error);
/* TRUE when @layout starts with a MobileNet layer word (else VGG widths). */
gboolean cnn_mobilenet_is_layout (const char *layout);
gboolean cnn_mobilenet_random (CnnWeights *cnn, const char *layout, guint32 seed, GError **error);

/* cnn-tensors.c */
/* Metadata @key as a positive integer <= 65536 / a boolean / a per-channel list of @n
 * floats (NULL when absent); @def when absent. */
gboolean cnn_meta_uint (const ConySafetensors *st, const char *key, guint def, guint *out,
    GError **error);
gboolean cnn_meta_bool (const ConySafetensors *st, const char *key, gboolean def, gboolean *out,
    GError **error);
gboolean cnn_meta_channels (const ConySafetensors *st, const char *key, guint n, gboolean positive,
    float **out, GError **error);
/* Torch conv weight (out, in, 3, 3) -> our (9 * in) x out im2col layout. */
float *cnn_conv_weight_from_torch (const float *t, guint out, guint in);
/* @base.bias, @n floats. */
float *cnn_read_bias (const ConySafetensors *st, const char *base, guint n, GError **error);
/* An F16 tensor's values as they are; non-finite ones refused. */
guint16 *cnn_read_f16 (const char *path, const ConyTensorInfo *ti, GError **error);
/* @base.weight as float32 (F32/F16/F64, or I8 dequantised), checked against @shape. */
float *cnn_read_weight (const ConySafetensors *st, const char *base, int ndim, gsize *shape,
    GError **error);
/* Keeps the file's metadata and parses `labels` (one per output). */
gboolean cnn_read_labels_and_metadata (CnnWeights *cnn, const ConySafetensors *st, GError **error);
/* Uniform in [-a, a] from the splitmix64 state @s. */
void cnn_fill_uniform (float *x, gsize n, float a, guint64 *s);
/* Torch-layout weights (@ndim, @shape, shape[0] = 0: the file's count) and the bias of
 * layer @base from @src. Random weights are He-scaled uniform, biases small. */
gboolean cnn_layer_tensors (CnnTensorSource *src, const char *base, int ndim, gsize *shape,
    float **w, float **b, GError **error);

/* cnn-weights.c */
CnnWeights *cnn_weights_new (void);
void cnn_weights_free (CnnWeights *w);
/* A private deep copy of @src (the caller holds a user of it). */
CnnWeights *cnn_weights_copy (CnnWeights *src);
/* Fills in every layer's geometry from the input size and checks the chain. */
gboolean cnn_finish_geometry (CnnWeights *cnn, GError **error);
/* A layer whose input does not chain to the previous output (got vs want @what). */
gboolean cnn_chain_error (const CnnWeights *cnn, const Layer *l, const char *what, gsize got,
    gsize want, GError **error);
/* Output height/width of a 3x3 SAME conv with @stride on @in rows, and the
 * TensorFlow padding before the map (the odd extra pad goes after). */
guint cnn_same_out (guint in, guint stride, guint *pad_before);

/* cnn-winograd.c */
const CnnKernels *cnn_kernels (void);
/* The Winograd tile size (2 or 4) a conv layer uses on @nb examples; 0: im2col. */
guint cnn_wino_tile (const ConyCnn *cnn, const Layer *l, gsize nb);
void cnn_conv_winograd (ConyCnn *cnn, Layer *l, guint m, const float *in, float *out, gsize nb);

/* cnn-forward.c */
/* A model's per-column means and 1 / std of one input row (ConyCnn's norm_row). */
float *cnn_norm_row_new (const CnnWeights *w);
/* Layer @l (a conv-stack layer: CONV, POOL, GAP, DW, PW, ADD) on @nb examples of @in;
 * CONV layers run as im2col unless @winograd lets cnn_wino_tile() choose. @l may be a
 * copy with another height (cnn-continual.c's column slabs): the kernels read only
 * its geometry and weights. */
void cnn_layer_forward (ConyCnn *cnn, Layer *l, const float *in, float *out, gsize nb,
    gboolean winograd);
/* x += b per row (@rows x @cols), then ReLU clamped at @hi (INFINITY: plain ReLU) when
 * @relu: the end of the conv, pointwise and FC layers. */
void cnn_bias_act (float *x, gsize rows, guint cols, const float *b, gboolean relu, float hi);

/* cnn-layer-pointwise.c */
/* Packs a PW layer's weights for the panel kernel once (no-op for other layers, or
 * where the portable path runs); slab copies of @l must be made after it. */
void cnn_pw_pack (ConyCnn *cnn, Layer *l);
/* TRUE when the output is the FC head's (not the features or the embedding). */
gboolean cnn_head_runs (const ConyCnn *cnn);
/* The FC head on @n flattened feature vectors (feat_dim floats each) into @out
 * (out_dim floats each). */
void cnn_head_forward (ConyCnn *cnn, const float *feat, gsize n, float *out);

/* cnn-int8.c: the integer path of MobileNet-v1/v2 files that carry the `quantization`
 * metadata. It runs the quantised prefix of the layers (all of YAMNet and the ImageNet
 * MobileNets; the adapted YAMNet up to its float-adapted layers) and hands the
 * dequantised result to the float engine for the rest. */
/* Reads @st's `quantization` metadata into w->q8 (left NULL when the file has none).
 * FALSE with @error when it is malformed or does not fit the layers. */
gboolean cnn_int8_load (CnnWeights *w, const ConySafetensors *st, GError **error);
CnnInt8 *cnn_int8_ref (CnnInt8 *q);
void cnn_int8_unref (CnnInt8 *q);
void cnn_int8_scratch_free (ConyCnn *cnn);
/* TRUE when @cnn runs the integer path (a quantised file, precision not FLOAT). */
gboolean cnn_int8_active (const ConyCnn *cnn);
/* Layers the integer path runs (0: none). */
guint cnn_int8_layers (const CnnWeights *w);
/* Runs the integer layers before the FC head on @nb examples (float HWC @in, already
 * normalised), writes the last one's dequantised output to @dst and returns the index
 * of the first layer left to the float engine. */
guint cnn_int8_features (ConyCnn *cnn, const float *in, gsize nb, float *dst);
/* Runs the integer layers of the head (from first_fc) on @n examples of @in (the
 * dequantised output of layer first_fc - 1), writes the last one's dequantised output
 * to @dst and returns the first layer left to the float engine (first_fc: none ran). */
guint cnn_int8_head (ConyCnn *cnn, const float *in, gsize n, float *dst);

/* Integer layer @i on one example of @l's geometry (layer @i or a slab copy of it, at
 * most a few rows more than a window's: cnn-continual.c). */
void cnn_int8_slab (ConyCnn *cnn, const Layer *l, guint i, const gint8 *in, gint8 *out);
/* Integer layer @i's input and output scales and zero points. */
void cnn_int8_io (const ConyCnn *cnn, guint i, float *in_scale, gint32 *in_zp, float *out_scale,
    gint32 *out_zp);
/* @n floats to int8 codes of @scale and @zp (TFLite's rounding, the kernels'). */
void cnn_int8_quantize (const float *x, gsize n, float scale, gint32 zp, gint8 *out);
/* The layer rows' integer hooks (CnnLayerClass.int8_load, int8_run). */
gboolean cnn_int8_load_conv (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_dw (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_pw (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_fc (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_gap (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_add (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8, guint i,
    GError **error);
gboolean cnn_int8_load_sigmoid (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8,
    guint i, GError **error);
gboolean cnn_int8_load_softmax (const ConySafetensors *st, const CnnWeights *w, CnnInt8 *q8,
    guint i, GError **error);
/* Sets @cnn's CnnInt8LayerHook (NULL: none), with @data for it. */
void cnn_set_int8_layer_hook (ConyCnn *cnn, CnnInt8LayerHook hook, gpointer data);
void cnn_int8_run_conv (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);
void cnn_int8_run_gemm (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out); /* PW and FC */
void cnn_int8_run_dw (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);
void cnn_int8_run_gap (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);
void cnn_int8_run_add (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);
void cnn_int8_run_sigmoid (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);
void cnn_int8_run_softmax (const Layer *l, const CnnQLayer *q, CnnInt8Scratch *s, const gint8 *in,
    gsize nb, gint8 *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (CnnWeights, cnn_weights_free)
