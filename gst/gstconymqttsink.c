/* conymqttsink: every buffer as one MQTT message, live-safe.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
/**
 * SECTION:element-conymqttsink
 * @title: conymqttsink
 * @short_description: publishes each buffer (a conyjson record) to an MQTT broker
 *
 * conymqttsink publishes every buffer it receives as one MQTT message on
 * #GstConyMqttSink:topic, through libmosquitto. Put it after conyjson to send
 * every result record (docs/results.schema.json) to a broker, as DL
 * Streamer's `gvametapublish method=mqtt` or NNStreamer's `mqttsink` do. With
 * `application/x-json` input the trailing newline of each line is not sent.
 * Other buffers that carry classification metas (conymqttsink straight after
 * conytransformer) are published as one `result` record per meta, written by
 * conyjson's formatter (the same fields; no `stream` or `eos` records, no
 * `source`, no `scores`); other buffers as they are.
 *
 * It never blocks the streaming thread: a buffer is copied into a bounded
 * queue (#GstConyMqttSink:max-queued) and a sender thread of the element
 * publishes from it while libmosquitto's network thread keeps the
 * connection. A message leaves the queue when the broker has acknowledged it
 * (QoS 1 and 2) or once it is written to the socket (QoS 0). While the broker
 * is away (not running yet, restarted, unreachable) messages wait in the
 * queue, and the connection is retried every 1 to 4 s; after the
 * reconnection they are sent again in order, so a subscriber may see a
 * message twice (at least once; conyjson records carry `step`). When the
 * queue is full, new buffers are discarded and counted in
 * #GstConyMqttSink:dropped, with one warning per run of drops.
 *
 * Connection changes are posted as element messages named `conymqttsink`
 * with `connected` (boolean), `queued` (guint), `published` and `dropped`
 * (guint64); a first failed connection and a lost one as warnings. At EOS the
 * element waits up to #GstConyMqttSink:drain-timeout for the queue to empty
 * and posts a warning naming what was not delivered. An unknown host, a
 * broker that refuses the client (CONNACK, named) and a failed TLS handshake
 * are errors.
 *
 * #GstConyMqttSink:username with #GstConyMqttSink:password or
 * #GstConyMqttSink:password-file log in; #GstConyMqttSink:tls-ca-file (or
 * #GstConyMqttSink:tls with the system's CAs) connects with TLS, verifying
 * the broker's certificate and host name, and #GstConyMqttSink:tls-cert-file
 * with #GstConyMqttSink:tls-key-file present a client certificate.
 *
 * With #GstConyMqttSink:ha-discovery it also publishes Home Assistant's
 * MQTT discovery configs (retained): a sensor for the current label and a
 * binary sensor per #GstConyMqttSink:ha-labels or
 * #GstConyMqttSink:ha-groups-file label, ON while it is the top label or its
 * segment is open, with availability online/offline through the last will
 * (docs/elements.md, "conymqttsink").
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 -e ... ! conytransformer model=models/audio/transformer.safetensors ! conyjson source=mic ! conymqttsink host=127.0.0.1 topic=cony/results qos=1
 * mosquitto_sub -h 127.0.0.1 -t cony/results -q 1
 * ]| publishes one JSON record per step; mosquitto_sub prints them.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstconymqttsink.h"
#include "gstconymqttha.h"
#include "gstconyresult.h"

#include <errno.h>
#include <mosquitto.h>
#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_cony_mqtt_sink_debug);
#define GST_CAT_DEFAULT gst_cony_mqtt_sink_debug

#define DEFAULT_HOST "localhost"
#define DEFAULT_PORT 1883
#define DEFAULT_TOPIC "cony/results"
#define DEFAULT_QOS 1
#define DEFAULT_CLIENT_ID NULL
#define DEFAULT_KEEPALIVE 10
#define DEFAULT_RETAIN FALSE
#define DEFAULT_MAX_QUEUED 100000
#define DEFAULT_DRAIN_TIMEOUT 10000
#define DEFAULT_HA_PREFIX "homeassistant"
#define DEFAULT_HA_NODE_ID "cony"
/* How long start() waits for the broker's first answer (µs). */
#define START_WAIT (2 * G_USEC_PER_SEC)
/* Messages on the wire at once (libmosquitto's own default inflight limit). */
#define MAX_INFLIGHT 20

enum
{
  PROP_0,
  PROP_HOST,
  PROP_PORT,
  PROP_TOPIC,
  PROP_QOS,
  PROP_CLIENT_ID,
  PROP_KEEPALIVE,
  PROP_RETAIN,
  PROP_MAX_QUEUED,
  PROP_DRAIN_TIMEOUT,
  PROP_USERNAME,
  PROP_PASSWORD,
  PROP_PASSWORD_FILE,
  PROP_TLS,
  PROP_TLS_CA_FILE,
  PROP_TLS_CERT_FILE,
  PROP_TLS_KEY_FILE,
  PROP_TLS_INSECURE,
  PROP_HA_DISCOVERY,
  PROP_HA_PREFIX,
  PROP_HA_NODE_ID,
  PROP_HA_LABELS,
  PROP_HA_GROUPS_FILE,
  PROP_PUBLISHED,
  PROP_DROPPED,
  PROP_QUEUED,
  PROP_CONNECTED,
};

typedef enum
{
  MSG_UNSENT,     /* to be published (again, after a reconnection) */
  MSG_PUBLISHING, /* the sender thread is in mosquitto_publish() */
  MSG_INFLIGHT,   /* published as mid, not acknowledged yet */
} GstConyMqttState;

typedef struct {
  GBytes *payload;
  GstConyMqttState state;
  gint mid;
} GstConyMqttMessage;

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK,
    GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);

#define gst_cony_mqtt_sink_parent_class parent_class
G_DEFINE_TYPE (GstConyMqttSink, gst_cony_mqtt_sink, GST_TYPE_BASE_SINK);
GST_ELEMENT_REGISTER_DEFINE (conymqttsink, "conymqttsink", GST_RANK_NONE, GST_TYPE_CONY_MQTT_SINK);

static void
gst_cony_mqtt_message_free (gpointer data)
{
  GstConyMqttMessage *m = data;
  g_bytes_unref (m->payload);
  g_free (m);
}

/* ------------------------------------------------------------------------ */
/* libmosquitto's network thread */

/* An element message "conymqttsink" with the connection state and counts;
 * self->lock held. */
static void
gst_cony_mqtt_sink_post_state (GstConyMqttSink *self)
{
  GstStructure *s = gst_structure_new ("conymqttsink", "connected", G_TYPE_BOOLEAN, self->connected,
      "queued", G_TYPE_UINT, self->queue.length, "published", G_TYPE_UINT64, self->published,
      "dropped", G_TYPE_UINT64, self->dropped, NULL);
  gst_element_post_message (GST_ELEMENT (self), gst_message_new_element (GST_OBJECT (self), s));
}

/* A fatal error (takes @text and @debug): no more attempts, EOS does not
 * wait for a broker that will not come, and the error is posted once. While
 * start() waits for the first CONNACK it is kept for start() to post and
 * fail the state change with: an error posted from another thread while
 * the pipeline goes to PAUSED can leave gst-launch-1.0 waiting forever. */
