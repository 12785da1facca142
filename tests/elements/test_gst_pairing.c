/* A classifier and the CNN it was trained on (GstHarness): conyvggish names its CNN in
 * the token caps (cnn, cnn-sha256 of the file's bytes, cnn-output), and conytransformer
 * with a model that records its CNN (frontend.cnn, cnn_sha256, cnn_output) refuses
 * tokens from another CNN file, another of its outputs or another mode (cnn-mode:
 * window or continual) with an error naming both;
 * caps without those fields, or a model that records nothing, still pass.
 *
 * Models: the reduced VGGish of tests/golden/cnn/small.safetensors (128-d output) and
 * copies of tests/golden/transformer/small.safetensors (d_in 128) whose config records
 * a CNN. */
#include "cony/safetensors.h"

#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gst/check/gstharness.h>
#include <json-glib/json-glib.h>

#include "gsttestutil.h"
#include "testutil.h"

#define TOKENS \
  "other/tensors,format=static,num_tensors=1,types=float32,framerate=4/1," \
  "dimensions=(string)128:1"
#define MEL_TOKENS \
  "other/tensors,format=static,num_tensors=1,types=float32," \
  "framerate=100/1,dimensions=(string)64:1"

static char *
file_sha256 (const char *path)
{
  gchar *bytes = NULL;
  gsize n = 0;
  g_assert_true (g_file_get_contents (path, &bytes, &n, NULL));
  char *sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) bytes, n);
  g_free (bytes);
  return sha;
}

/* A copy of the golden small transformer whose config's frontend records the CNN
 * small.safetensors with @sha256, @output and @mode (NULL: not recorded) (the path:
 * g_free, unlink). */
static char *
transformer_trained_on_mode (const char *sha256, const char *output, const char *mode)
{
  char *src = cony_test_golden_path ("transformer", "small.safetensors");
  GError *error = NULL;
  ConySafetensors *st = cony_safetensors_open (src, &error);
  g_assert_no_error (error);
  JsonParser *parser = json_parser_new ();
  g_assert_true (
      json_parser_load_from_data (parser, cony_safetensors_metadata (st, "config"), -1, NULL));
  JsonObject *config = json_node_get_object (json_parser_get_root (parser));
  JsonObject *fe = json_object_new ();
  json_object_set_string_member (fe, "cnn", "small.safetensors");
  json_object_set_string_member (fe, "cnn_sha256", sha256);
  json_object_set_string_member (fe, "cnn_output", output);
  if (mode != NULL)
    json_object_set_string_member (fe, "cnn_mode", mode);
  json_object_set_object_member (config, "frontend", fe);
  char *text = json_to_string (json_parser_get_root (parser), FALSE);
  cony_safetensors_close (st);
  const char *meta[] = { "config", text, NULL };
  char *path = cony_test_copy_safetensors (src, meta);
  g_free (text);
  g_object_unref (parser);
  g_free (src);
  return path;
}

static char *
transformer_trained_on (const char *sha256, const char *output)
{
  return transformer_trained_on_mode (sha256, output, NULL);
}

/* conyvggish's token caps name its CNN file, its SHA-256 and the output. */
static void
test_vggish_caps_name_the_cnn (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *sha = file_sha256 (cnn);
  GstHarness *h = cony_test_harness_new ("conyvggish", cnn, NULL);
  gst_harness_set_src_caps_str (h, MEL_TOKENS);
  GstCaps *caps = gst_pad_get_current_caps (h->sinkpad);
  g_assert_nonnull (caps);
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  g_assert_cmpstr (gst_structure_get_string (s, "cnn"), ==, "small.safetensors");
  g_assert_cmpstr (gst_structure_get_string (s, "cnn-sha256"), ==, sha);
  g_assert_cmpstr (gst_structure_get_string (s, "cnn-output"), ==, "scores");
  gst_caps_unref (caps);
  gst_harness_teardown (h);
  g_free (sha);
  g_free (cnn);
}

