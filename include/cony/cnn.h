/* CNN engine: VGG-style networks (VGGish and relatives), MobileNet-v1 (YAMNet)
 * and MobileNet-v2 (the ImageNet classifier of models/imagenet/).
 *
 * ## MobileNet-v1 (network = "mobilenet_v1" in the file's metadata)
 *
 * The `layers` metadata lists the layers (conv3x3s1/s2, dw3x3s1/s2, conv1x1,
 * gap, fc, sigmoid), layer i's tensors are layers.{i}.weight/.bias (torch
 * layouts; I8 weights with layers.{i}.weight_scale per output channel),
 * TensorFlow SAME padding, ReLU6 (or activation=relu) after every conv; see
 * docs/model-format.md, "CNN files". The output is the last layer (scores) or,
 * with cony_cnn_set_output(), the gap output (embedding). Pointwise convs run
 * as one sgemm per layer over the HWC map, depthwise ones as a direct
 * vectorised loop, 3x3 convs as (strided) im2col + sgemm.
 * cony_cnn_new_random() takes MobileNet layouts too (CONY_CNN_YAMNET_LAYOUT).
 *
 * ## MobileNet-v2 (network = "mobilenet_v2")
 *
 * The same words plus linear1x1 (a 1x1 conv without activation: an inverted
 * residual block's projection) and add@K (adds layer K's output: the residual);
 * softmax is a head word for both kinds. U8 weights carry
 * layers.{i}.weight_zero_point (TFLite's uint8 asymmetric quantisation) and are
 * dequantised at load. See docs/model-format.md.
 * Everything below about pools, Winograd, PCA and F16 FC weights concerns the
 * VGG-style networks.
 *
 * ## VGG-style networks
 *
 * The network is a stack of
 *   - 3x3 convolutions, stride 1, SAME (zero) padding, each followed by ReLU,
 *   - 2x2 max-pools, stride 2 (odd trailing rows/columns are dropped),
 *   - optionally a global average pool after the last conv (global_pool=avg),
 *   - a flatten in NHWC order (index = (h * W + w) * C + c, as TensorFlow and
 *     torchvggish do),
 *   - fully connected layers, ReLU after each but the last (see final_relu).
 * Convolutions run as Winograd F(4x4,3x3) or F(2x2,3x3) or im2col, all on
 * OpenBLAS cblas_sgemm (see ConyCnnConvAlgorithm); FC layers as sgemm/sgemv,
 * or on F16 weights (see cony_cnn_set_fc_f16()).
 *
 * Input: one example is a float32 array in HWC order, H rows x W columns x C
 * channels, C innermost. For VGGish H = 96 (time: frames), W = 64 (mel bands),
 * C = 1, so an example is simply 96 consecutive 64-float log-mel frames.
 * Output: cony_cnn_get_output_size() floats (128 for VGGish).
 *
 * ## Model file
 *
 * safetensors (F32, F16 or F64; F16 FC weights stay F16 in memory, see
 * cony_cnn_set_fc_f16()) with torchvggish's state_dict names and shapes,
 * so the official torchvggish weights converted 1:1 by training/convert_vggish.py
 * load as they are:
 *
 *   features.K.weight  (out, in, 3, 3)   features.K.bias  (out)
 *   embeddings.K.weight (out, in)        embeddings.K.bias (out)
 *   pca_eigen_vectors (D, D), pca_means (D) or (D, 1)   -- optional; the names
 *       pproc.pca_eigen_vectors / pproc.pca_means are accepted too.
 *
 * The layer list follows torchvggish's nn.Sequential indices: a conv at index K
 * has its ReLU at K + 1; every index in between two convs that is not a ReLU
 * is a max-pool (VGGish: convs 0 3 6 8 11 13, pools 2 5 10). Pools after the
 * last conv leave no index in the state_dict, so their number is inferred
 * from embeddings.0's input width (VGGish: one, index 15); a width that no
 * number of pools explains is refused. Channel widths and layer counts are
 * free. In `embeddings`, a linear at index K whose successor is at K + 2 or
 * later is followed by a ReLU.
 *
 * Optional "__metadata__" string keys:
 *   input_height, input_width, input_channels   default 96, 64, 1
 *   final_relu   "true"/"false": ReLU after the last FC layer. Default "false"
 *                (current TensorFlow VGGish: the embedding is pre-activation);
 *                torchvggish keeps the ReLU, and convert_vggish.py writes
 *                "true" by default so converted files reproduce torchvggish.
 *   input_mean, input_std  per-channel input normalisation: the network sees
 *                (x - mean[c]) / std[c]. Comma-separated, one value per input
 *                channel or a single value for all ("0.485,0.456,0.406"); std > 0.
 *                Default none (0 / 1). Image models take pixel values in 0..1
 *                (conyframeembed divides 8-bit values by 255), so torchvision's
 *                ImageNet constants apply as they are.
 *   center_height  "true"/"false" (default): each input column (a width position
 *                and channel: for log-mel patches, a mel band) has its mean over
 *                the input's height (the patch's frames) subtracted before the
 *                normalisation below, so a constant offset per band (a
 *                recording's colouration, its level) does not reach the network.
 *   global_pool  "avg": the map after the last conv (and trailing pools) is
 *                averaged over height and width, so the FC input is its channel
 *                count whatever the input size; "none" (default): flattened.
 *   trailing_pools  max-pools after the last conv (integer, 0..16). Default:
 *                inferred from embeddings.0's input width as above; with
 *                global_pool=avg, 0 unless given (the width cannot tell).
 * training/convert_vgg_torchvision.py converts torchvision-layout VGG weights
 * (features.K / classifier.K, BatchNorm folded, the adaptive average pool
 * folded into the first linear layer for the chosen input size).
 *
 * Optional for every CNN file: labels (a JSON list of strings, one per output
 * of the last layer), frontend (the log-mel it was trained with, JSON), source.
 *
 * Errors (CONY_ERROR_*) name the file, the tensor and the expected shape.
 * Non-finite weights are refused.
 *
 * ## PCA + 8-bit postprocess (the official release's)
 *
 *   p = (e - mu) E^T,  c = clip(p, -2, 2),  q = (c + 2) * 255 / 4
 * and then either
 *   CONY_CNN_POSTPROCESS_TF:    computed in double, q truncated toward zero
 *                               (numpy astype(uint8), vggish_postprocess.py);
 *   CONY_CNN_POSTPROCESS_TORCH: computed in float32, q rounded half to even
 *                               (torch.round, torchvggish).
 * The two differ by 1 on roughly a third of the unclipped elements. The output
 * stays float (values 0..255).
 *
 * A ConyCnn holds scratch buffers: it is not thread-safe; use one per stream
 * (or lock). Loading copies the weights out of the file (which is then closed).
 *
 * ## Sharing
 *
 * The weights (layers, packed and transformed filters, metadata, labels, the
 * file's PCA) are loaded once per process: cony_cnn_load() of a file that is
 * already loaded, and unchanged since (same canonical path, device, inode, size
 * and modification time), returns a new ConyCnn on the same weights, and the
 * last cony_cnn_free() frees them. Each ConyCnn keeps its own scratch, output
 * selection, final_relu, conv algorithm, profile and cony_cnn_load_pca() PCA, so
 * shared networks give bit-identical results and run in parallel threads
 * (one ConyCnn per thread, as before). cony_cnn_set_fc_f16() on shared
 * weights first makes them a private copy. cony_cnn_load_private() opts out.
 * The registry lives in libcony, a static library: each program or plugin linking
 * it has its own (the GStreamer plugin's elements share one among themselves).
 * Weights come from the first loader; error messages about them name its path.
 */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct _ConyCnn ConyCnn;

