/* conymqttsink: every buffer as one MQTT message, live-safe.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#pragma once
#include <gst/base/gstbasesink.h>
#include <gst/gst.h>

#include "gstconyelements.h"

G_BEGIN_DECLS

#define GST_TYPE_CONY_MQTT_SINK (gst_cony_mqtt_sink_get_type ())
G_DECLARE_FINAL_TYPE (GstConyMqttSink, gst_cony_mqtt_sink, GST, CONY_MQTT_SINK, GstBaseSink)

struct mosquitto;

struct _GstConyMqttSink {
  GstBaseSink parent;

  /* Properties (object lock); the connection ones are read on start. */
  gchar *host;
  gint port;
  gchar *topic;
  gint qos;
  gchar *client_id;
  guint keepalive;
  gboolean retain;
  guint max_queued;
  guint drain_timeout; /* ms */
  gchar *username;
  gchar *password; /* write-only */
  gchar *password_file;
  gboolean tls;
  gchar *tls_ca_file;
  gchar *tls_cert_file;
  gchar *tls_key_file;
  gboolean tls_insecure;
  gboolean ha_discovery;
  gchar *ha_prefix;
  gchar *ha_node_id;
  gchar *ha_labels;
  gchar *ha_groups_file;

  /* The publisher's state, shared by the streaming thread (render: appends),
   * the sender thread (publishes) and mosquitto's network thread (callbacks). */
  GMutex lock;
  GCond cond;
  GQueue queue;            /* GstConyMqttMessage*, oldest first */
  guint inflight;          /* published, not acknowledged yet */
  guint publishing;        /* inside mosquitto_publish() right now */
  GHashTable *acked_early; /* mids acknowledged before mosquitto_publish() returned */
  guint generation;        /* +1 on every connect and disconnect */
  gboolean connected;
  gboolean stopping;
  gboolean flushing;
  gboolean dropping; /* the queue is full: one warning per run of drops */
  guint64 published, dropped, connects;
  gchar *bare_topic; /* the topic as read on start */
  gchar *run_host;
  gchar *run_username;
  gboolean run_tls;
  gint run_port;
  guint run_keepalive;
  gboolean need_connect; /* the first attempt failed: the sender thread retries */
  gboolean loop_ended;   /* libmosquitto's network thread ended: joined before a retry */
  gint run_qos;
  gboolean run_retain;
  gboolean strip_newline; /* application/x-json: the trailing newline is not sent */
  gboolean failed;        /* a fatal error was posted: no more attempts, EOS does not wait */
  gboolean failing;       /* attempts fail before CONNACK: one warning per run of failures */
  gboolean starting;      /* start() waits for the first CONNACK: it posts a fatal error */
  GstResourceError fatal_code;
  gchar *fatal_text, *fatal_debug;

  struct _GstConyMqttHa *ha; /* Home Assistant discovery (ha-discovery), under lock */
  gboolean ha_warned;        /* one warning for input that is not conyjson records */

  struct mosquitto *mosq;
  GThread *sender;
};

G_END_DECLS