/* Tokens whose caps carry @fields reach the model and give a result. */
static void
assert_accepted (const char *model, const char *fields)
{
  GstHarness *h = cony_test_harness_new ("conytransformer", model, NULL);
  char *caps = g_strconcat (TOKENS, fields, NULL);
  gst_harness_set_src_caps_str (h, caps);
  float x[128] = { 0 };
  cony_test_push_tokens (h, x, 128, 0, 1, 1, 0, GST_SECOND / 4, TRUE);
  GstBuffer *out = gst_harness_try_pull (h);
  g_assert_nonnull (out);
  gst_buffer_unref (out);
  gst_harness_teardown (h);
  g_free (caps);
}

static void
test_pairing (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *sha = file_sha256 (cnn);
  char *model = transformer_trained_on (sha, "scores");
  char *same = g_strdup_printf (",cnn=small.safetensors,cnn-sha256=%s,cnn-output=scores", sha);
  assert_accepted (model, same);
  assert_accepted (model, ""); /* tokens that do not say where they come from */

  /* another CNN file (by content), whatever its name */
  const char *other = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  char *caps = g_strdup_printf (TOKENS ",cnn=small.safetensors,cnn-sha256=%s,cnn-output=scores",
      other);
  char *want = g_strndup (sha, 16);
  const char *needles[] = { "the tokens come from", "0011223344556677", want, model,
    "give the CNN element model=small.safetensors output=scores", NULL };
  cony_test_assert_caps_refused (cony_test_harness_new ("conytransformer", model, NULL), caps,
      needles);
  g_free (caps);

  /* the right file, but its pooled embedding where the model took its last layer */
  caps = g_strdup_printf (TOKENS ",cnn=small.safetensors,cnn-sha256=%s,cnn-output=embedding", sha);
  const char *output_needles[] = { "output=embedding", "output=scores",
    "set output=scores on the CNN element", NULL };
  cony_test_assert_caps_refused (cony_test_harness_new ("conytransformer", model, NULL), caps,
      output_needles);
  g_free (caps);

  g_unlink (model);
  g_free (model);
  g_free (want);
  g_free (same);
  g_free (sha);
  g_free (cnn);
}

/* The mode the CNN ran in (conyvggish mode, issue 61): a model recording its CNN but no
 * cnn_mode was trained on window tokens and refuses continual ones, naming both modes;
 * one recording cnn_mode=continual takes continual tokens and refuses window ones. The
 * whole chain too: conyvggish mode=continual ! conytransformer of a window model fails
 * negotiation. */
static void
test_mode_pairing (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *sha = file_sha256 (cnn);
  char *window = transformer_trained_on (sha, "scores");
  char *continual = transformer_trained_on_mode (sha, "scores", "continual");
  char *fields =
      g_strdup_printf (",cnn=small.safetensors,cnn-sha256=%s,cnn-output=scores,cnn-mode=", sha);
  char *as_window = g_strconcat (fields, "window", NULL);
  char *as_continual = g_strconcat (fields, "continual", NULL);
  assert_accepted (window, as_window);
  assert_accepted (continual, as_continual);
  assert_accepted (continual, ""); /* tokens that do not say */

  char *caps = g_strconcat (TOKENS, as_continual, NULL);
  const char *needles[] = { "mode=continual", "mode=window", window, NULL };
  cony_test_assert_caps_refused (cony_test_harness_new ("conytransformer", window, NULL), caps,
      needles);
  g_free (caps);
  caps = g_strconcat (TOKENS, as_window, NULL);
  const char *back[] = { "mode=window", "mode=continual", continual, NULL };
  cony_test_assert_caps_refused (cony_test_harness_new ("conytransformer", continual, NULL), caps,
      back);
  g_free (caps);

  /* VGGish-style small: time stride 16, so stride=32 runs continually. */
  char *desc =
      g_strdup_printf ("conyvggish model=\"%s\" mode=continual stride=32 ! conytransformer model=\"%s\"",
          cnn, window);
  GstHarness *h = gst_harness_new_parse (desc);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, MEL_TOKENS);
  const char *chain_needles[] = { "mode=continual", "mode=window", NULL };
  cony_test_pop_negotiation_error (bus, chain_needles);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);

  g_unlink (window);
  g_unlink (continual);
  g_free (desc);
  g_free (window);
  g_free (continual);
  g_free (fields);
  g_free (as_window);
  g_free (as_continual);
  g_free (sha);
  g_free (cnn);
}