typedef enum
{
  CONY_CNN_POSTPROCESS_NONE = 0,
  CONY_CNN_POSTPROCESS_TF,    /* double maths, truncate (vggish_postprocess.py) */
  CONY_CNN_POSTPROCESS_TORCH, /* float maths, round half to even (torchvggish) */
} ConyCnnPostprocess;

/* What cony_cnn_forward() returns: the last layer's output (SCORES: for
 * YAMNet 521 sigmoid scores; for VGGish the 128-d embedding) or the output of
 * the global average pool that feeds the FC head (EMBEDDING: YAMNet's 1024-d
 * vector; only for networks whose FC layers follow a global average pool). */
typedef enum
{
  CONY_CNN_OUTPUT_SCORES = 0,
  CONY_CNN_OUTPUT_EMBEDDING,
} ConyCnnOutput;

/* The full-size VGGish layout for cony_cnn_new_random(): conv widths, "M" for a
 * max-pool, "|" then the FC widths. 72,141,184 parameters with a 96x64x1 input. */
#define CONY_CNN_VGGISH_LAYOUT "64 M 128 M 256 256 M 512 512 M | 4096 4096 128"

/* YAMNet's MobileNet-v1 for cony_cnn_new_random() (96x64x1 input): 3,729,481
 * parameters, 521 sigmoid scores, a 1024-d embedding. MobileNet layouts are
 * the `layers` words of the file format, each conv3x3/conv1x1/fc with
 * ":WIDTH"; ReLU6. */
