/* conymqttsink's Home Assistant MQTT discovery (see gstconymqttha.h).
 *
 * SPDX-License-Identifier: LGPL-2.1-or-later
 */
#include "gstconymqttha.h"

#include "cony/labelgroups.h"

#include <json-glib/json-glib.h>
#include <string.h>

#define STATE_ROOT "cony"

typedef struct {
  gchar *name;        /* as the records spell it */
  gchar *slug;        /* in topics and ids */
  gboolean open;      /* its segment is open (onset seen, no offset yet) */
  gboolean published; /* its state was published on this connection */
  gboolean published_on;
} HaLabel;

struct _GstConyMqttHa {
  gchar *prefix, *node, *base, *availability;
  GPtrArray *labels; /* HaLabel* */
  gchar *current;    /* the top label of the last result; NULL before one or after EOS */
  gchar *current_published;
  gboolean configs_due;
};

void
gst_cony_mqtt_ha_message_free (gpointer message)
{
  GstConyMqttHaMessage *m = message;
  g_free (m->topic);
  g_free (m->payload);
  g_free (m);
}

static void
ha_label_free (gpointer data)
{
  HaLabel *l = data;
  g_free (l->name);
  g_free (l->slug);
  g_free (l);
}

/* "Smoke detector, smoke alarm" -> "smoke_detector_smoke_alarm" */
static gchar *
ha_slug (const gchar *name)
{
  GString *s = g_string_new (NULL);
  for (const gchar *p = name; *p; p++) {
    if (g_ascii_isalnum (*p))
      g_string_append_c (s, g_ascii_tolower (*p));
    else if (s->len > 0 && s->str[s->len - 1] != '_')
      g_string_append_c (s, '_');
  }
  while (s->len > 0 && s->str[s->len - 1] == '_')
    g_string_truncate (s, s->len - 1);
  return g_string_free (s, FALSE);
}

GStrv
gst_cony_mqtt_ha_read_groups (const gchar *path, GError **error)
{
  ConyLabelGroups *groups = cony_label_groups_load (path, NULL, 0, error);
  if (groups == NULL)
    return NULL;
  GStrv names = g_new0 (gchar *, groups->n_groups + 1);
  for (guint i = 0; i < groups->n_groups; i++)
    names[i] = g_strdup (groups->groups[i].name);
  cony_label_groups_free (groups);
  return names;
}

static gboolean
ha_valid_node_id (const gchar *id)
{
  if (id == NULL || *id == '\0')
    return FALSE;
  for (const gchar *p = id; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_' && *p != '-')
      return FALSE;
  return TRUE;
}

/* Adds @name (trimmed; empty ones skipped); FALSE with @error when its slug
 * is empty or another label's. */
static gboolean
ha_add_label (GstConyMqttHa *ha, const gchar *name, GError **error)
{
  gchar *trimmed = g_strstrip (g_strdup (name));
  if (*trimmed == '\0') {
    g_free (trimmed);
    return TRUE;
  }
  gchar *slug = ha_slug (trimmed);
  const gchar *clash = NULL;
  for (guint i = 0; i < ha->labels->len; i++) {
    HaLabel *l = g_ptr_array_index (ha->labels, i);
    if (strcmp (l->name, trimmed) == 0) { /* in ha-labels and the groups file */
      g_free (slug);
      g_free (trimmed);
      return TRUE;
    }
    if (strcmp (l->slug, slug) == 0)
      clash = l->name;
  }
  if (*slug == '\0' || clash != NULL) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        *slug == '\0' ? "label '%s' has no letter or digit for its topic"
                      : "labels '%s' and '%s' would share the topic and id '%s'",
        trimmed, clash, slug);
    g_free (slug);
    g_free (trimmed);
    return FALSE;
  }
  HaLabel *l = g_new0 (HaLabel, 1);
  l->name = trimmed;
  l->slug = slug;
  g_ptr_array_add (ha->labels, l);
  return TRUE;
}

