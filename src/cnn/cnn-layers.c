/* CNN engine: the table of layer kinds, one row per LayerKind (see cnn-private.h's
 * CnnLayerClass); each kind's functions are in its family's cnn-layer-*.c. */
#include "cnn-private.h"
#include "cony/cnn.h"

#include <math.h>
#include <string.h>

static const CnnLayerClass *const layer_kinds[] = {
  [LAYER_CONV] = &cnn_layer_conv,
  [LAYER_DW] = &cnn_layer_dw,
  [LAYER_PW] = &cnn_layer_pw,
  [LAYER_ADD] = &cnn_layer_add,
  [LAYER_POOL] = &cnn_layer_pool,
  [LAYER_GAP] = &cnn_layer_gap,
  [LAYER_FC] = &cnn_layer_fc,
  [LAYER_SIGMOID] = &cnn_layer_sigmoid,
  [LAYER_SOFTMAX] = &cnn_layer_softmax,
};
/* A new LayerKind needs its row (tests/libcony/test_mobilenet.c checks each names
 * its own kind, so none is left NULL in between). */
G_STATIC_ASSERT (G_N_ELEMENTS (layer_kinds) == LAYER_KIND_COUNT);

const CnnLayerClass *
cnn_layer_class (LayerKind kind)
{
  return layer_kinds[kind];
}

const char *
cnn_layer_act_name (const Layer *l)
{
  return isfinite (l->relu_max) ? "ReLU6" : "ReLU";
}

guint64
cnn_layer_n_params (const Layer *l)
{
  const CnnLayerClass *k = layer_kinds[l->kind];
  return k->n_weights ? (guint64) k->n_weights (l) + l->out_c : 0;
}

/* An index word ("add@K"): K, which must be a number below @index. */
static gboolean
word_index (const char *word, const CnnLayerWord *w, guint index, guint *add_from)
{
  const char *digits = word + strlen (w->word);
  if (!g_ascii_isdigit (*digits))
    return FALSE;
  char *end = NULL;
  guint64 k = g_ascii_strtoull (digits, &end, 10);
  if (*end != '\0' || k >= index)
    return FALSE;
  *add_from = (guint) k;
  return TRUE;
}

const CnnLayerWord *
cnn_layer_find_word (const char *word, gboolean v2, guint index, LayerKind *kind, guint *add_from)
{
  for (guint i = 0; i < G_N_ELEMENTS (layer_kinds); i++)
    for (const CnnLayerWord *w = layer_kinds[i]->words; w != NULL && w->word != NULL; w++) {
      if (!v2 && w->v2)
        continue;
      if (w->index ? g_str_has_prefix (word, w->word) && word_index (word, w, index, add_from)
                   : strcmp (word, w->word) == 0) {
        *kind = (LayerKind) i;
        return w;
      }
    }
  return NULL;
}

gboolean
cnn_layer_starts_word (const char *layout)
{
  while (g_ascii_isspace (*layout))
    layout++;
  for (guint i = 0; i < G_N_ELEMENTS (layer_kinds); i++)
    for (const CnnLayerWord *w = layer_kinds[i]->words; w != NULL && w->word != NULL; w++)
      if (!w->index && g_str_has_prefix (layout, w->word))
        return TRUE;
  return FALSE;
}

char *
cnn_layer_words (gboolean v2)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (layer_kinds); i++)
    for (const CnnLayerWord *w = layer_kinds[i]->words; w != NULL && w->word != NULL; w++)
      if (v2 || !w->v2)
        g_string_append_printf (s, "%s%s%s", s->len ? ", " : "", w->word,
            w->index ? "K (K < index)" : "");
  return g_string_free (s, FALSE);
}

guint
cony_cnn_n_layer_kinds (void)
{
  return G_N_ELEMENTS (layer_kinds);
}

const char *
cony_cnn_layer_kind_name (guint i)
{
  return i < G_N_ELEMENTS (layer_kinds) ? layer_kinds[i]->name : NULL;
}