#define CONY_CNN_YAMNET_LAYOUT \
  "conv3x3s2:32 dw3x3s1 conv1x1:64 dw3x3s2 conv1x1:128 dw3x3s1 conv1x1:128 " \
  "dw3x3s2 conv1x1:256 dw3x3s1 conv1x1:256 dw3x3s2 conv1x1:512 dw3x3s1 conv1x1:512 " \
  "dw3x3s1 conv1x1:512 dw3x3s1 conv1x1:512 dw3x3s1 conv1x1:512 dw3x3s1 conv1x1:512 " \
  "dw3x3s2 conv1x1:1024 dw3x3s1 conv1x1:1024 gap fc:521 sigmoid"

/* Loads a model file (see above; a relative name as cony_model_path_find() resolves
 * it), sharing the weights of an earlier load of the same unchanged file (see
 * "Sharing"). NULL with @error set on any problem. */
ConyCnn *cony_cnn_load (const char *path, GError **error);
/* The same with weights of its own: neither shared nor found by later loads. */
ConyCnn *cony_cnn_load_private (const char *path, GError **error);
/* How many ConyCnn (in this process) use @cnn's weights, @cnn included: 1 when
 * not shared. */
guint cony_cnn_get_weights_users (const ConyCnn *cnn);
/* TRUE when @a and @b run on the same weights (one copy in memory). */
gboolean cony_cnn_shares_weights (const ConyCnn *a, const ConyCnn *b);

/* Builds a network from a @layout string like CONY_CNN_VGGISH_LAYOUT ("G" after
 * the convs: global average pool) with
 * deterministic pseudo-random weights (He-scaled uniform, small biases) from
 * @seed; used by benchmarks. */
ConyCnn *cony_cnn_new_random (const char *layout, guint input_height, guint input_width,
    guint input_channels, guint32 seed, GError **error);

void cony_cnn_free (ConyCnn *cnn);

/* Input geometry (HWC) and sizes. */
guint cony_cnn_get_input_height (const ConyCnn *cnn);
guint cony_cnn_get_input_width (const ConyCnn *cnn);
guint cony_cnn_get_input_channels (const ConyCnn *cnn);
/* H * W * C floats per example. */
gsize cony_cnn_get_input_size (const ConyCnn *cnn);
/* Floats per output: the last layer's width, or the embedding's size while
 * the output is CONY_CNN_OUTPUT_EMBEDDING. */
guint cony_cnn_get_output_size (const ConyCnn *cnn);

/* Output selection (default SCORES). Selecting EMBEDDING fails with
 * CONY_ERROR_INVALID, changing nothing, when the network has none. */
gboolean cony_cnn_set_output (ConyCnn *cnn, ConyCnnOutput output, GError **error);
ConyCnnOutput cony_cnn_get_output (const ConyCnn *cnn);
/* Size of the embedding (the global average pool before the FC head); 0 when
 * the network has none. */
guint cony_cnn_get_embedding_size (const ConyCnn *cnn);
/* TRUE for a network = mobilenet_v1 or mobilenet_v2 file (or a random MobileNet
 * layout). */
gboolean cony_cnn_is_mobilenet (const ConyCnn *cnn);
/* The network kind for people: "VGG-style", "MobileNet-v1" or "MobileNet-v2" (a random
 * MobileNet layout counts as v2, whose words include v1's). Owned by libcony. */
const char *cony_cnn_get_network_name (const ConyCnn *cnn);
/* The engine's tables, for listings and documentation checks (docs/model-format.md
 * describes every row). Layer kinds: row @i's name as cony_cnn_describe() prints it
 * ("conv3x3", "depthwise3x3", ...). Network kinds: row @i's cony_cnn_get_network_name(),
 * and the `network` metadata value that picks it (NULL: a file without the key, the
 * VGG-style row). NULL past the last row; strings owned by libcony. */
guint cony_cnn_n_layer_kinds (void);
const char *cony_cnn_layer_kind_name (guint i);
guint cony_cnn_n_networks (void);
const char *cony_cnn_network_name (guint i);
const char *cony_cnn_network_metadata (guint i);
/* A string of the file's __metadata__ (e.g. "frontend", "source"), or NULL. */
const char *cony_cnn_get_metadata (const ConyCnn *cnn, const char *key);
/* The `labels` metadata: one label per score (NULL-terminated, owned by the
 * network), or NULL when the file has none. *@n (may be NULL) gets the count. */
const char *const *cony_cnn_get_labels (const ConyCnn *cnn, guint *n);