GstConyMqttHa *
gst_cony_mqtt_ha_new (const gchar *prefix, const gchar *node_id, const gchar *labels,
    const gchar *groups_file, GError **error)
{
  if (prefix == NULL || *prefix == '\0' || strpbrk (prefix, "+#") != NULL
      || g_str_has_suffix (prefix, "/")) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "ha-prefix '%s' is not a topic prefix (no + or #, no trailing /)", prefix ? prefix : "");
    return NULL;
  }
  if (!ha_valid_node_id (node_id)) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "ha-node-id '%s' must be letters, digits, _ or - only", node_id ? node_id : "");
    return NULL;
  }
  GstConyMqttHa *ha = g_new0 (GstConyMqttHa, 1);
  ha->prefix = g_strdup (prefix);
  ha->node = g_strdup (node_id);
  ha->base = g_strdup_printf (STATE_ROOT "/%s", node_id);
  ha->availability = g_strdup_printf ("%s/availability", ha->base);
  ha->labels = g_ptr_array_new_with_free_func (ha_label_free);
  ha->configs_due = TRUE;

  GStrv names = labels ? g_strsplit (labels, ",", -1) : NULL;
  gboolean ok = TRUE;
  for (guint i = 0; names && names[i] && ok; i++)
    ok = ha_add_label (ha, names[i], error);
  g_strfreev (names);
  if (ok && groups_file != NULL) {
    GError *err = NULL;
    names = gst_cony_mqtt_ha_read_groups (groups_file, &err);
    if (names == NULL) {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "ha-groups-file: %s", err->message);
      g_error_free (err);
      ok = FALSE;
    }
    for (guint i = 0; names && names[i] && ok; i++)
      ok = ha_add_label (ha, names[i], error);
    g_strfreev (names);
  }
  if (!ok) {
    gst_cony_mqtt_ha_free (ha);
    return NULL;
  }
  return ha;
}

void
gst_cony_mqtt_ha_free (GstConyMqttHa *ha)
{
  if (ha == NULL)
    return;
  g_free (ha->prefix);
  g_free (ha->node);
  g_free (ha->base);
  g_free (ha->availability);
  g_free (ha->current);
  g_free (ha->current_published);
  g_ptr_array_unref (ha->labels);
  g_free (ha);
}

const gchar *
gst_cony_mqtt_ha_availability_topic (GstConyMqttHa *ha)
{
  return ha->availability;
}

void
gst_cony_mqtt_ha_reset (GstConyMqttHa *ha)
{
  ha->configs_due = TRUE;
  g_clear_pointer (&ha->current_published, g_free);
  for (guint i = 0; i < ha->labels->len; i++)
    ((HaLabel *) g_ptr_array_index (ha->labels, i))->published = FALSE;
}

static HaLabel *
ha_find (GstConyMqttHa *ha, const gchar *name)
{
  for (guint i = 0; name && i < ha->labels->len; i++) {
    HaLabel *l = g_ptr_array_index (ha->labels, i);
    if (strcmp (l->name, name) == 0)
      return l;
  }
  return NULL;
}

/* @member of @o when it is a string, else NULL. */
static const gchar *
ha_string (JsonObject *o, const gchar *member)
{
  JsonNode *n = json_object_get_member (o, member);
  return n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
      ? json_node_get_string (n)
      : NULL;
}

/* The onsets and offsets of a record's "events". */
static void
ha_apply_events (GstConyMqttHa *ha, JsonObject *record)
{
  JsonNode *events = json_object_get_member (record, "events");
  if (events == NULL || !JSON_NODE_HOLDS_ARRAY (events))
    return;
  JsonArray *a = json_node_get_array (events);
  for (guint i = 0; i < json_array_get_length (a); i++) {
    JsonNode *n = json_array_get_element (a, i);
    if (!JSON_NODE_HOLDS_OBJECT (n))
      continue;
    JsonObject *e = json_node_get_object (n);
    HaLabel *l = ha_find (ha, ha_string (e, "label"));
    if (l != NULL)
      l->open = g_strcmp0 (ha_string (e, "event"), "onset") == 0;
  }
}

gboolean
gst_cony_mqtt_ha_update (GstConyMqttHa *ha, const gchar *data, gsize len, GError **error)
{
  JsonParser *parser = json_parser_new ();
  gboolean ok = json_parser_load_from_data (parser, data, (gssize) len, error);
  JsonNode *root = ok ? json_parser_get_root (parser) : NULL;
  JsonObject *record = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  const gchar *type = record ? ha_string (record, "type") : NULL;
  if (ok && g_strcmp0 (type, "result") == 0) {
    g_free (ha->current);
    ha->current = g_strdup (ha_string (record, "label"));
    ha_apply_events (ha, record);
  } else if (ok && g_strcmp0 (type, "eos") == 0) {
    ha_apply_events (ha, record);
    g_clear_pointer (&ha->current, g_free);
    for (guint i = 0; i < ha->labels->len; i++)
      ((HaLabel *) g_ptr_array_index (ha->labels, i))->open = FALSE;
  } else if (ok && g_strcmp0 (type, "stream") != 0) {
    g_set_error (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
        "not a conyjson record (no \"type\" of stream, result or eos)");
    ok = FALSE;
  }
  g_object_unref (parser);
  return ok;
}

static void
ha_due (GPtrArray *out, gchar *topic, gchar *payload)
{
  GstConyMqttHaMessage *m = g_new (GstConyMqttHaMessage, 1);
  m->topic = topic;
  m->payload = payload;
  g_ptr_array_add (out, m);
}