static void
gst_cony_mqtt_sink_fatal (GstConyMqttSink *self, GstResourceError code, gchar *text, gchar *debug)
{
  g_mutex_lock (&self->lock);
  gboolean post = !self->failed && !self->starting;
  if (!self->failed && self->starting) {
    self->fatal_code = code;
    self->fatal_text = g_steal_pointer (&text);
    self->fatal_debug = g_steal_pointer (&debug);
  }
  self->failed = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (post)
    gst_element_message_full (GST_ELEMENT (self), GST_MESSAGE_ERROR, GST_RESOURCE_ERROR, code,
        g_steal_pointer (&text), g_steal_pointer (&debug), __FILE__, GST_FUNCTION, __LINE__);
  g_free (text);
  g_free (debug);
}

/* What the user can do about a CONNACK refusal (MQTT 3.1.1 return codes). */
static const char *
gst_cony_mqtt_connack_hint (int rc)
{
  switch (rc) {
    case 2: return "set a client-id the broker accepts";
    case 4:
    case 5: return "check username and password (or password-file) and the broker's ACL";
    default: return "see the broker's log";
  }
}

static void
gst_cony_mqtt_sink_on_connect (struct mosquitto *mosq, void *user, int rc)
{
  GstConyMqttSink *self = user;

  if (rc != 0) {
    gst_cony_mqtt_sink_fatal (self, GST_RESOURCE_ERROR_OPEN_WRITE,
        g_strdup_printf ("The MQTT broker refused the connection: CONNACK %d (%s)", rc,
            mosquitto_connack_string (rc)),
        g_strdup_printf ("%s:%d%s%s: %s", self->run_host, self->run_port,
            self->run_username ? " as user " : "", self->run_username ? self->run_username : "",
            gst_cony_mqtt_connack_hint (rc)));
    mosquitto_disconnect (mosq); /* no reconnection */
    return;
  }
  g_mutex_lock (&self->lock);
  self->failing = FALSE;
  self->connected = TRUE;
  if (self->ha != NULL) /* configs, online, states: again on every connection */
    gst_cony_mqtt_ha_reset (self->ha);
  self->generation++;
  self->connects++;
  GST_INFO_OBJECT (self, "connected to %s:%d (%u queued)", self->host, self->port,
      self->queue.length);
  gst_cony_mqtt_sink_post_state (self);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

/* QoS 0: whatever was not written is published again after the
 * reconnection. QoS 1 and 2: libmosquitto sends its unacknowledged messages
 * again itself (same mid, DUP); publishing them again here too gave a copy
 * more per reconnection (80 repeats of a 20-message window after four
 * reconnections: docs/hardening.md). */
/* Whether libmosquitto's loop_forever() ends after a disconnection with
 * @rc (and @err, errno): it reconnects by itself only after the others. */
static gboolean
gst_cony_mqtt_ends_loop (int rc, int err)
{
  switch (rc) {
    case MOSQ_ERR_NOMEM:
    case MOSQ_ERR_PROTOCOL:
    case MOSQ_ERR_INVAL:
    case MOSQ_ERR_NOT_FOUND:
    case MOSQ_ERR_TLS:
    case MOSQ_ERR_PAYLOAD_SIZE:
    case MOSQ_ERR_NOT_SUPPORTED:
    case MOSQ_ERR_AUTH:
    case MOSQ_ERR_ACL_DENIED:
    case MOSQ_ERR_UNKNOWN:
    case MOSQ_ERR_EAI:
    case MOSQ_ERR_PROXY: return TRUE;
    default: return err == EPROTO; /* a TLS error in a read or write */
  }
}

static void
gst_cony_mqtt_sink_on_disconnect (struct mosquitto *mosq, void *user, int rc)
{
  GstConyMqttSink *self = user;
  gboolean ends = gst_cony_mqtt_ends_loop (rc, errno);

  g_mutex_lock (&self->lock);
  gboolean was = self->connected;
  self->connected = FALSE;
  self->generation++;
  if (self->run_qos == 0) {
    for (GList *l = self->queue.head; l; l = l->next) {
      GstConyMqttMessage *m = l->data;
      m->state = MSG_UNSENT;
      m->mid = 0;
    }
    self->inflight = 0;
    g_hash_table_remove_all (self->acked_early);
  }
  gboolean quiet = self->stopping || self->failed;
  gboolean first_failure = !was && !self->failing && self->connects == 0;
  if (!was)
    self->failing = TRUE;
  if (ends && was) { /* the sender thread starts the network thread again */
    self->need_connect = TRUE;
    self->loop_ended = TRUE;
  }
  if (was && !quiet) {
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE, ("Lost the connection to the MQTT broker"),
        ("%s:%d (%s); queueing results until it is back (%u queued)", self->run_host,
            self->run_port, mosquitto_strerror (rc), self->queue.length));
    gst_cony_mqtt_sink_post_state (self);
  }
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);

  if (ends && !was && !quiet) {
    /* refused in or right after the handshake, nothing a retry mends */
    gst_cony_mqtt_sink_fatal (self, GST_RESOURCE_ERROR_OPEN_WRITE,
        g_strdup (self->run_tls ? "TLS with the MQTT broker failed"
                                : "The MQTT broker closed the connection before CONNACK"),
        g_strdup_printf ("%s:%d: %s%s", self->run_host, self->run_port, mosquitto_strerror (rc),
            self->run_tls ? " (the broker closed the connection after the handshake: does it "
                            "require a client certificate? tls-cert-file)"
                          : " (is it an MQTT broker?)"));
  } else if (first_failure && !quiet) {
    /* TCP accepted, then no CONNACK (keepalive) or the connection closed */
    GST_ELEMENT_WARNING (self, RESOURCE, OPEN_WRITE, ("Cannot connect to the MQTT broker yet"),
        ("%s:%d: %s; retrying every 1 to 4 s, results are queued (max-queued)", self->run_host,
            self->run_port,
            rc == MOSQ_ERR_KEEPALIVE ? "no answer (CONNACK) within keepalive"
                                     : mosquitto_strerror (rc)));
  }
}

/* libmosquitto's log. A TLS error before the CONNACK is the only word of a
 * refused certificate or key: libmosquitto's network thread then ends
 * without a disconnect callback, so it is the element's error here. (One
 * after the CONNACK, a connection cut, takes the lost-connection path.) */
static void
gst_cony_mqtt_sink_on_log (struct mosquitto *mosq, void *user, int level, const char *str)
{
  GstConyMqttSink *self = user;

  if (level != MOSQ_LOG_ERR) {
    GST_LOG_OBJECT (self, "%s", str);
    return;
  }
  GST_DEBUG_OBJECT (self, "libmosquitto: %s", str);
  if (!g_str_has_prefix (str, "OpenSSL Error") && !g_str_has_prefix (str, "Error: Unable to load"))
    return;
  g_mutex_lock (&self->lock);
  gboolean fatal = !self->connected && !self->stopping;
  g_mutex_unlock (&self->lock);
  /* libmosquitto's loop ends by itself after a TLS error (and must not be
   * told to here: it logs while holding its log lock) */
  if (fatal)
    gst_cony_mqtt_sink_fatal (self, GST_RESOURCE_ERROR_OPEN_WRITE,
        g_strdup ("TLS with the MQTT broker failed"),
        g_strdup_printf ("%s:%d: %s (tls-ca-file, tls-cert-file, tls-key-file, host)",
            self->run_host, self->run_port, str));
}

