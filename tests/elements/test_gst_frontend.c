/* Front-end negotiation between conymel and conyvggish (GstHarness): conymel
 * writes its log-mel settings into its caps (mel-* fields), conyvggish compares
 * them with the front end its model declares (metadata "frontend"; VGGish's when
 * absent) and refuses the caps with an error naming the differing setting.
 *
 * Models: the reduced VGGish of tests/golden/cnn/small.safetensors (no
 * frontend) and copies of it that declare YAMNet's front end, VGGish's in the
 * older underscore keys, or hold broken JSON. */
#include "cony/safetensors.h"

#include <glib/gstdio.h>
#include <gst/gst.h>
#include <gst/check/gstharness.h>
#include <unistd.h>

#include "gsttestutil.h"
#include "testutil.h"
#include <math.h>
#include <string.h>

#define RATE 16000
#define TOKENS "other/tensors,format=static,num_tensors=1,types=float32,framerate=100/1"
#define VGGISH_FIELDS \
  "mel-sample-rate=16000,mel-window-length=400,mel-hop-length=160," \
  "mel-fft-length=512,mel-fmin=125.0,mel-fmax=7500.0"
#define AUDIO_CAPS "audio/x-raw,format=F32LE,rate=16000,channels=1,layout=interleaved"
#define LEGACY_FRONTEND \
  "{\"kind\":\"audio-logmel-vggish\",\"sample_rate\":16000," \
  "\"window_samples\":400,\"hop_samples\":160,\"fft\":512,\"n_mels\":64,\"fmin\":125.0," \
  "\"fmax\":7500.0,\"log_offset\":0.01,\"patch_frames\":96,\"stride_frames\":25}"
#define YAMNET_FRONTEND \
  "{\"name\": \"yamnet\", \"sample-rate\": 16000, \"window-length\": 400, " \
  "\"hop-length\": 160, \"fft-length\": 512, \"n-mels\": 64, \"fmin\": 125.0, " \
  "\"fmax\": 7500.0, \"log-offset\": 0.001}"

/* A copy of the small golden model in a temporary file, with metadata
 * frontend=@frontend. Returns its path (g_free; the caller unlinks it). */
static char *
small_model_with_frontend (const char *frontend)
{
  char *src = cony_test_golden_path ("cnn", "small.safetensors");
  const char *meta[] = { "architecture", "vggish", "final_relu", "false", "frontend", frontend,
    NULL };
  char *path = cony_test_copy_safetensors (src, meta);
  g_free (src);
  return path;
}

static GstHarness *
vggish_harness (const char *model)
{
  return cony_test_harness_new ("conyvggish", model, NULL);
}

/* Caps accepted: the element's sink pad holds them. */
static void
assert_caps_accepted (GstHarness *h, const char *caps)
{
  gst_harness_set_src_caps_str (h, caps);
  GstPad *sink = gst_element_get_static_pad (h->element, "sink");
  g_assert_true (gst_pad_has_current_caps (sink));
  gst_object_unref (sink);
  gst_harness_teardown (h);
}

/* A model without "frontend" is VGGish's: conymel's defaults pass, YAMNet's
 * log offset is refused naming the setting, both values and the fix; so is a
 * different fmax; tokens without mel-* fields (not from conymel) pass. */
static void
test_no_frontend_is_vggish (void)
{
  char *small = cony_test_golden_path ("cnn", "small.safetensors");
  assert_caps_accepted (vggish_harness (small),
      TOKENS ",dimensions=(string)64:1," VGGISH_FIELDS ",mel-n-mels=64,mel-log-offset=0.01");
  assert_caps_accepted (vggish_harness (small), TOKENS ",dimensions=(string)64:1");

  const char *offset[] = { "log-offset", "mel-log-offset=0.001", "log-offset=0.01", "preset=vggish",
    NULL };
  cony_test_assert_caps_refused (vggish_harness (small),
      TOKENS ",dimensions=(string)64:1," VGGISH_FIELDS ",mel-n-mels=64,mel-log-offset=0.001",
      offset);
  const char *fmax[] = { "fmax", "mel-fmax=8000", "fmax=7500", NULL };
  cony_test_assert_caps_refused (vggish_harness (small),
      TOKENS ",dimensions=(string)64:1,mel-fmax=8000.0", fmax);
  const char *mels[] = { "n-mels", "mel-n-mels=40", "n-mels=64", NULL };
  cony_test_assert_caps_refused (vggish_harness (small),
      TOKENS ",dimensions=(string)40:1,mel-n-mels=40", mels);
  g_free (small);
}

