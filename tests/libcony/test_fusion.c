/* Fused models (include/cony/fusion.h): the fused token and the logits of the encoder on
 * fused tokens (and of a confidence gate after it) against the PyTorch twin
 * (training/gen_fusion_golden.py), a shut gate giving the audio model's logits, and bad
 * fusion parts refused by name; the parameter count covers the fusion part. */
#include "cony/encoder.h"
#include "cony/error.h"
#include "cony/fusion.h"
#include "cony/model.h"
#include "cony/npy.h"
#include "cony/safetensors.h"
#include "testutil.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static const char *const golden_cases[] = { "b1_cony", "b2_conyfixed", "b1_gated", "b1_gated_ctx" };

/* Every float of a fused file is a learned parameter: the count covers the absent
 * tokens and the gate as well as the encoder. */
static void
check_parameter_count (const char *path, const ConyModel *m)
{
  GError *error = NULL;
  ConySafetensors *st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  gsize numel = 0;
  for (guint t = 0; t < cony_safetensors_n_tensors (st); t++)
    numel += cony_safetensors_tensor (st, t)->numel;
  cony_safetensors_close (st);
  g_assert_cmpuint (m->n_parameters, ==, numel);
}

/* Joins every step of @name's golden streams in C and steps the encoder on the result:
 * the fused tokens must equal PyTorch's bit for bit (a copy), the logits within 1e-4. */
static void
check_golden_case (const char *name)
{
  GError *error = NULL;
  g_autofree char *file = g_strconcat (name, ".safetensors", NULL);
  g_autofree char *path = cony_test_golden_path ("fusion", file);
  g_autoptr (ConyFusion) f = cony_fusion_load (path, &error);
  g_assert_no_error (error);
  g_autoptr (ConyModel) m = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (f->d_out, ==, m->config.d_in);
  check_parameter_count (path, m);
  g_autoptr (ConyEncoder) enc = cony_encoder_new (m, -1, &error);
  g_assert_no_error (error);

  g_autofree char *pname = g_strconcat (name, ".present.npy", NULL);
  g_autofree char *fname = g_strconcat (name, ".fused.npy", NULL);
  g_autofree char *lname = g_strconcat (name, ".logits.npy", NULL);
  g_autoptr (ConyNpyArray) present = cony_test_load_golden_npy ("fusion", pname);
  g_autoptr (ConyNpyArray) fused = cony_test_load_golden_npy ("fusion", fname);
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("fusion", lname);
  ConyNpyArray *inputs[CONY_FUSION_MAX_INPUTS];
  for (int i = 0; i < f->n_inputs; i++) {
    g_autofree char *iname = g_strdup_printf ("%s.%s.npy", name, f->inputs[i].name);
    inputs[i] = cony_test_load_golden_npy ("fusion", iname);
    g_assert_cmpint ((int) inputs[i]->shape[1], ==, f->inputs[i].size);
  }
  int L = (int) want->shape[0], C = m->config.n_classes, absent = 0;
  float *token = g_new (float, f->d_out), *logits = g_new (float, C);
  double worst = 0;
  for (int t = 0; t < L; t++) {
    const float *tokens[CONY_FUSION_MAX_INPUTS];
    for (int i = 0; i < f->n_inputs; i++) {
      gboolean here = present->data[(gsize) t * f->n_inputs + i] != 0;
      tokens[i] = here ? inputs[i]->data + (gsize) t * f->inputs[i].size : NULL;
      absent += !here;
    }
    cony_fusion_join (f, tokens, token);
    g_assert_cmpmem (token, f->d_out * sizeof (float), fused->data + (gsize) t * f->d_out,
        f->d_out * sizeof (float));
    g_assert_true (cony_encoder_step (enc, token, logits));
    for (int c = 0; c < C; c++)
      worst = MAX (worst, fabs ((double) logits[c] - want->data[(gsize) t * C + c]));
  }
  g_test_message ("%s: %d inputs, %d steps (%d absent tokens): max |C - torch| = %.3g", name,
      f->n_inputs, L, absent, worst);
  g_assert_cmpint (absent, >, L / 4);
  g_assert_cmpfloat (worst, <=, 1e-4);
  for (int i = 0; i < f->n_inputs; i++)
    cony_npy_array_free (inputs[i]);
  g_free (token);
  g_free (logits);
}

static void
test_golden (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (golden_cases); i++)
    check_golden_case (golden_cases[i]);
}