static void
gst_cony_mqtt_sink_on_publish (struct mosquitto *mosq, void *user, int mid)
{
  GstConyMqttSink *self = user;

  g_mutex_lock (&self->lock);
  for (GList *l = self->queue.head; l; l = l->next) {
    GstConyMqttMessage *m = l->data;
    if (m->state == MSG_INFLIGHT && m->mid == mid) {
      g_queue_delete_link (&self->queue, l);
      gst_cony_mqtt_message_free (m);
      self->inflight--;
      self->published++;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      return;
    }
  }
  /* acknowledged before the sender thread learnt the mid */
  if (self->publishing > 0)
    g_hash_table_add (self->acked_early, GINT_TO_POINTER (mid));
  g_mutex_unlock (&self->lock);
}

/* ------------------------------------------------------------------------ */
/* The sender thread: publishes the queue in order, at most MAX_INFLIGHT
 * unacknowledged at once, while connected. */

static GstConyMqttMessage *
gst_cony_mqtt_sink_next_unsent (GstConyMqttSink *self)
{
  if (!self->connected || self->inflight + self->publishing >= MAX_INFLIGHT)
    return NULL;
  for (GList *l = self->queue.head; l; l = l->next) {
    GstConyMqttMessage *m = l->data;
    if (m->state == MSG_UNSENT)
      return m;
  }
  return NULL;
}

/* After mosquitto_publish() of @m returned @rc with @mid; self->lock held. */
static void
gst_cony_mqtt_sink_published (GstConyMqttSink *self, GstConyMqttMessage *m, guint generation,
    int rc, int mid)
{
  self->publishing--;
  /* QoS 1 and 2: libmosquitto keeps what it accepted (also while
   * disconnected) and sends it again after a reconnection, same mid */
  gboolean kept = self->run_qos > 0 && (rc == MOSQ_ERR_SUCCESS || rc == MOSQ_ERR_NO_CONN);
  if (!kept && generation != self->generation)
    return; /* QoS 0, (re)connected meanwhile: the message is UNSENT again */
  if (!kept && rc != MOSQ_ERR_SUCCESS) {
    GST_DEBUG_OBJECT (self, "publish: %s; retrying", mosquitto_strerror (rc));
    m->state = MSG_UNSENT;
    return;
  }
  if (g_hash_table_remove (self->acked_early, GINT_TO_POINTER (mid))) {
    g_queue_remove (&self->queue, m);
    gst_cony_mqtt_message_free (m);
    self->published++;
    g_cond_broadcast (&self->cond);
  } else {
    m->state = MSG_INFLIGHT;
    m->mid = mid;
    self->inflight++;
  }
  if (self->publishing == 0)
    g_hash_table_remove_all (self->acked_early);
}

static int gst_cony_mqtt_sink_try_connect (GstConyMqttSink *self);

/* Home Assistant's configs and states, retained, QoS 1. Not queued: what is
 * lost with a connection is published again on the next (ha_reset). */
static void
gst_cony_mqtt_sink_publish_ha (GstConyMqttSink *self, GPtrArray *due)
{
  for (guint i = 0; i < due->len; i++) {
    GstConyMqttHaMessage *m = g_ptr_array_index (due, i);
    int rc = mosquitto_publish (self->mosq, NULL, m->topic, (int) strlen (m->payload), m->payload,
        1, TRUE);
    GST_DEBUG_OBJECT (self, "ha: %s = %s (%s)", m->topic, m->payload, mosquitto_strerror (rc));
  }
  g_ptr_array_unref (due);
}

static gpointer
gst_cony_mqtt_sink_sender (gpointer data)
{
  GstConyMqttSink *self = data;

  g_mutex_lock (&self->lock);
  guint delay = 1;
  while (!self->stopping) {
    /* a broker that was not there at the start, or libmosquitto's network
     * thread ended (a TLS or protocol error): 1, 2, 4, 4, ... s apart */
    if (self->need_connect && !self->failed) {
      g_cond_wait_until (&self->cond, &self->lock,
          g_get_monotonic_time () + delay * G_USEC_PER_SEC);
      delay = MIN (delay * 2, 4);
      if (self->stopping)
        break;
      gboolean ended = self->loop_ended;
      self->loop_ended = FALSE;
      g_mutex_unlock (&self->lock);
      if (ended) /* joins the thread that ended, so that a new one can start */
        mosquitto_loop_stop (self->mosq, FALSE);
      gst_cony_mqtt_sink_try_connect (self);
      g_mutex_lock (&self->lock);
      continue;
    }
    delay = 1;
    GPtrArray *due = self->ha && self->connected ? gst_cony_mqtt_ha_take_due (self->ha) : NULL;
    if (due != NULL) {
      g_mutex_unlock (&self->lock);
      gst_cony_mqtt_sink_publish_ha (self, due);
      g_mutex_lock (&self->lock);
      continue;
    }
    GstConyMqttMessage *m = gst_cony_mqtt_sink_next_unsent (self);
    if (m == NULL) {
      g_cond_wait (&self->cond, &self->lock);
      continue;
    }
    guint generation = self->generation;
    GBytes *payload = g_bytes_ref (m->payload);
    m->state = MSG_PUBLISHING;
    self->publishing++;
    g_mutex_unlock (&self->lock);

    gsize len;
    gconstpointer bytes = g_bytes_get_data (payload, &len);
    int mid = 0;
    int rc = mosquitto_publish (self->mosq, &mid, self->bare_topic, (int) len, bytes, self->run_qos,
        self->run_retain);
    g_bytes_unref (payload);

    g_mutex_lock (&self->lock);
    gst_cony_mqtt_sink_published (self, m, generation, rc, mid);
    if (rc != MOSQ_ERR_SUCCESS) /* no busy loop while libmosquitto notices */
      g_cond_wait_until (&self->cond, &self->lock, g_get_monotonic_time () + 100 * 1000);
  }
  g_mutex_unlock (&self->lock);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* GstBaseSink */

static gpointer
gst_cony_mqtt_sink_lib_init (gpointer unused)
{
  mosquitto_lib_init ();
  return NULL;
}

/* One connection attempt; on success libmosquitto's network thread takes
 * over (it reconnects by itself after a lost connection, but not after a
 * first attempt that failed at once: the sender thread retries those).
 * Returns the mosquitto error code. */
static int
gst_cony_mqtt_sink_try_connect (GstConyMqttSink *self)
{
  int rc = mosquitto_connect_async (self->mosq, self->run_host, self->run_port,
      (int) self->run_keepalive);
  int err = errno;
  if (rc == MOSQ_ERR_SUCCESS) {
    rc = mosquitto_loop_start (self->mosq);
    if (rc != MOSQ_ERR_SUCCESS)
      GST_ELEMENT_ERROR (self, RESOURCE, FAILED, ("Cannot start the MQTT network thread"),
          ("mosquitto_loop_start: %s", mosquitto_strerror (rc)));
    else
      self->need_connect = FALSE;
    return rc;
  }
  if (rc == MOSQ_ERR_EAI || rc == MOSQ_ERR_INVAL) {
    gst_cony_mqtt_sink_fatal (self, GST_RESOURCE_ERROR_NOT_FOUND,
        g_strdup ("Cannot find the MQTT broker"),
        g_strdup_printf ("%s:%d: %s", self->run_host, self->run_port,
            rc == MOSQ_ERR_EAI ? "unknown host" : mosquitto_strerror (rc)));
    return rc;
  }
  if (rc == MOSQ_ERR_TLS || (self->run_tls && gst_cony_mqtt_ends_loop (rc, err))) {
    /* on_log() has given OpenSSL's reason unless there was none (the first
     * fatal error is the one reported). A TLS 1.3 broker that wants a client
     * certificate closes the connection after the handshake: a protocol
     * error here, an OpenSSL alert when it happens in the network thread. */
    gst_cony_mqtt_sink_fatal (self, GST_RESOURCE_ERROR_OPEN_WRITE,
        g_strdup ("TLS with the MQTT broker failed"),
        g_strdup_printf ("%s:%d: %s%s", self->run_host, self->run_port,
            rc == MOSQ_ERR_ERRNO ? g_strerror (err) : mosquitto_strerror (rc),
            rc != MOSQ_ERR_TLS ? " (the broker closed the connection after the handshake: "
                                 "does it require a client certificate? tls-cert-file)"
                               : ""));
    return rc;
  }
  g_mutex_lock (&self->lock);
  gboolean first = !self->failing;
  self->failing = TRUE;
  g_mutex_unlock (&self->lock);
  if (first)
    GST_ELEMENT_WARNING (self, RESOURCE, OPEN_WRITE, ("Cannot connect to the MQTT broker yet"),
        ("%s:%d: %s; retrying every 1 to 4 s, results are queued (max-queued)", self->run_host,
            self->run_port, rc == MOSQ_ERR_ERRNO ? g_strerror (err) : mosquitto_strerror (rc)));
  self->need_connect = TRUE;
  return rc;
}

/* The first line of @path (a password file), without its line end; NULL
 * with an error posted when it cannot be read or is empty. */
static gchar *
gst_cony_mqtt_sink_read_password (GstConyMqttSink *self, const gchar *path)
{
  gchar *text = NULL;
  GError *err = NULL;
  if (!g_file_get_contents (path, &text, NULL, &err)) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Cannot read the MQTT password file"),
        ("password-file '%s': %s", path, err->message));
    g_error_free (err);
    return NULL;
  }
  text[strcspn (text, "\r\n")] = '\0';
  if (*text == '\0') {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("The MQTT password file is empty"),
        ("password-file '%s': the password is its first line", path));
    g_free (text);
    return NULL;
  }
  return text;
}