/* conymel ! conyvggish in one harness; the bin's messages go to @bus. */
static GstHarness *
chain_harness (const char *mel_props, const char *model, GstBus *bus)
{
  char *desc = g_strdup_printf ("conymel %s ! conyvggish model=\"%s\"", mel_props, model);
  GstHarness *h = gst_harness_new_parse (desc);
  g_free (desc);
  gst_element_set_bus (h->element, bus);
  gst_harness_set_src_caps_str (h, AUDIO_CAPS);
  return h;
}

/* Pushes 1.2 s of a tone: a matching front end gives one window's output
 * (GST_FLOW_OK), a mismatch fails negotiation with an error naming @needles. */
static void
run_chain (const char *mel_props, const char *model, const char *const *needles)
{
  GstBus *bus = gst_bus_new ();
  GstHarness *h = chain_harness (mel_props, model, bus);
  gsize n = RATE * 12 / 10;
  float *x = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    x[i] = (float) (0.3 * sin (2 * G_PI * 440.0 * i / RATE));
  GstBuffer *buf = gst_buffer_new_memdup (x, n * sizeof (float));
  GST_BUFFER_PTS (buf) = 0;
  GstFlowReturn fr = gst_harness_push (h, buf);
  if (needles == NULL) {
    g_assert_cmpint (fr, ==, GST_FLOW_OK);
    GstBuffer *out = gst_harness_try_pull (h);
    g_assert_nonnull (out);
    gst_buffer_unref (out);
    g_assert_null (gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR));
  } else {
    g_assert_cmpint (fr, ==, GST_FLOW_NOT_NEGOTIATED);
    g_assert_null (gst_harness_try_pull (h));
    cony_test_pop_negotiation_error (bus, needles);
  }
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  g_free (x);
}

/* One run of the chain: conymel's properties and what the error must name (none: the
 * chain runs). */
typedef struct {
  const char *mel_props;
  const char *needles[5];
} ChainCase;

/* run_chain() of each case with the small model declaring @frontend. */
static void
run_chains (const char *frontend, const ChainCase *cases, guint n_cases)
{
  char *model = small_model_with_frontend (frontend);
  for (guint i = 0; i < n_cases; i++)
    run_chain (cases[i].mel_props, model, cases[i].needles[0] ? cases[i].needles : NULL);
  g_unlink (model);
  g_free (model);
}

/* A model declaring YAMNet's front end runs after conymel preset=yamnet (or
 * log-offset=0.001) and refuses conymel's VGGish default. */
static void
test_declared_yamnet (void)
{
  const ChainCase cases[] = {
    { "preset=yamnet", { NULL } },
    { "log-offset=0.001", { NULL } },
    { "", { "log-offset", "mel-log-offset=0.01", "log-offset=0.001", "preset=yamnet", NULL } },
    { "preset=yamnet hop-length=100",
        { "hop-length", "mel-hop-length=100", "hop-length=160", NULL } },
  };
  run_chains (YAMNET_FRONTEND, cases, G_N_ELEMENTS (cases));
}

/* A front end in the older underscore keys (log_offset 0.01, as
 * training/train_default_audio.py writes it): conymel's default passes, preset=yamnet
 * is refused. */
static void
test_legacy_keys (void)
{
  const ChainCase cases[] = {
    { "", { NULL } },
    { "preset=yamnet", { "log-offset", "mel-log-offset=0.001", "log-offset=0.01", NULL } },
  };
  run_chains (LEGACY_FRONTEND, cases, G_N_ELEMENTS (cases));
}

/* A frontend that is not a JSON object is an error, not a silent VGGish. */
static void
test_bad_frontend_json (void)
{
  const char *bad[] = { "{\"log-offset\": 0.0", "[1, 2]" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    char *model = small_model_with_frontend (bad[i]);
    const char *needles[] = { model, NULL };
    cony_test_assert_caps_refused (vggish_harness (model),
        TOKENS ",dimensions=(string)64:1,mel-log-offset=0.01", needles);
    g_unlink (model);
    g_free (model);
  }
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/frontend/no-frontend-is-vggish", test_no_frontend_is_vggish);
  g_test_add_func ("/frontend/declared-yamnet", test_declared_yamnet);
  g_test_add_func ("/frontend/legacy-keys", test_legacy_keys);
  g_test_add_func ("/frontend/bad-json", test_bad_frontend_json);
  return g_test_run ();
}