static void
test_config (void)
{
  GError *error = NULL;
  g_autofree char *path = cony_test_golden_path ("fusion", "b1_cony.safetensors");
  g_autoptr (ConyFusion) f = cony_fusion_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (f->rate_n, ==, 4);
  g_assert_cmpint (f->rate_d, ==, 1);
  g_assert_cmpint (f->n_inputs, ==, 2);
  g_assert_cmpstr (f->inputs[0].name, ==, "audio");
  g_assert_cmpint (f->inputs[0].offset, ==, 0);
  g_assert_cmpint (f->inputs[1].offset, ==, 5);
  g_assert_cmpuint (f->inputs[1].tolerance_ns, ==, G_GUINT64_CONSTANT (300000000));
  g_assert_cmpint (f->inputs[1].rate_n, ==, 10);
  g_assert_cmpint (cony_fusion_input_index (f, "video"), ==, 1);
  g_assert_cmpint (cony_fusion_input_index (f, "depth"), ==, -1);
  g_autofree char *pipe = cony_test_golden_path ("fusion", "av_pipeline.safetensors");
  g_autoptr (ConyFusion) p = cony_fusion_load (pipe, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (p->inputs[0].cnn.name, ==, "yamnet.safetensors");
  g_assert_cmpstr (p->inputs[0].cnn.output, ==, "embedding");
  g_assert_null (p->inputs[1].cnn.output);

  /* an ordinary model is not a fused one */
  g_autofree char *plain = cony_test_golden_path ("model", "b1_regular.safetensors");
  g_assert_null (cony_fusion_load (plain, &error));
  cony_test_expect_error (&error, CONY_ERROR_MISSING, "b1_regular.safetensors",
      "no 'fusion' object");
}

/* The golden file @base's config with @from replaced by @to, loaded: both loaders must
 * refuse it with @code and a message containing @needle. */
static void
expect_config_refused_in (const char *base, const char *from, const char *to, int code,
    const char *needle)
{
  GError *error = NULL;
  g_autofree char *path = cony_test_golden_path ("fusion", base);
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  const char *cfg = cony_safetensors_metadata (st, "config");
  g_assert_nonnull (strstr (cfg, from));
  g_autoptr (GString) edited = g_string_new (cfg);
  g_string_replace (edited, from, to, 1);
  const char *meta[] = { "config", edited->str, NULL };
  g_autofree char *copy = cony_test_copy_safetensors (path, meta);
  g_assert_null (cony_fusion_load (copy, &error));
  g_test_message ("%s -> %s: %s", from, to, error->message);
  g_assert_nonnull (strstr (error->message, copy));
  cony_test_expect_error (&error, code, needle, NULL);
  g_assert_null (cony_model_load (copy, &error));
  cony_test_expect_error (&error, code, needle, NULL);
  g_unlink (copy);
}

static void
expect_config_refused (const char *from, const char *to, int code, const char *needle)
{
  expect_config_refused_in ("b1_cony.safetensors", from, to, code, needle);
}

static void
test_bad_config (void)
{
  expect_config_refused ("\"d_in\":11", "\"d_in\":12", CONY_ERROR_INVALID,
      "5 (audio) + 4 (video) + 2 flags = 11");
  expect_config_refused ("\"name\":\"video\"", "\"name\":\"audio\"", CONY_ERROR_INVALID,
      "used by an earlier input");
  expect_config_refused ("\"name\":\"video\"", "\"name\":\"Video!\"", CONY_ERROR_INVALID,
      "fusion.inputs[1].name is 'Video!'");
  expect_config_refused ("\"tolerance_ms\":300", "\"tolerence_ms\":300", CONY_ERROR_FORMAT,
      "unknown key 'tolerence_ms'");
  expect_config_refused ("\"tolerance_ms\":300", "\"tolerance_ms\":-1", CONY_ERROR_INVALID,
      "fusion.inputs[1].tolerance_ms = -1");
  expect_config_refused ("\"rate\":[10,1]", "\"rate\":[0,1]", CONY_ERROR_INVALID,
      "fusion.inputs[1].rate");
  expect_config_refused ("\"fusion\":{\"rate\":[4,1]", "\"fusion\":{\"rate\":\"4/1\"",
      CONY_ERROR_INVALID, "fusion.rate must be a rate");
  expect_config_refused ("\"size\":4", "\"size\":\"4\"", CONY_ERROR_FORMAT,
      "fusion.inputs[1].size must be an integer");
  expect_config_refused ("\"tolerance_ms\":300", "\"tolerance_ms\":300,\"cnn_output\":1",
      CONY_ERROR_FORMAT, "fusion.inputs[1].cnn_output must be a string");
  const char *gated = "b1_gated.safetensors", *gate = "\"gate\":{\"input\":\"video\"}";
  expect_config_refused_in (gated, gate, "\"gate\":{\"input\":\"depth\"}", CONY_ERROR_INVALID,
      "fusion.gate.input 'depth' is not one of fusion.inputs");
  expect_config_refused_in (gated, gate, "\"gate\":{\"inputs\":\"video\"}", CONY_ERROR_FORMAT,
      "fusion.gate has an unknown key 'inputs'");
  expect_config_refused_in (gated, gate, "\"gate\":{\"input\":\"video\",\"context\":\"video\"}",
      CONY_ERROR_INVALID, "fusion.gate.context 'video' is not another of fusion.inputs");
  expect_config_refused_in (gated, gate, "\"gate\":[\"video\"]", CONY_ERROR_FORMAT,
      "fusion.gate must be an object");
  expect_config_refused_in (gated, "\"labels\":[\"talking\",\"music\",\"quiet\"]",
      "\"labels\":[\"talking\",\"music\",\"quiet\"],\"output\":\"sigmoid\"", CONY_ERROR_INVALID,
      "fusion.gate needs a softmax model");
}

/* Golden @base's tensors written again with tensor @drop left out and @extra (a 1-d
 * tensor of @extra_len floats) added: both loaders must refuse it with @code naming
 * @needle. */
static void
expect_tensors_refused_in (const char *base, const char *drop, const char *extra, gsize extra_len,
    int code, const char *needle)
{
  GError *error = NULL;
  g_autofree char *path = cony_test_golden_path ("fusion", base);
  g_autoptr (ConySafetensors) st = cony_safetensors_open (path, &error);
  g_assert_no_error (error);
  guint n = cony_safetensors_n_tensors (st), k = 0;
  const char **names = g_new0 (const char *, n + 1);
  const float **data = g_new0 (const float *, n + 1);
  int *ndims = g_new0 (int, n + 1);
  const gsize **shapes = g_new0 (const gsize *, n + 1);
  float *zeros = g_new0 (float, extra_len ? extra_len : 1);
  for (guint i = 0; i < n; i++) {
    const ConyTensorInfo *t = cony_safetensors_tensor (st, i);
    if (drop && strcmp (t->name, drop) == 0)
      continue;
    names[k] = t->name;
    data[k] = (const float *) t->data;
    ndims[k] = t->ndim;
    shapes[k++] = t->shape;
  }
  gsize extra_shape[1] = { extra_len };
  if (extra) {
    names[k] = extra;
    data[k] = zeros;
    ndims[k] = 1;
    shapes[k++] = extra_shape;
  }
  const char *meta[] = { "config", cony_safetensors_metadata (st, "config"), NULL };
  g_autofree char *copy = g_build_filename (g_get_tmp_dir (), "test_fusion_bad.safetensors", NULL);
  g_assert_true (cony_safetensors_write (copy, k, names, data, ndims, shapes, meta, &error));
  g_assert_null (cony_fusion_load (copy, &error));
  g_test_message ("%s: %s", drop ? drop : extra, error->message);
  cony_test_expect_error (&error, code, needle, copy);
  g_assert_null (cony_model_load (copy, &error));
  cony_test_expect_error (&error, code, needle, copy);
  g_unlink (copy);
  g_free (names);
  g_free (data);
  g_free (ndims);
  g_free (shapes);
  g_free (zeros);
}

static void
expect_tensors_refused (const char *drop, const char *extra, gsize extra_len, int code,
    const char *needle)
{
  expect_tensors_refused_in ("b1_cony.safetensors", drop, extra, extra_len, code, needle);
}

static void
test_bad_tensors (void)
{
  expect_tensors_refused ("fusion.video.absent", NULL, 0, CONY_ERROR_MISSING,
      "'fusion.video.absent' is missing");
  expect_tensors_refused ("fusion.video.absent", "fusion.video.absent", 5, CONY_ERROR_SHAPE,
      "fusion.video.absent");
  expect_tensors_refused (NULL, "fusion.depth.absent", 3, CONY_ERROR_FORMAT,
      "unexpected tensor 'fusion.depth.absent'");
  expect_tensors_refused (NULL, "fusion.audio.bias", 5, CONY_ERROR_FORMAT,
      "unexpected tensor 'fusion.audio.bias'");
  /* the gate's: each one missing or misshapen, one too many, one without a gate config */
  const char *gated = "b1_gated.safetensors";
  static const char *const gate_tensors[] = { "fusion.gate.readout.weight",
    "fusion.gate.readout.bias", "fusion.gate.weight", "fusion.gate.bias", "fusion.gate.scale" };
  for (guint i = 0; i < G_N_ELEMENTS (gate_tensors); i++) {
    g_autofree char *missing = g_strdup_printf ("'%s' is missing", gate_tensors[i]);
    expect_tensors_refused_in (gated, gate_tensors[i], NULL, 0, CONY_ERROR_MISSING, missing);
    expect_tensors_refused_in (gated, gate_tensors[i], gate_tensors[i], 7, CONY_ERROR_SHAPE,
        gate_tensors[i]);
  }
  expect_tensors_refused_in (gated, NULL, "fusion.gate.offset", 1, CONY_ERROR_FORMAT,
      "unexpected tensor 'fusion.gate.offset'");
  expect_tensors_refused_in ("b1_gated_ctx.safetensors", "fusion.gate.context.weight", NULL, 0,
      CONY_ERROR_MISSING, "'fusion.gate.context.weight' is missing");
  expect_tensors_refused_in ("b1_gated_ctx.safetensors", "fusion.gate.weight", "fusion.gate.weight",
      4, CONY_ERROR_SHAPE, "fusion.gate.weight");
  expect_tensors_refused_in (gated, NULL, "fusion.gate.context.bias", 1, CONY_ERROR_FORMAT,
      "unexpected tensor 'fusion.gate.context.bias'");
  expect_tensors_refused (NULL, "fusion.gate.scale", 1, CONY_ERROR_FORMAT,
      "unexpected tensor 'fusion.gate.scale' (a gate's tensors need a \"gate\" object");
}

/* Steps @m over @L fused tokens of b1_gated's audio tokens (all present) and video
 * tokens (present when @video) and returns the largest difference from @want's logits. */
static double
gated_against (ConyModel *m, gboolean video, const ConyNpyArray *want)
{
  GError *error = NULL;
  g_autoptr (ConyEncoder) enc = cony_encoder_new (m, -1, &error);
  g_assert_no_error (error);
  g_autoptr (ConyNpyArray) audio = cony_test_load_golden_npy ("fusion", "b1_gated.audio.npy");
  g_autoptr (ConyNpyArray) frames = cony_test_load_golden_npy ("fusion", "b1_gated.video.npy");
  const ConyFusion *f = m->fusion;
  int C = m->config.n_classes;
  float token[16], logits[8];
  g_assert_cmpint (f->d_out, <=, (int) G_N_ELEMENTS (token));
  double worst = 0;
  for (gsize t = 0; t < want->shape[0]; t++) {
    const float *tokens[2] = { audio->data + t * f->inputs[0].size,
      video ? frames->data + t * f->inputs[1].size : NULL };
    cony_fusion_join (f, tokens, token);
    g_assert_true (cony_encoder_step (enc, token, logits));
    for (int c = 0; c < C; c++)
      worst = MAX (worst, fabs ((double) logits[c] - want->data[t * C + c]));
  }
  return worst;
}

/* The gated model's encoder is the audio model's (video columns zero): with the gate
 * shut, or the camera absent, its logits are the audio model's; open, they are not. */
static void
test_gate_closed (void)
{
  GError *error = NULL;
  g_autofree char *path = cony_test_golden_path ("fusion", "b1_gated.safetensors");
  g_autoptr (ConyModel) m = cony_model_load (path, &error);
  g_assert_no_error (error);
  g_assert_nonnull (m->fusion);
  g_assert_nonnull (m->fusion->gate);
  g_autoptr (ConyNpyArray) want = cony_test_load_golden_npy ("fusion", "b1_gated_audio.logits.npy");
  double open = gated_against (m, TRUE, want);
  double absent = gated_against (m, FALSE, want);
  m->fusion->gate->bias = -1e4f; /* shut: g = sigmoid(-1e4 + w . phi) = 0 */
  double shut = gated_against (m, TRUE, want);
  g_test_message ("gated vs audio model: open %.3g, camera absent %.3g, shut %.3g", open, absent,
      shut);
  g_assert_cmpfloat (open, >, 0.1);
  g_assert_cmpfloat (absent, <=, 1e-4);
  g_assert_cmpfloat (shut, <=, 1e-4);
}

/* The join itself: tokens where present, absent tokens and zero flags where not. */
static void
test_join (void)
{
  GError *error = NULL;
  g_autofree char *path = cony_test_golden_path ("fusion", "b1_cony.safetensors");
  g_autoptr (ConyFusion) f = cony_fusion_load (path, &error);
  g_assert_no_error (error);
  float audio[5] = { 1, 2, 3, 4, 5 }, out[11];
  const float *tokens[2] = { audio, NULL };
  cony_fusion_join (f, tokens, out);
  g_assert_cmpmem (out, sizeof audio, audio, sizeof audio);
  g_assert_cmpmem (out + 5, 4 * sizeof (float), f->inputs[1].absent, 4 * sizeof (float));
  g_assert_cmpfloat (out[9], ==, 1.0f);
  g_assert_cmpfloat (out[10], ==, 0.0f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fusion/golden", test_golden);
  g_test_add_func ("/fusion/config", test_config);
  g_test_add_func ("/fusion/join", test_join);
  g_test_add_func ("/fusion/bad-config", test_bad_config);
  g_test_add_func ("/fusion/bad-tensors", test_bad_tensors);
  g_test_add_func ("/fusion/gate-closed", test_gate_closed);
  return g_test_run ();
}
