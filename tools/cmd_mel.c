/* cony mel: log-mel frames of a WAV file (VGGish front end), as a .npy. */
#include "commands.h"

#include "cony/mel.h"
#include "cony/npy.h"
#include "cony/wav.h"

#include <stdio.h>

int
cony_cmd_mel (int argc, char **argv)
{
  char *output = NULL;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "output .npy: float32 (frames, 64)",
        "OUT.npy" },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new (
      "IN.wav - VGGish log-mel frames (16 kHz, 25 ms window, 10 ms hop, 64 bands)");
  g_option_context_set_description (ctx,
      "The WAV is downmixed to mono (mean of the channels) and resampled to 16 kHz with\n"
      "libswresample when needed. Frame t covers samples [160t, 160t+400) of the 16 kHz\n"
      "signal; N samples give 1 + (N - 400) / 160 frames.\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return cony_cmd_fail (error);
  g_autofree char *out_path = output;
  if (argc != 2 || output == NULL) {
    fprintf (stderr, "usage: cony mel IN.wav -o OUT.npy\n");
    return 2;
  }

  ConyMelConfig config;
  cony_mel_config_init_vggish (&config);
  gsize n = 0;
  g_autofree float *x = cony_wav_load_mono (argv[1], config.sample_rate, &n, &error);
  if (x == NULL)
    return cony_cmd_fail (error);
  g_autoptr (ConyMel) mel = cony_mel_new (&config, &error);
  if (mel == NULL)
    return cony_cmd_fail (error);
  gsize frames = 0;
  g_autofree float *y = cony_mel_compute (mel, x, n, &frames);
  if (frames == 0)
    fprintf (stderr,
        "cony mel: %s: %" G_GSIZE_FORMAT " samples at 16 kHz is shorter than one "
        "400-sample window; writing 0 frames\n",
        argv[1], n);
  gsize shape[2] = { frames, config.n_mels };
  float dummy = 0;
  if (!cony_npy_save (out_path, y ? y : &dummy, 2, shape, &error))
    return cony_cmd_fail (error);
  return 0;
}