/* A PEM file the TLS setup needs: readable and holding a @marker block
 * ("CERTIFICATE", "PRIVATE KEY"), so that a wrong file is named at start
 * instead of failing in the handshake. */
static gboolean
gst_cony_mqtt_sink_check_pem (GstConyMqttSink *self, const gchar *prop, const gchar *path,
    const gchar *marker)
{
  gchar *text = NULL;
  GError *err = NULL;
  if (!g_file_get_contents (path, &text, NULL, &err)) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Cannot read the MQTT %s", prop),
        ("%s '%s': %s", prop, path, err->message));
    g_error_free (err);
    return FALSE;
  }
  gboolean pem = strstr (text, "-----BEGIN ") != NULL && strstr (text, marker) != NULL;
  /* OpenSSL would ask for the pass phrase on the terminal */
  gboolean encrypted = strstr (text, "ENCRYPTED") != NULL;
  g_free (text);
  if (!pem || encrypted) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Unusable MQTT %s", prop),
        ("%s '%s': %s", prop, path,
            encrypted ? "the key is encrypted; conymqttsink needs it without a pass phrase "
                        "(openssl pkey -in KEY -out PLAIN)"
                      : (g_strcmp0 (marker, "PRIVATE KEY") == 0 ? "no PEM private key in it"
                                                                : "no PEM certificate in it")));
    return FALSE;
  }
  return TRUE;
}

/* Never asked: an encrypted key is refused before (check_pem). */
static int
gst_cony_mqtt_no_pass_phrase (char *buf, int size, int rwflag, void *user)
{
  return 0;
}

typedef struct {
  gchar *username, *password, *password_file;
  gboolean tls, tls_insecure;
  gchar *ca, *cert, *key;
} GstConyMqttSecurity;

static void
gst_cony_mqtt_security_clear (GstConyMqttSecurity *c)
{
  g_free (c->username);
  if (c->password)
    memset (c->password, 0, strlen (c->password));
  g_free (c->password);
  g_free (c->password_file);
  g_free (c->ca);
  g_free (c->cert);
  g_free (c->key);
}

/* The properties' strings, "" as unset. */
static gchar *
gst_cony_mqtt_dup_set (const gchar *s)
{
  return s && *s ? g_strdup (s) : NULL;
}

/* Credentials and TLS onto self->mosq (before connecting); FALSE with an
 * error posted that names the setting. */
static gboolean
gst_cony_mqtt_sink_setup_security (GstConyMqttSink *self)
{
  GstConyMqttSecurity c = { 0 };
  GST_OBJECT_LOCK (self);
  c.username = gst_cony_mqtt_dup_set (self->username);
  c.password = gst_cony_mqtt_dup_set (self->password);
  c.password_file = gst_cony_mqtt_dup_set (self->password_file);
  c.ca = gst_cony_mqtt_dup_set (self->tls_ca_file);
  c.cert = gst_cony_mqtt_dup_set (self->tls_cert_file);
  c.key = gst_cony_mqtt_dup_set (self->tls_key_file);
  c.tls = self->tls || c.ca || c.cert || c.key;
  c.tls_insecure = self->tls_insecure;
  GST_OBJECT_UNLOCK (self);

  gboolean ok = FALSE;
  const gchar *wrong = NULL;
  if (c.password && c.password_file)
    wrong = "set password or password-file, not both";
  else if ((c.password || c.password_file) && !c.username)
    wrong = "a password needs a username";
  else if ((c.cert == NULL) != (c.key == NULL))
    wrong = "a client certificate needs both tls-cert-file and tls-key-file";
  if (wrong) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Incomplete MQTT credentials"), ("%s", wrong));
    goto out;
  }
  if (c.password_file
      && (c.password = gst_cony_mqtt_sink_read_password (self, c.password_file)) == NULL)
    goto out;
  if ((c.ca && !gst_cony_mqtt_sink_check_pem (self, "tls-ca-file", c.ca, "CERTIFICATE"))
      || (c.cert && !gst_cony_mqtt_sink_check_pem (self, "tls-cert-file", c.cert, "CERTIFICATE"))
      || (c.key && !gst_cony_mqtt_sink_check_pem (self, "tls-key-file", c.key, "PRIVATE KEY")))
    goto out;

  int rc = MOSQ_ERR_SUCCESS;
  if (c.username)
    rc = mosquitto_username_pw_set (self->mosq, c.username, c.password);
  if (rc == MOSQ_ERR_SUCCESS && c.tls) {
    /* no CA file: the system's CAs (a broker with a public certificate) */
    rc = mosquitto_int_option (self->mosq, MOSQ_OPT_TLS_USE_OS_CERTS, c.ca == NULL);
    if (rc == MOSQ_ERR_SUCCESS && (c.ca || c.cert))
      rc = mosquitto_tls_set (self->mosq, c.ca, c.ca ? NULL : "/etc/ssl/certs", c.cert, c.key,
          gst_cony_mqtt_no_pass_phrase);
    if (rc == MOSQ_ERR_SUCCESS)
      rc = mosquitto_tls_insecure_set (self->mosq, c.tls_insecure);
  }
  if (rc != MOSQ_ERR_SUCCESS) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Cannot set the MQTT credentials or TLS"),
        ("%s", mosquitto_strerror (rc)));
    goto out;
  }
  g_free (self->run_username);
  self->run_username = g_strdup (c.username);
  self->run_tls = c.tls;
  ok = TRUE;