/* One entity's discovery config: what Home Assistant's MQTT integration
 * reads (name, unique_id, state_topic, availability, device). */
static gchar *
ha_config (GstConyMqttHa *ha, const gchar *name, const gchar *object, const gchar *state_topic,
    gboolean binary)
{
  JsonBuilder *b = json_builder_new ();
  gchar *id = g_strdup_printf ("%s_%s", ha->node, object);
  gchar *device_id = g_strdup_printf ("gst_cony_%s", ha->node);
  gchar *device_name = g_strdup_printf ("gst-cony %s", ha->node);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, name);
  json_builder_set_member_name (b, "unique_id");
  json_builder_add_string_value (b, id);
  json_builder_set_member_name (b, "object_id");
  json_builder_add_string_value (b, id);
  json_builder_set_member_name (b, "state_topic");
  json_builder_add_string_value (b, state_topic);
  json_builder_set_member_name (b, "availability_topic");
  json_builder_add_string_value (b, ha->availability);
  json_builder_set_member_name (b, "payload_available");
  json_builder_add_string_value (b, GST_CONY_MQTT_HA_ONLINE);
  json_builder_set_member_name (b, "payload_not_available");
  json_builder_add_string_value (b, GST_CONY_MQTT_HA_OFFLINE);
  if (binary) {
    json_builder_set_member_name (b, "payload_on");
    json_builder_add_string_value (b, "ON");
    json_builder_set_member_name (b, "payload_off");
    json_builder_add_string_value (b, "OFF");
    json_builder_set_member_name (b, "device_class");
    json_builder_add_string_value (b, "sound");
  } else {
    json_builder_set_member_name (b, "icon");
    json_builder_add_string_value (b, "mdi:ear-hearing");
  }
  json_builder_set_member_name (b, "device");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "identifiers");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, device_id);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, device_name);
  json_builder_set_member_name (b, "manufacturer");
  json_builder_add_string_value (b, "gst-cony");
  json_builder_set_member_name (b, "model");
  json_builder_add_string_value (b, "conymqttsink");
  json_builder_end_object (b);
  json_builder_end_object (b);
  JsonNode *root = json_builder_get_root (b);
  gchar *text = json_to_string (root, FALSE);
  json_node_unref (root);
  g_object_unref (b);
  g_free (id);
  g_free (device_id);
  g_free (device_name);
  return text;
}

static gchar *
ha_label_topic (GstConyMqttHa *ha, HaLabel *l)
{
  return g_strdup_printf ("%s/labels/%s", ha->base, l->slug);
}

static void
ha_configs_due (GstConyMqttHa *ha, GPtrArray *out)
{
  gchar *state = g_strdup_printf ("%s/label", ha->base);
  ha_due (out, g_strdup_printf ("%s/sensor/%s/label/config", ha->prefix, ha->node),
      ha_config (ha, "Label", "label", state, FALSE));
  g_free (state);
  for (guint i = 0; i < ha->labels->len; i++) {
    HaLabel *l = g_ptr_array_index (ha->labels, i);
    gchar *topic = ha_label_topic (ha, l);
    ha_due (out, g_strdup_printf ("%s/binary_sensor/%s/%s/config", ha->prefix, ha->node, l->slug),
        ha_config (ha, l->name, l->slug, topic, TRUE));
    g_free (topic);
  }
  ha_due (out, g_strdup (ha->availability), g_strdup (GST_CONY_MQTT_HA_ONLINE));
}

GPtrArray *
gst_cony_mqtt_ha_take_due (GstConyMqttHa *ha)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (gst_cony_mqtt_ha_message_free);
  if (ha->configs_due)
    ha_configs_due (ha, out);
  ha->configs_due = FALSE;
  if (ha->current != NULL && g_strcmp0 (ha->current, ha->current_published) != 0) {
    ha_due (out, g_strdup_printf ("%s/label", ha->base), g_strdup (ha->current));
    g_free (ha->current_published);
    ha->current_published = g_strdup (ha->current);
  }
  /* ON while the label is the top one or its segment is open */
  for (guint i = 0; i < ha->labels->len; i++) {
    HaLabel *l = g_ptr_array_index (ha->labels, i);
    gboolean on = l->open || g_strcmp0 (ha->current, l->name) == 0;
    if (l->published && on == l->published_on)
      continue;
    ha_due (out, ha_label_topic (ha, l), g_strdup (on ? "ON" : "OFF"));
    l->published = TRUE;
    l->published_on = on;
  }
  if (out->len == 0)
    g_clear_pointer (&out, g_ptr_array_unref);
  return out;
}