/* TRUE when the network's last layer scores classes: it is a sigmoid (YAMNet's head) or
 * the file labels every output. FALSE for an embedding network (VGGish's 128-d FC, a
 * MobileNet that ends in its global pool such as models/audio/yamnet-adapted). */
gboolean cony_cnn_has_scoring_head (const ConyCnn *cnn);

/* Number of parameters (weights + biases, PCA excluded). */
guint64 cony_cnn_get_n_params (const ConyCnn *cnn);
/* Floating-point operations of one forward pass (a multiply-add counts 2),
 * split into convolutions and FC layers (either pointer may be NULL). */
void cony_cnn_get_flops (const ConyCnn *cnn, guint64 *conv_flops, guint64 *fc_flops);
/* A human-readable layer list, one layer per line (g_free() it). */
char *cony_cnn_describe (const ConyCnn *cnn);

/* ReLU after the last FC layer (from the file's final_relu; default FALSE). */
gboolean cony_cnn_get_final_relu (const ConyCnn *cnn);
void cony_cnn_set_final_relu (ConyCnn *cnn, gboolean final_relu);

/* Runs one example: @input has cony_cnn_get_input_size() floats, @out receives
 * cony_cnn_get_output_size() floats. Non-finite inputs propagate to the output
 * (the caller checks its input). */
void cony_cnn_forward (ConyCnn *cnn, const float *input, float *out);
/* Runs @n examples stored one after the other: the conv layers take up to 8
 * examples per sgemm (their tiles / im2col rows together), the FC layers one
 * sgemm for up to 128 (faster for offline files than n single calls; the same
 * values to float rounding). */
void cony_cnn_forward_batch (ConyCnn *cnn, const float *input, gsize n, float *out);

/* Input normalisation: TRUE when the model declares input_mean/input_std; then
 * *@mean and *@std (either may be NULL) point at input_channels floats owned by
 * the network. */
gboolean cony_cnn_get_normalization (const ConyCnn *cnn, const float **mean, const float **std);
/* TRUE when the model centres each input column over the height (center_height). */
gboolean cony_cnn_get_center_height (const ConyCnn *cnn);
/* TRUE when the conv stack ends with a global average pool (global_pool=avg, or
 * "G" in a random layout). */
gboolean cony_cnn_get_global_pool (const ConyCnn *cnn);

/* PCA parameters: present when the model file carried them, or after
 * cony_cnn_load_pca(). Their dimension equals the output size. */
gboolean cony_cnn_has_pca (const ConyCnn *cnn);
/* Loads pca_eigen_vectors (D, D) and pca_means (D) / (D, 1) from a separate
 * safetensors file (e.g. the converted vggish_pca_params). */
gboolean cony_cnn_load_pca (ConyCnn *cnn, const char *path, GError **error);

/* Postprocesses @n embeddings (@emb, n x D) into @out (n x D, may equal @emb).
 * Fails with CONY_ERROR_MISSING when the model has no PCA parameters, and with
 * CONY_ERROR_INVALID while the output is CONY_CNN_OUTPUT_EMBEDDING (mode NONE
 * just copies n x the output size). */
gboolean cony_cnn_postprocess (const ConyCnn *cnn, ConyCnnPostprocess mode, const float *emb,
    gsize n, float *out, GError **error);

/* How 3x3 convolutions are computed. All give the same function (to float
 * rounding; tests check each against torch):
 *   IM2COL:    im2col + one sgemm per layer (2*H*W*9*Cin*Cout FLOPs);
 *   WINOGRAD:  Winograd F(2x2, 3x3): 4x4 input tiles transformed, 16 sgemms of
 *              (tiles x Cin) x (Cin x Cout), 2.25x fewer multiplications;
 *   WINOGRAD4: Winograd F(4x4, 3x3) (points 0, +-1, +-1/2, infinity): 6x6 input
 *              tiles, 36 sgemms, 4x fewer multiplications, transformed weights
 *              4x the size of the 3x3 ones; float32 error ~2e-6 relative;
 *   AUTO:      (default) per layer: im2col below 16 input channels; F(4x4)
 *              where the map has at least 24 4x4 tiles (counting every example
 *              of a batched call); F(2x2) on smaller maps (VGGish, one window:
 *              im2col, F(4x4) for conv2 and conv3, F(2x2) for conv4).
 * Where the CPU has AVX2/FMA and a layer's output channels are a multiple of
 * 16, the Winograd products run on weights packed once into 16-column panels
 * (own kernel); otherwise, and with CONY_CNN_PORTABLE=1, on OpenBLAS sgemm. */