out:
  gst_cony_mqtt_security_clear (&c);
  return ok;
}

/* ha-discovery: the entities and the last will ("offline", retained) that
 * marks them unavailable when the connection dies; FALSE with an error. */
static gboolean
gst_cony_mqtt_sink_setup_ha (GstConyMqttSink *self)
{
  GST_OBJECT_LOCK (self);
  gboolean on = self->ha_discovery;
  gchar *prefix = g_strdup (self->ha_prefix), *node = g_strdup (self->ha_node_id);
  gchar *labels = g_strdup (self->ha_labels), *groups = g_strdup (self->ha_groups_file);
  GST_OBJECT_UNLOCK (self);

  GError *err = NULL;
  GstConyMqttHa *ha = NULL;
  int rc = MOSQ_ERR_SUCCESS;
  if (on
      && (ha = gst_cony_mqtt_ha_new (prefix, node, labels && *labels ? labels : NULL,
              groups && *groups ? groups : NULL, &err))
          == NULL)
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Invalid Home Assistant discovery settings"),
        ("%s", err->message));
  if (ha != NULL) {
    const gchar *topic = gst_cony_mqtt_ha_availability_topic (ha);
    rc = mosquitto_will_set (self->mosq, topic, (int) strlen (GST_CONY_MQTT_HA_OFFLINE),
        GST_CONY_MQTT_HA_OFFLINE, 1, TRUE);
    if (rc != MOSQ_ERR_SUCCESS)
      GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Cannot set the MQTT last will"),
          ("%s: %s", topic, mosquitto_strerror (rc)));
  }
  g_clear_error (&err);
  g_free (prefix);
  g_free (node);
  g_free (labels);
  g_free (groups);
  if (on && (ha == NULL || rc != MOSQ_ERR_SUCCESS)) {
    gst_cony_mqtt_ha_free (ha);
    return FALSE;
  }
  g_mutex_lock (&self->lock);
  self->ha = ha;
  self->ha_warned = FALSE;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* After the first attempt (@attempted: under way): waits up to START_WAIT
 * for its outcome, so that a refusal (credentials, certificates) fails the
 * state change with its error. An absent or silent broker is not waited
 * for longer: the results are queued meanwhile. FALSE after a fatal error. */
static gboolean
gst_cony_mqtt_sink_wait_connack (GstConyMqttSink *self, gboolean attempted)
{
  g_mutex_lock (&self->lock);
  gint64 deadline = g_get_monotonic_time () + START_WAIT;
  while (attempted && !self->connected && !self->failed && !self->failing)
    if (!g_cond_wait_until (&self->cond, &self->lock, deadline))
      break;
  self->starting = FALSE;
  gboolean failed = self->failed;
  GstResourceError code = self->fatal_code;
  gchar *text = g_steal_pointer (&self->fatal_text);
  gchar *debug = g_steal_pointer (&self->fatal_debug);
  g_mutex_unlock (&self->lock);
  if (text != NULL)
    gst_element_message_full (GST_ELEMENT (self), GST_MESSAGE_ERROR, GST_RESOURCE_ERROR, code, text,
        debug, __FILE__, GST_FUNCTION, __LINE__);
  return !failed;
}

static gboolean
gst_cony_mqtt_sink_start (GstBaseSink *sink)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);
  static GOnce lib_once = G_ONCE_INIT;
  g_once (&lib_once, gst_cony_mqtt_sink_lib_init, NULL);

  GST_OBJECT_LOCK (self);
  gchar *client_id = g_strdup (self->client_id);
  g_free (self->run_host);
  self->run_host = g_strdup (self->host);
  self->run_port = self->port;
  self->run_keepalive = self->keepalive;
  g_free (self->bare_topic);
  self->bare_topic = g_strdup (self->topic);
  self->run_qos = self->qos;
  self->run_retain = self->retain;
  GST_OBJECT_UNLOCK (self);

  if (self->run_host == NULL || *self->run_host == '\0' || self->bare_topic == NULL
      || *self->bare_topic == '\0'
      || mosquitto_pub_topic_check (self->bare_topic) != MOSQ_ERR_SUCCESS) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("No MQTT broker host or no valid topic"),
        ("host '%s', topic '%s' (a topic has no wildcards + or #)",
            self->run_host ? self->run_host : "", self->bare_topic ? self->bare_topic : ""));
    g_free (client_id);
    return FALSE;
  }
  self->mosq = mosquitto_new (client_id, TRUE, self);
  g_free (client_id);
  if (self->mosq == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Cannot create the MQTT client"),
        ("mosquitto_new: %s", g_strerror (errno)));
    return FALSE;
  }
  if (!gst_cony_mqtt_sink_setup_security (self)) {
    mosquitto_destroy (self->mosq);
    self->mosq = NULL;
    return FALSE;
  }
  if (!gst_cony_mqtt_sink_setup_ha (self)) {
    mosquitto_destroy (self->mosq);
    self->mosq = NULL;
    return FALSE;
  }
  mosquitto_log_callback_set (self->mosq, gst_cony_mqtt_sink_on_log);
  mosquitto_connect_callback_set (self->mosq, gst_cony_mqtt_sink_on_connect);
  mosquitto_disconnect_callback_set (self->mosq, gst_cony_mqtt_sink_on_disconnect);
  mosquitto_publish_callback_set (self->mosq, gst_cony_mqtt_sink_on_publish);
  mosquitto_reconnect_delay_set (self->mosq, 1, 4, TRUE);
  mosquitto_max_inflight_messages_set (self->mosq, MAX_INFLIGHT);

  self->stopping = self->flushing = self->connected = self->dropping = FALSE;
  self->need_connect = self->loop_ended = self->failed = self->failing = FALSE;
  self->published = self->dropped = self->connects = 0;
  self->inflight = self->publishing = 0;

  self->starting = TRUE;
  int rc = gst_cony_mqtt_sink_try_connect (self);
  if (!gst_cony_mqtt_sink_wait_connack (self, rc == MOSQ_ERR_SUCCESS)) {
    mosquitto_disconnect (self->mosq);
    mosquitto_loop_stop (self->mosq, FALSE);
    mosquitto_destroy (self->mosq);
    self->mosq = NULL;
    g_mutex_lock (&self->lock);
    g_clear_pointer (&self->ha, gst_cony_mqtt_ha_free);
    g_mutex_unlock (&self->lock);
    return FALSE;
  }
  self->sender = g_thread_new ("conymqttsink", gst_cony_mqtt_sink_sender, self);
  return TRUE;
}

