/* conymqttsink without a broker (tests/pipelines/test_mqtt_publish.py runs it against a real
 * mosquitto): the streaming thread never waits for the broker, the queue is bounded
 * and what it discards is counted, bad settings are refused at start, and
 * the ranges and defaults of the properties.
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include <gst/check/gstharness.h>
#include <gst/gst.h>

#include <arpa/inet.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gsttestutil.h"

/* A TCP socket listening on 127.0.0.1 that never accepts: connections
 * complete (the kernel's backlog) but no MQTT CONNACK ever comes. With
 * @listening FALSE the port is closed again: connections are refused. */
static int
black_hole (gboolean listening, int *port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  g_assert_cmpint (fd, >=, 0);
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &a, &len), ==, 0);
  *port = ntohs (a.sin_port);
  if (listening) {
    g_assert_cmpint (listen (fd, 16), ==, 0);
    return fd;
  }
  close (fd);
  return -1;
}

static guint64
get_u64 (GstElement *e, const char *prop)
{
  guint64 v;
  g_object_get (e, prop, &v, NULL);
  return v;
}

/* 10 buffers into a sink whose broker is @listening-but-silent or absent,
 * max-queued 3: every push returns at once, 3 queued, 7 dropped. */
static void
check_bounded_queue (gboolean listening)
{
  int port, fd = black_hole (listening, &port);
  GstHarness *h = gst_harness_new_with_element (cony_test_element_new ("conymqttsink", NULL, "host",
                                                    "127.0.0.1", "port", port, "topic", "cony/test",
                                                    "max-queued", 3, "drain-timeout", 0, NULL),
      "sink", NULL);
  GstBus *bus = cony_test_attach_bus (h);
  gst_harness_set_src_caps_str (h, "application/x-json");

  gint64 t0 = g_get_monotonic_time ();
  for (int i = 0; i < 10; i++) {
    gchar *line = g_strdup_printf ("{\"type\":\"result\",\"step\":%d}\n", i);
    g_assert_cmpint (gst_harness_push (h, gst_buffer_new_wrapped (line, strlen (line))), ==,
        GST_FLOW_OK);
  }
  gint64 took = g_get_monotonic_time () - t0;
  /* live-safe: no push waits for the broker (a wait would be seconds) */
  g_assert_cmpint (took, <, 500 * 1000);
  guint queued;
  gboolean connected;
  g_object_get (h->element, "queued", &queued, "connected", &connected, NULL);
  g_assert_cmpuint (queued, ==, 3);
  g_assert_false (connected);
  g_assert_cmpuint (get_u64 (h->element, "dropped"), ==, 7);
  g_assert_cmpuint (get_u64 (h->element, "published"), ==, 0);
  /* one warning for the run of drops (and, refused at once, one for the connection) */
  guint full = 0;
  GstMessage *msg;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_WARNING)) != NULL) {
    GError *err;
    gst_message_parse_warning (msg, &err, NULL);
    full += strstr (err->message, "queue full") != NULL;
    g_error_free (err);
    gst_message_unref (msg);
  }
  g_assert_cmpuint (full, ==, 1);
  cony_test_detach_bus (h, bus);
  gst_harness_teardown (h);
  if (fd >= 0)
    close (fd);
}

static void
test_queue_bound_refused (void)
{
  check_bounded_queue (FALSE);
}

static void
test_queue_bound_silent_broker (void)
{
  check_bounded_queue (TRUE);
}

/* A topic with a wildcard, an empty host, an unknown host, credentials or
 * TLS files that cannot work: the state change fails with an error naming
 * the setting (before any connection: no broker needed). */
