/* Every element of the cony plugin, registered by plugin.c. */
#pragma once
#include <gst/gst.h>

G_BEGIN_DECLS

GST_ELEMENT_REGISTER_DECLARE (conymel);
GST_ELEMENT_REGISTER_DECLARE (conyvggish);
GST_ELEMENT_REGISTER_DECLARE (conytransformer);
GST_ELEMENT_REGISTER_DECLARE (conyframeembed);
GST_ELEMENT_REGISTER_DECLARE (conyjson);
GST_ELEMENT_REGISTER_DECLARE (conyfuse);
GST_ELEMENT_REGISTER_DECLARE (conymqttsink);

G_END_DECLS