static gboolean
gst_cony_mqtt_sink_stop (GstBaseSink *sink)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);

  g_mutex_lock (&self->lock);
  self->stopping = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  if (self->sender)
    g_thread_join (self->sender);
  self->sender = NULL;
  if (self->mosq) {
    g_mutex_lock (&self->lock);
    gboolean offline = self->ha != NULL && self->connected;
    g_mutex_unlock (&self->lock);
    /* a clean stop sends no last will: Home Assistant is told here. QoS 0
     * goes out at once, ahead of the DISCONNECT (QoS 1 could wait behind
     * the in-flight window and be dropped with the connection). */
    if (offline)
      mosquitto_publish (self->mosq, NULL, gst_cony_mqtt_ha_availability_topic (self->ha),
          (int) strlen (GST_CONY_MQTT_HA_OFFLINE), GST_CONY_MQTT_HA_OFFLINE, 0, TRUE);
    mosquitto_disconnect (self->mosq);
    mosquitto_loop_stop (self->mosq, FALSE);
    mosquitto_destroy (self->mosq);
    self->mosq = NULL;
  }
  g_mutex_lock (&self->lock);
  if (self->queue.length > 0)
    GST_INFO_OBJECT (self, "stopped with %u results not delivered", self->queue.length);
  g_queue_clear_full (&self->queue, gst_cony_mqtt_message_free);
  self->inflight = 0;
  self->connected = FALSE;
  g_hash_table_remove_all (self->acked_early);
  g_clear_pointer (&self->ha, gst_cony_mqtt_ha_free);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_cony_mqtt_sink_set_caps (GstBaseSink *sink, GstCaps *caps)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);
  gboolean json = gst_caps_get_size (caps) > 0
      && gst_structure_has_name (gst_caps_get_structure (caps, 0), "application/x-json");
  g_mutex_lock (&self->lock);
  self->strip_newline = json;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* A record for Home Assistant's states; self->lock held. */
static void
gst_cony_mqtt_sink_update_ha (GstConyMqttSink *self, const gchar *data, gsize len)
{
  GError *err = NULL;
  if (gst_cony_mqtt_ha_update (self->ha, data, len, &err)) {
    g_cond_broadcast (&self->cond);
    return;
  }
  if (!self->ha_warned)
    GST_ELEMENT_WARNING (self, STREAM, FORMAT,
        ("ha-discovery: the input is not conyjson's records; Home Assistant's states stay as "
         "they are"),
        ("%s (put conyjson before conymqttsink)", err->message));
  self->ha_warned = TRUE;
  g_error_free (err);
}

/* One message of @len bytes at @data into the queue (or counted as dropped);
 * self->lock held. */
static void
gst_cony_mqtt_sink_queue (GstConyMqttSink *self, const gchar *data, gsize len, guint max_queued)
{
  if (self->ha != NULL)
    gst_cony_mqtt_sink_update_ha (self, data, len);
  if (self->queue.length >= max_queued) {
    self->dropped++;
    if (!self->dropping)
      GST_ELEMENT_WARNING (self, RESOURCE, WRITE, ("MQTT queue full: dropping results"),
          ("%u results wait for %s:%d (max-queued); new ones are discarded and counted in "
           "'dropped' until there is room",
              self->queue.length, self->host, self->port));
    self->dropping = TRUE;
  } else {
    GstConyMqttMessage *m = g_new0 (GstConyMqttMessage, 1);
    m->payload = g_bytes_new (data, len);
    g_queue_push_tail (&self->queue, m);
    self->dropping = FALSE;
    g_cond_broadcast (&self->cond);
  }
}

static gint
gst_cony_mqtt_sink_cmp_step (gconstpointer a, gconstpointer b)
{
  const GstConyClassificationMeta *x = *(GstConyClassificationMeta *const *) a;
  const GstConyClassificationMeta *y = *(GstConyClassificationMeta *const *) b;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* Buffers straight from conytransformer (not conyjson's lines): one result record per
 * classification meta, in step order, written by the same JSON formatter as conyjson's
 * (gstconyresult.h); TRUE when the buffer had metas. self->lock held. */
static gboolean
gst_cony_mqtt_sink_queue_metas (GstConyMqttSink *self, GstBuffer *buf, guint max_queued)
{
  GPtrArray *metas = g_ptr_array_new ();
  gpointer state = NULL;
  GstMeta *meta;

  while (
      (meta = gst_buffer_iterate_meta_filtered (buf, &state, GST_CONY_CLASSIFICATION_META_API_TYPE))
      != NULL)
    g_ptr_array_add (metas, meta);
  g_ptr_array_sort (metas, gst_cony_mqtt_sink_cmp_step);
  for (guint i = 0; i < metas->len; i++) {
    GstStructure *r = gst_cony_result_to_structure (metas->pdata[i], "result");
    GString *record = g_string_new (NULL);
    gst_structure_remove_field (r, "scores"); /* as conyjson's default */
    gst_cony_result_json_append_record (record, "result", NULL, r);
    gst_cony_mqtt_sink_queue (self, record->str, record->len, max_queued);
    g_string_free (record, TRUE);
    gst_structure_free (r);
  }
  gboolean had = metas->len > 0;
  g_ptr_array_free (metas, TRUE);
  return had;
}

/* The streaming thread: a copy into the queue, never a wait. */
static GstFlowReturn
gst_cony_mqtt_sink_render (GstBaseSink *sink, GstBuffer *buf)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);
  GstMapInfo map;

  GST_OBJECT_LOCK (self);
  guint max_queued = self->max_queued;
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&self->lock);
  gboolean json = self->strip_newline;
  if (!json && gst_cony_mqtt_sink_queue_metas (self, buf, max_queued)) {
    g_mutex_unlock (&self->lock);
    return GST_FLOW_OK;
  }
  g_mutex_unlock (&self->lock);

  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, RESOURCE, READ, ("Cannot read a buffer"), (NULL));
    return GST_FLOW_ERROR;
  }
  g_mutex_lock (&self->lock);
  gsize len = map.size;
  if (json && len > 0 && map.data[len - 1] == '\n')
    len--;
  gst_cony_mqtt_sink_queue (self, (const gchar *) map.data, len, max_queued);
  g_mutex_unlock (&self->lock);
  gst_buffer_unmap (buf, &map);
  return GST_FLOW_OK;
}

/* EOS: waits (drain-timeout) until everything is delivered. */
static void
gst_cony_mqtt_sink_drain (GstConyMqttSink *self)
{
  GST_OBJECT_LOCK (self);
  gint64 deadline = g_get_monotonic_time () + (gint64) self->drain_timeout * 1000;
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&self->lock);
  while (self->queue.length > 0 && !self->flushing && !self->stopping && !self->failed)
    if (!g_cond_wait_until (&self->cond, &self->lock, deadline))
      break;
  if (self->queue.length > 0 && !self->flushing)
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE, ("Not every result reached the MQTT broker"),
        ("%u results not delivered to %s:%d at EOS (%s; %" G_GUINT64_FORMAT
         " published, %" G_GUINT64_FORMAT " dropped)",
            self->queue.length, self->host, self->port,
            self->connected ? "not acknowledged in drain-timeout" : "not connected",
            self->published, self->dropped));
  gst_cony_mqtt_sink_post_state (self);
  g_mutex_unlock (&self->lock);
}

static gboolean
gst_cony_mqtt_sink_event (GstBaseSink *sink, GstEvent *event)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);

  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
    gst_cony_mqtt_sink_drain (self);
  return GST_BASE_SINK_CLASS (parent_class)->event (sink, event);
}

static gboolean
gst_cony_mqtt_sink_unlock (GstBaseSink *sink)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);
  g_mutex_lock (&self->lock);
  self->flushing = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
gst_cony_mqtt_sink_unlock_stop (GstBaseSink *sink)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (sink);
  g_mutex_lock (&self->lock);
  self->flushing = FALSE;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* ------------------------------------------------------------------------ */

static void
gst_cony_mqtt_set_string (gchar **field, const GValue *value)
{
  g_free (*field);
  *field = g_value_dup_string (value);
}

