/* gst-cony: the "cony" GStreamer plugin.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * plugin-cony:
 *
 * Audio and video classification with continual (Nyström) transformers:
 * log-mel front end (`conymel`), VGG-style embeddings (`conyvggish`) and the
 * classifier elements, all exchanging NNStreamer-compatible token streams
 * (`other/tensors`, see gstconytokens.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconyelements.h"

static gboolean
plugin_init (GstPlugin *plugin)
{
  gboolean ret = FALSE;

  ret |= GST_ELEMENT_REGISTER (conymel, plugin);
  ret |= GST_ELEMENT_REGISTER (conyvggish, plugin);
  ret |= GST_ELEMENT_REGISTER (conytransformer, plugin);
  ret |= GST_ELEMENT_REGISTER (conyframeembed, plugin);
  ret |= GST_ELEMENT_REGISTER (conyjson, plugin);
  ret |= GST_ELEMENT_REGISTER (conyfuse, plugin);
#ifdef HAVE_MOSQUITTO
  ret |= GST_ELEMENT_REGISTER (conymqttsink, plugin);
#endif

  return ret;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, cony,
    "Continual (Nystrom) transformer classification of audio and video", plugin_init, VERSION,
    "LGPL", GST_PACKAGE_NAME, GST_PACKAGE_ORIGIN)