typedef enum
{
  CONY_CNN_CONV_AUTO = 0,
  CONY_CNN_CONV_IM2COL,
  CONY_CNN_CONV_WINOGRAD,
  CONY_CNN_CONV_WINOGRAD4,
} ConyCnnConvAlgorithm;

void cony_cnn_set_conv_algorithm (ConyCnn *cnn, ConyCnnConvAlgorithm algorithm);
ConyCnnConvAlgorithm cony_cnn_get_conv_algorithm (const ConyCnn *cnn);

/* F16 weights in the FC layers. A model file whose embeddings.K.weight tensors
 * are F16 keeps them in F16 in memory (half the bytes of F32; conv weights and
 * all biases are always float32): the FC layers then compute with those values
 * expanded to float32 in registers (F16C + FMA where the CPU has them, a
 * portable loop otherwise), so the result is the float32 network with the
 * stored weights, to float rounding, while a streaming (one-window) FC layer,
 * bound by memory bandwidth, reads half the bytes. Batches expand blocks of
 * rows and use sgemm.
 * cony_cnn_get_fc_f16(): TRUE when every FC layer holds F16 weights.
 * cony_cnn_set_fc_f16(TRUE): rounds F32 FC weights to F16 (nearest even): this
 * changes the function (relative weight error up to 2^-11); fails, changing
 * nothing, when a weight is outside the F16 range. cony_cnn_set_fc_f16(FALSE):
 * expands F16 weights to F32 exactly (same function, twice the memory).
 * CONY_CNN_PORTABLE=1 in the environment (read once) makes the F16 paths use the
 * portable loops even where F16C is available (tests cover both). */
gboolean cony_cnn_get_fc_f16 (const ConyCnn *cnn);
gboolean cony_cnn_set_fc_f16 (ConyCnn *cnn, gboolean f16, GError **error);

/* Precision. A MobileNet file converted from an int8 .tflite records the activation
 * scales and zero points (metadata `quantization`, docs/model-format.md); such a file
 * runs TFLite's integer inference by default (AUTO): int8 activations and per-channel
 * int8 weights (packed once at load), int32 accumulation, requantisation with TFLite's
 * fixed-point arithmetic, ReLU6 as a clamp, outputs dequantised to float. Its results
 * are TFLite's (ArmNN's to one quantisation step), not the float network's. A file
 * whose metadata quantises only a prefix of the layers (the adapted YAMNet) runs that
 * prefix in int8 and the rest in float. FLOAT forces the float engine on the same
 * weights; INT8 fails with CONY_ERROR_INVALID on a file without quantisation. Kernels:
 * AVX2 where the CPU has it (unless CONY_CNN_PORTABLE=1), portable C otherwise; both
 * give the same bits. */
typedef enum
{
  CONY_CNN_PRECISION_AUTO = 0,
  CONY_CNN_PRECISION_FLOAT,
  CONY_CNN_PRECISION_INT8,
} ConyCnnPrecision;

gboolean cony_cnn_set_precision (ConyCnn *cnn, ConyCnnPrecision precision, GError **error);
/* What runs now: FLOAT or INT8 (some layers integer). */
ConyCnnPrecision cony_cnn_get_precision (const ConyCnn *cnn);
/* Layers the integer path runs (0 when it does not run; all of them for YAMNet). */
guint cony_cnn_get_int8_layers (const ConyCnn *cnn);
/* Layers the file quantises, whatever the precision chosen. */
guint cony_cnn_get_quantized_layers (const ConyCnn *cnn);
/* The integer kernels this process runs: "avx2" or "portable". */
const char *cony_cnn_get_int8_kernels (void);
/* "auto", "float", "int8" to the enum; FALSE for anything else. */
gboolean cony_cnn_precision_from_string (const char *name, ConyCnnPrecision *precision);
/* What runs, in words ("int8, all 30 layers (avx2 kernels)"; g_free() it). */
char *cony_cnn_describe_precision (const ConyCnn *cnn);

/* Profiling, for benchmarks: while enabled, forward calls add the time spent
 * in the conv/pool stack and in the FC layers, both as wall time and as CPU
 * time of the calling thread (the latter is the compute time free of other
 * processes' interference, but misses work done by extra BLAS threads), and
 * count the examples. cony_cnn_set_profiling() also zeroes the counters. */
typedef struct {
  double conv_wall, fc_wall; /* seconds */
  double conv_cpu, fc_cpu;   /* seconds of this thread's CPU time */
  guint64 examples;
} ConyCnnProfile;

void cony_cnn_set_profiling (ConyCnn *cnn, gboolean enable);
void cony_cnn_get_profile (const ConyCnn *cnn, ConyCnnProfile *profile);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ConyCnn, cony_cnn_free)

G_END_DECLS