static void
test_bad_settings (void)
{
  gchar *not_pem = g_build_filename (g_getenv ("CONY_SOURCE_ROOT"), "meson.build", NULL);
  const char *cases[][3] = {
    { "topic", "cony/#", "valid topic" },
    { "host", "", "host" },
    { "host", "no-such-host.invalid", "Cannot find the MQTT broker" },
    { "password", "secret", "a password needs a username" },
    { "password-file", "/nonexistent/pw", "a password needs a username" },
    { "tls-cert-file", "/nonexistent/c.crt", "needs both tls-cert-file and tls-key-file" },
    { "tls-ca-file", "/nonexistent/ca.crt", "Cannot read the MQTT tls-ca-file" },
    { "tls-ca-file", not_pem, "no PEM certificate in it" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstElement *e = gst_element_factory_make ("conymqttsink", NULL);
    GstBus *bus = gst_bus_new ();
    gst_element_set_bus (e, bus);
    g_object_set (e, cases[i][0], cases[i][1], NULL);
    g_assert_cmpint (gst_element_set_state (e, GST_STATE_PAUSED), ==, GST_STATE_CHANGE_FAILURE);
    GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
    g_assert_nonnull (msg);
    GError *err;
    gchar *dbg;
    gst_message_parse_error (msg, &err, &dbg);
    gchar *all = g_strconcat (err->message, " ", dbg, NULL);
    if (strstr (all, cases[i][2]) == NULL)
      g_error ("%s=%s: error '%s' does not say '%s'", cases[i][0], cases[i][1], all, cases[i][2]);
    g_free (all);
    g_free (dbg);
    g_error_free (err);
    gst_message_unref (msg);
    gst_element_set_state (e, GST_STATE_NULL);
    gst_element_set_bus (e, NULL);
    gst_object_unref (bus);
    gst_object_unref (e);
  }
  g_free (not_pem);
}

/* Defaults and ranges, as docs/elements.md states them. */
static void
test_properties (void)
{
  GstElement *e = gst_element_factory_make ("conymqttsink", NULL);
  gchar *host, *topic;
  gint port, qos;
  guint keepalive, max_queued, drain;
  gboolean sync;
  g_object_get (e, "host", &host, "topic", &topic, "port", &port, "qos", &qos, "keepalive",
      &keepalive, "max-queued", &max_queued, "drain-timeout", &drain, "sync", &sync, NULL);
  g_assert_cmpstr (host, ==, "localhost");
  g_assert_cmpstr (topic, ==, "cony/results");
  g_assert_cmpint (port, ==, 1883);
  g_assert_cmpint (qos, ==, 1);
  g_assert_cmpuint (keepalive, ==, 10);
  g_assert_cmpuint (max_queued, ==, 100000);
  g_assert_cmpuint (drain, ==, 10000);
  g_assert_false (sync);
  gboolean tls, insecure;
  gchar *user;
  g_object_get (e, "tls", &tls, "tls-insecure", &insecure, "username", &user, NULL);
  g_assert_false (tls);
  g_assert_false (insecure); /* the broker's host name is checked unless asked */
  g_assert_null (user);
  gboolean ha;
  gchar *prefix, *node;
  g_object_get (e, "ha-discovery", &ha, "ha-prefix", &prefix, "ha-node-id", &node, NULL);
  g_assert_false (ha);
  g_assert_cmpstr (prefix, ==, "homeassistant");
  g_assert_cmpstr (node, ==, "cony");
  g_free (prefix);
  g_free (node);
  /* the password can be set, never read back */
  GParamSpec *pw = g_object_class_find_property (G_OBJECT_GET_CLASS (e), "password");
  g_assert_true (pw->flags & G_PARAM_WRITABLE);
  g_assert_false (pw->flags & G_PARAM_READABLE);
  g_free (host);
  g_free (topic);
  GParamSpecInt *q = G_PARAM_SPEC_INT (
      g_object_class_find_property (G_OBJECT_GET_CLASS (e), "qos"));
  g_assert_cmpint (q->minimum, ==, 0);
  g_assert_cmpint (q->maximum, ==, 2);
  GParamSpecInt *p = G_PARAM_SPEC_INT (
      g_object_class_find_property (G_OBJECT_GET_CLASS (e), "port"));
  g_assert_cmpint (p->minimum, ==, 1);
  g_assert_cmpint (p->maximum, ==, 65535);
  gst_object_unref (e);
}

int
main (int argc, char **argv)
{
  gst_init (&argc, &argv);
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/mqttsink/queue-bound-refused", test_queue_bound_refused);
  g_test_add_func ("/mqttsink/queue-bound-silent-broker", test_queue_bound_silent_broker);
  g_test_add_func ("/mqttsink/bad-settings", test_bad_settings);
  g_test_add_func ("/mqttsink/properties", test_properties);
  return g_test_run ();
}