/* A model that records no CNN takes tokens from any (the models before issue 26). */
static void
test_unrecorded_model (void)
{
  char *model = cony_test_golden_path ("transformer", "small.safetensors");
  assert_accepted (model, ",cnn=x.safetensors,cnn-sha256=00ff,cnn-output=embedding");
  g_free (model);
}

/* The whole chain: conyvggish ! conytransformer with a model trained on another CNN
 * fails negotiation with the pairing error. */
static void
test_chain_refused (void)
{
  char *cnn = cony_test_golden_path ("cnn", "small.safetensors");
  char *model =
      transformer_trained_on ("ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
          "scores");
  char *desc = g_strdup_printf ("conyvggish model=\"%s\" ! conytransformer model=\"%s\"", cnn,
      model);
  GstHarness *h = gst_harness_new_parse (desc);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, MEL_TOKENS); /* conyvggish's token caps follow */
  const char *needles[] = { "the tokens come from small.safetensors", "ffeeddccbbaa9988", NULL };
  cony_test_pop_negotiation_error (bus, needles);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_unlink (model);
  g_free (desc);
  g_free (model);
  g_free (cnn);
}

/* The camera chain: conyframeembed with the shipped ImageNet MobileNet-v2 ! conytransformer
 * with a classifier trained on another CNN's tokens fails negotiation naming both CNNs;
 * output=embedding tokens of the right CNN are refused by a classifier trained on its
 * scores. */
static void
test_video_chain_refused (void)
{
  char *cnn = cony_test_model_path ("imagenet", "mobilenet_v2.safetensors");
  char *other = cony_test_golden_path ("cnn", "small.safetensors");
  char *other_sha = file_sha256 (other);
  char *sha = file_sha256 (cnn);
  struct {
    char *model;
    const char *output;
    const char *needles[4];
  } cases[] = {
    { transformer_trained_on (other_sha, "scores"), "scores",
        { "the tokens come from mobilenet_v2.safetensors", "small.safetensors", NULL } },
    { transformer_trained_on (sha, "scores"), "embedding",
        { "mobilenet_v2.safetensors", "output=embedding", "set output=scores", NULL } },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    char *desc =
        g_strdup_printf ("conyframeembed model=\"%s\" output=%s ! conytransformer model=\"%s\"",
            cnn, cases[i].output, cases[i].model);
    GstHarness *h = gst_harness_new_parse (desc);
    GstBus *bus = cony_test_attach_bus (h);
    gst_harness_set_src_caps_str (h, "video/x-raw,format=RGB,width=320,height=240,framerate=10/1");
    cony_test_pop_negotiation_error (bus, cases[i].needles);
    cony_test_detach_bus (h, bus);
    gst_harness_teardown (h);
    g_unlink (cases[i].model);
    g_free (cases[i].model);
    g_free (desc);
  }
  g_free (sha);
  g_free (other_sha);
  g_free (other);
  g_free (cnn);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/pairing/vggish-caps-name-the-cnn", test_vggish_caps_name_the_cnn);
  g_test_add_func ("/pairing/transformer-checks-the-cnn", test_pairing);
  g_test_add_func ("/pairing/unrecorded-model", test_unrecorded_model);
  g_test_add_func ("/pairing/mode", test_mode_pairing);
  g_test_add_func ("/pairing/chain-refused", test_chain_refused);
  g_test_add_func ("/pairing/video-chain-refused", test_video_chain_refused);
  return g_test_run ();
}