static void
gst_cony_mqtt_sink_set_property (GObject *object, guint prop_id, const GValue *value,
    GParamSpec *pspec)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HOST:
      g_free (self->host);
      self->host = g_value_dup_string (value);
      break;
    case PROP_PORT: self->port = g_value_get_int (value); break;
    case PROP_TOPIC:
      g_free (self->topic);
      self->topic = g_value_dup_string (value);
      break;
    case PROP_QOS: self->qos = g_value_get_int (value); break;
    case PROP_CLIENT_ID:
      g_free (self->client_id);
      self->client_id = g_value_dup_string (value);
      break;
    case PROP_KEEPALIVE: self->keepalive = g_value_get_uint (value); break;
    case PROP_RETAIN: self->retain = g_value_get_boolean (value); break;
    case PROP_MAX_QUEUED: self->max_queued = g_value_get_uint (value); break;
    case PROP_DRAIN_TIMEOUT: self->drain_timeout = g_value_get_uint (value); break;
    case PROP_USERNAME: gst_cony_mqtt_set_string (&self->username, value); break;
    case PROP_PASSWORD:
      if (self->password)
        memset (self->password, 0, strlen (self->password));
      gst_cony_mqtt_set_string (&self->password, value);
      break;
    case PROP_PASSWORD_FILE: gst_cony_mqtt_set_string (&self->password_file, value); break;
    case PROP_TLS: self->tls = g_value_get_boolean (value); break;
    case PROP_TLS_CA_FILE: gst_cony_mqtt_set_string (&self->tls_ca_file, value); break;
    case PROP_TLS_CERT_FILE: gst_cony_mqtt_set_string (&self->tls_cert_file, value); break;
    case PROP_TLS_KEY_FILE: gst_cony_mqtt_set_string (&self->tls_key_file, value); break;
    case PROP_TLS_INSECURE: self->tls_insecure = g_value_get_boolean (value); break;
    case PROP_HA_DISCOVERY: self->ha_discovery = g_value_get_boolean (value); break;
    case PROP_HA_PREFIX: gst_cony_mqtt_set_string (&self->ha_prefix, value); break;
    case PROP_HA_NODE_ID: gst_cony_mqtt_set_string (&self->ha_node_id, value); break;
    case PROP_HA_LABELS: gst_cony_mqtt_set_string (&self->ha_labels, value); break;
    case PROP_HA_GROUPS_FILE: gst_cony_mqtt_set_string (&self->ha_groups_file, value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_mqtt_sink_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (object);

  switch (prop_id) {
    case PROP_PUBLISHED:
    case PROP_DROPPED:
    case PROP_QUEUED:
    case PROP_CONNECTED:
      g_mutex_lock (&self->lock);
      if (prop_id == PROP_PUBLISHED)
        g_value_set_uint64 (value, self->published);
      else if (prop_id == PROP_DROPPED)
        g_value_set_uint64 (value, self->dropped);
      else if (prop_id == PROP_QUEUED)
        g_value_set_uint (value, self->queue.length);
      else
        g_value_set_boolean (value, self->connected);
      g_mutex_unlock (&self->lock);
      return;
    default: break;
  }
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HOST: g_value_set_string (value, self->host); break;
    case PROP_PORT: g_value_set_int (value, self->port); break;
    case PROP_TOPIC: g_value_set_string (value, self->topic); break;
    case PROP_QOS: g_value_set_int (value, self->qos); break;
    case PROP_CLIENT_ID: g_value_set_string (value, self->client_id); break;
    case PROP_KEEPALIVE: g_value_set_uint (value, self->keepalive); break;
    case PROP_RETAIN: g_value_set_boolean (value, self->retain); break;
    case PROP_MAX_QUEUED: g_value_set_uint (value, self->max_queued); break;
    case PROP_DRAIN_TIMEOUT: g_value_set_uint (value, self->drain_timeout); break;
    case PROP_USERNAME: g_value_set_string (value, self->username); break;
    case PROP_PASSWORD_FILE: g_value_set_string (value, self->password_file); break;
    case PROP_TLS: g_value_set_boolean (value, self->tls); break;
    case PROP_TLS_CA_FILE: g_value_set_string (value, self->tls_ca_file); break;
    case PROP_TLS_CERT_FILE: g_value_set_string (value, self->tls_cert_file); break;
    case PROP_TLS_KEY_FILE: g_value_set_string (value, self->tls_key_file); break;
    case PROP_TLS_INSECURE: g_value_set_boolean (value, self->tls_insecure); break;
    case PROP_HA_DISCOVERY: g_value_set_boolean (value, self->ha_discovery); break;
    case PROP_HA_PREFIX: g_value_set_string (value, self->ha_prefix); break;
    case PROP_HA_NODE_ID: g_value_set_string (value, self->ha_node_id); break;
    case PROP_HA_LABELS: g_value_set_string (value, self->ha_labels); break;
    case PROP_HA_GROUPS_FILE: g_value_set_string (value, self->ha_groups_file); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec); break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_cony_mqtt_sink_finalize (GObject *object)
{
  GstConyMqttSink *self = GST_CONY_MQTT_SINK (object);

  g_free (self->host);
  g_free (self->topic);
  g_free (self->client_id);
  g_free (self->bare_topic);
  g_free (self->run_host);
  g_free (self->run_username);
  g_free (self->username);
  if (self->password)
    memset (self->password, 0, strlen (self->password));
  g_free (self->password);
  g_free (self->password_file);
  g_free (self->tls_ca_file);
  g_free (self->tls_cert_file);
  g_free (self->tls_key_file);
  g_free (self->ha_prefix);
  g_free (self->ha_node_id);
  g_free (self->ha_labels);
  g_free (self->ha_groups_file);
  g_queue_clear_full (&self->queue, gst_cony_mqtt_message_free);
  g_hash_table_unref (self->acked_early);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_cony_mqtt_sink_install_security_properties (GObjectClass *gobject_class, GParamFlags ready)
{
  g_object_class_install_property (gobject_class, PROP_USERNAME,
      g_param_spec_string ("username", "Username", "MQTT user name (NULL: none)", NULL, ready));
  g_object_class_install_property (gobject_class, PROP_PASSWORD,
      g_param_spec_string ("password", "Password",
          "MQTT password, write-only (password-file keeps it off the command line)", NULL,
          G_PARAM_WRITABLE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_PASSWORD_FILE,
      g_param_spec_string ("password-file", "Password file",
          "File whose first line is the MQTT password, read at start (NULL: none)", NULL, ready));
  g_object_class_install_property (gobject_class, PROP_TLS,
      g_param_spec_boolean ("tls", "TLS",
          "Connect with TLS (implied by the tls-*-file properties); without tls-ca-file the "
          "system's CAs verify the broker",
          FALSE, ready));
  g_object_class_install_property (gobject_class, PROP_TLS_CA_FILE,
      g_param_spec_string ("tls-ca-file", "TLS CA file",
          "PEM file of the CA(s) that signed the broker's certificate; turns TLS on", NULL, ready));
  g_object_class_install_property (gobject_class, PROP_TLS_CERT_FILE,
      g_param_spec_string ("tls-cert-file", "TLS client certificate",
          "PEM client certificate for brokers that require one (with tls-key-file)", NULL, ready));
  g_object_class_install_property (gobject_class, PROP_TLS_KEY_FILE,
      g_param_spec_string ("tls-key-file", "TLS client key",
          "PEM private key of tls-cert-file, not encrypted", NULL, ready));
  g_object_class_install_property (gobject_class, PROP_TLS_INSECURE,
      g_param_spec_boolean ("tls-insecure", "TLS insecure",
          "Do not check that the broker's certificate names host (the CA is still checked)", FALSE,
          ready));
}

static void
gst_cony_mqtt_sink_install_ha_properties (GObjectClass *gobject_class, GParamFlags ready)
{
  g_object_class_install_property (gobject_class, PROP_HA_DISCOVERY,
      g_param_spec_boolean ("ha-discovery", "Home Assistant discovery",
          "Publish Home Assistant MQTT discovery configs (retained) and states from conyjson's "
          "records: a sensor for the current label, a binary sensor per ha-labels / "
          "ha-groups-file label, availability by the last will",
          FALSE, ready));
  g_object_class_install_property (gobject_class, PROP_HA_PREFIX,
      g_param_spec_string ("ha-prefix", "Home Assistant prefix",
          "Home Assistant's discovery prefix", DEFAULT_HA_PREFIX, ready));
  g_object_class_install_property (gobject_class, PROP_HA_NODE_ID,
      g_param_spec_string ("ha-node-id", "Home Assistant node id",
          "This device in discovery topics, unique ids and state topics cony/NODE/... "
          "(letters, digits, _ and -; one per pipeline)",
          DEFAULT_HA_NODE_ID, ready));
  g_object_class_install_property (gobject_class, PROP_HA_LABELS,
      g_param_spec_string ("ha-labels", "Home Assistant labels",
          "Comma-separated labels that get a binary sensor (as the records spell them)", NULL,
          ready));
  g_object_class_install_property (gobject_class, PROP_HA_GROUPS_FILE,
      g_param_spec_string ("ha-groups-file", "Home Assistant groups file",
          "A label groups file (lines 'name = model label; model label'): each name gets a "
          "binary sensor",
          NULL, ready));
}

static void
gst_cony_mqtt_sink_install_properties (GObjectClass *gobject_class)
{
  const GParamFlags ready = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;
  const GParamFlags playing = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_PLAYING;
  const GParamFlags readonly = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  g_object_class_install_property (gobject_class, PROP_HOST,
      g_param_spec_string ("host", "Host", "MQTT broker host name or address", DEFAULT_HOST,
          ready));
  g_object_class_install_property (gobject_class, PROP_PORT,
      g_param_spec_int ("port", "Port", "MQTT broker TCP port", 1, 65535, DEFAULT_PORT, ready));
  g_object_class_install_property (gobject_class, PROP_TOPIC,
      g_param_spec_string ("topic", "Topic", "Topic every buffer is published on (no wildcards)",
          DEFAULT_TOPIC, ready));
  g_object_class_install_property (gobject_class, PROP_QOS,
      g_param_spec_int ("qos", "QoS",
          "MQTT quality of service: 0 at most once (what is sent while disconnected is lost "
          "with the connection), 1 at least once, 2 exactly once per connection",
          0, 2, DEFAULT_QOS, ready));
  g_object_class_install_property (gobject_class, PROP_CLIENT_ID,
      g_param_spec_string ("client-id", "Client id", "MQTT client id (NULL: a random one)",
          DEFAULT_CLIENT_ID, ready));
  g_object_class_install_property (gobject_class, PROP_KEEPALIVE,
      g_param_spec_uint ("keepalive", "Keepalive",
          "Seconds between pings; a dead broker is noticed after about 1.5 times this", 5, 65535,
          DEFAULT_KEEPALIVE, ready));
  g_object_class_install_property (gobject_class, PROP_RETAIN,
      g_param_spec_boolean ("retain", "Retain",
          "Publish with the retain flag: the broker keeps the last message for new subscribers",
          DEFAULT_RETAIN, ready));
  g_object_class_install_property (gobject_class, PROP_MAX_QUEUED,
      g_param_spec_uint ("max-queued", "Max queued",
          "Messages kept while the broker is away or slow (beyond: new ones are dropped and "
          "counted in 'dropped'); 100000 is about 7 hours of conyjson results",
          1, G_MAXUINT, DEFAULT_MAX_QUEUED, playing));
  g_object_class_install_property (gobject_class, PROP_DRAIN_TIMEOUT,
      g_param_spec_uint ("drain-timeout", "Drain timeout",
          "Milliseconds EOS waits for the queue to be delivered (0: not at all)", 0, G_MAXUINT,
          DEFAULT_DRAIN_TIMEOUT, playing));
  gst_cony_mqtt_sink_install_security_properties (gobject_class, ready);
  gst_cony_mqtt_sink_install_ha_properties (gobject_class, ready);
  g_object_class_install_property (gobject_class, PROP_PUBLISHED,
      g_param_spec_uint64 ("published", "Published",
          "Messages the broker acknowledged (QoS 0: written to the socket)", 0, G_MAXUINT64, 0,
          readonly));
  g_object_class_install_property (gobject_class, PROP_DROPPED,
      g_param_spec_uint64 ("dropped", "Dropped",
          "Buffers discarded because the queue was full (max-queued)", 0, G_MAXUINT64, 0,
          readonly));
  g_object_class_install_property (gobject_class, PROP_QUEUED,
      g_param_spec_uint ("queued", "Queued", "Messages waiting or not acknowledged yet", 0,
          G_MAXUINT, 0, readonly));
  g_object_class_install_property (gobject_class, PROP_CONNECTED,
      g_param_spec_boolean ("connected", "Connected", "Whether the broker connection is up", FALSE,
          readonly));
}

static void
gst_cony_mqtt_sink_class_init (GstConyMqttSinkClass *klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSinkClass *sink_class = GST_BASE_SINK_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (gst_cony_mqtt_sink_debug, "conymqttsink", 0,
      "Buffers (conyjson records) to an MQTT broker");

  gobject_class->set_property = gst_cony_mqtt_sink_set_property;
  gobject_class->get_property = gst_cony_mqtt_sink_get_property;
  gobject_class->finalize = gst_cony_mqtt_sink_finalize;
  gst_cony_mqtt_sink_install_properties (gobject_class);

  sink_class->start = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_start);
  sink_class->stop = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_stop);
  sink_class->set_caps = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_set_caps);
  sink_class->render = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_render);
  sink_class->event = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_event);
  sink_class->unlock = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_unlock);
  sink_class->unlock_stop = GST_DEBUG_FUNCPTR (gst_cony_mqtt_sink_unlock_stop);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_set_static_metadata (element_class, "MQTT publisher of results", "Sink/Network",
      "Publishes every buffer (conyjson's result records) to an MQTT broker", "gst-cony authors");
}

static void
gst_cony_mqtt_sink_init (GstConyMqttSink *self)
{
  self->host = g_strdup (DEFAULT_HOST);
  self->port = DEFAULT_PORT;
  self->topic = g_strdup (DEFAULT_TOPIC);
  self->qos = DEFAULT_QOS;
  self->client_id = g_strdup (DEFAULT_CLIENT_ID);
  self->keepalive = DEFAULT_KEEPALIVE;
  self->retain = DEFAULT_RETAIN;
  self->max_queued = DEFAULT_MAX_QUEUED;
  self->drain_timeout = DEFAULT_DRAIN_TIMEOUT;
  self->ha_prefix = g_strdup (DEFAULT_HA_PREFIX);
  self->ha_node_id = g_strdup (DEFAULT_HA_NODE_ID);
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->queue);
  self->acked_early = g_hash_table_new (NULL, NULL);
  /* results go out as soon as they are computed, not at their running time */
  gst_base_sink_set_sync (GST_BASE_SINK (self), FALSE);
}
