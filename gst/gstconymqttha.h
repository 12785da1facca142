/* conymqttsink's Home Assistant MQTT discovery: the configs, availability and
 * states it publishes, derived from conyjson records. No MQTT here (the sink
 * publishes), no GStreamer: GLib and json-glib.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct _GstConyMqttHa GstConyMqttHa;

/* One message to publish, retained. */
typedef struct {
  gchar *topic;
  gchar *payload;
} GstConyMqttHaMessage;

void gst_cony_mqtt_ha_message_free (gpointer message);

/* The names of a groups file (conytransformer's groups-file, read by libcony's
 * parser without a model: cony/labelgroups.h), in file order. NULL with @error
 * naming the file and line when it cannot be read or a line is not a group. */
GStrv gst_cony_mqtt_ha_read_groups (const gchar *path, GError **error);

/* Discovery for node @node_id (letters, digits, '_', '-') under @prefix
 * (Home Assistant's discovery prefix): a sensor for the current label and a
 * binary sensor per label of the comma-separated @labels and the names of
 * @groups_file (either NULL). NULL with @error naming what is wrong. */
GstConyMqttHa *gst_cony_mqtt_ha_new (const gchar *prefix, const gchar *node_id, const gchar *labels,
    const gchar *groups_file, GError **error);
void gst_cony_mqtt_ha_free (GstConyMqttHa *ha);

/* cony/NODE/availability: "online" (published after the configs on every
 * connection), "offline" (the last will, and on a clean stop). */
const gchar *gst_cony_mqtt_ha_availability_topic (GstConyMqttHa *ha);
#define GST_CONY_MQTT_HA_ONLINE "online"
#define GST_CONY_MQTT_HA_OFFLINE "offline"

/* A new connection: the configs, "online" and every state are due again. */
void gst_cony_mqtt_ha_reset (GstConyMqttHa *ha);

/* Applies one conyjson record (@data, @len bytes): the current label of a
 * result, the segments its events open and close; an eos record closes
 * everything. FALSE with @error when it is not a JSON record. */
gboolean gst_cony_mqtt_ha_update (GstConyMqttHa *ha, const gchar *data, gsize len, GError **error);

/* What is due, in order (configs, availability, changed states), as
 * GstConyMqttHaMessage; NULL when nothing. Marks it published. */
GPtrArray *gst_cony_mqtt_ha_take_due (GstConyMqttHa *ha);

G_END_DECLS
