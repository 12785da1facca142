/* Multi-head attention stepped one token at a time: every variant of
 * docs/attention.md behind one layer object. This file is the layer (the table of
 * variants, buffers, memory budget, steps); each family of variants has its own file
 * (attention-private.h says which).
 *
 * Layout: projected tokens live in rings of n slots (token τ in slot τ mod n), all
 * heads side by side (head h at columns h·hd … (h+1)·hd). A score is
 * scale·(q·k) with scale = 1/√hd; q, k and landmarks are kept as projected, so fixed
 * landmarks are used exactly as given. */
#include "attention-private.h"
#include "cony/error.h"
#include "linalg.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* The variants, in ConyAttentionVariant's order: adding one is a row here and its
 * functions in its family's file. */
static const ConyAttentionVariantInfo variants[] = {
  [CONY_ATTENTION_REGULAR] = {
      .name = "regular",
      .description = "Regular softmax attention over the window",
      .flags = CONY_VARIANT_RING_Q | CONY_VARIANT_RING_K | CONY_VARIANT_RING_V,
      .windowed = CONY_ATTENTION_REGULAR,
      .emit = cony_windowed_emit,
      .forward = cony_regular_forward,
      .sda_flops = cony_regular_sda_flops,
      .paper_flops = cony_regular_paper_flops,
  },
  [CONY_ATTENTION_CONTINUAL] = {
      .name = "continual",
      .description = "Continual (CoSi/CoRe) attention",
      .flags = CONY_VARIANT_CONTINUAL | CONY_VARIANT_RING_Q_RETRO | CONY_VARIANT_RING_K
          | CONY_VARIANT_RING_V | CONY_VARIANT_QUERY_ROWS_RETRO,
      .windowed = CONY_ATTENTION_REGULAR,
      .advance = cony_continual_advance,
      .emit = cony_continual_emit,
      .sda_flops = cony_continual_sda_flops,
      .paper_flops = cony_continual_paper_flops,
  },
  [CONY_ATTENTION_NYSTROM] = {
      .name = "nystrom",
      .description = "Nystrom, segment-means landmarks",
      .flags = CONY_VARIANT_LANDMARKS | CONY_VARIANT_RING_Q | CONY_VARIANT_RING_K
          | CONY_VARIANT_RING_V,
      .windowed = CONY_ATTENTION_NYSTROM,
      .emit = cony_windowed_emit,
      .forward = cony_nystrom_forward,
      .sda_flops = cony_nystrom_sda_flops,
      .paper_flops = cony_nystrom_paper_flops,
  },
  [CONY_ATTENTION_NYSTROM_FIXED] = {
      .name = "nystrom-fixed",
      .description = "Nystrom, fixed landmarks",
      .flags = CONY_VARIANT_LANDMARKS | CONY_VARIANT_FIXED_LANDMARKS | CONY_VARIANT_RING_Q
          | CONY_VARIANT_RING_K | CONY_VARIANT_RING_V,
      .windowed = CONY_ATTENTION_NYSTROM_FIXED,
      .emit = cony_windowed_emit,
      .forward = cony_nystrom_fixed_forward,
      .sda_flops = cony_nystrom_fixed_sda_flops,
      .paper_flops = cony_nystrom_fixed_paper_flops,
  },
  [CONY_ATTENTION_CONY] = {
      .name = "cony",
      .description = "Continual Nystrom, continual landmarks",
      .flags = CONY_VARIANT_CONTINUAL | CONY_VARIANT_LANDMARKS | CONY_VARIANT_RING_Q_RETRO
          | CONY_VARIANT_RING_K | CONY_VARIANT_RING_V | CONY_VARIANT_LANDMARK_ROWS
          | CONY_VARIANT_SEGMENTS,
      .windowed = CONY_ATTENTION_NYSTROM,
      .advance = cony_cony_advance,
      .emit = cony_cony_emit,
      .reset = cony_cony_reset,
      .state_bytes = cony_cony_state_bytes,
      .sda_flops = cony_cony_sda_flops,
      .paper_flops = cony_cony_paper_flops,
  },
  [CONY_ATTENTION_CONY_FIXED] = {
      .name = "cony-fixed",
      .description = "Continual Nystrom, fixed landmarks",
      .flags = CONY_VARIANT_CONTINUAL | CONY_VARIANT_LANDMARKS | CONY_VARIANT_FIXED_LANDMARKS
          | CONY_VARIANT_RING_V | CONY_VARIANT_LANDMARK_ROWS | CONY_VARIANT_KEY_SCORES,
      .windowed = CONY_ATTENTION_NYSTROM_FIXED,
      .advance = cony_cony_advance,
      .emit = cony_cony_emit,
      .sda_flops = cony_cony_fixed_sda_flops,
      .paper_flops = cony_cony_fixed_paper_flops,
  },
  [CONY_ATTENTION_VCC] = {
      .name = "vcc",
      .description = "VIP-token centric compression (single output)",
      /* keys and values as block sums (attention-vcc.c) instead of rings */
      .flags = CONY_VARIANT_CONTINUAL | CONY_VARIANT_RING_Q_RETRO | CONY_VARIANT_SINGLE_OUTPUT,
      .windowed = CONY_ATTENTION_VCC,
      .advance = cony_vcc_advance,
      .emit = cony_vcc_emit,
      .forward = cony_vcc_windowed,
      .settings = cony_vcc_settings,
      .settings_invalid = cony_vcc_settings_invalid,
      .invalid = cony_vcc_invalid,
      .config_bytes = cony_vcc_config_bytes,
      .create = cony_vcc_create,
      .reset = cony_vcc_reset,
      .state_bytes = cony_vcc_state_bytes,
      .sda_flops = cony_vcc_flops,
  },
};
G_STATIC_ASSERT (G_N_ELEMENTS (variants) == CONY_ATTENTION_N_VARIANTS);

const ConyAttentionVariantInfo *
cony_attention_variant_info (ConyAttentionVariant variant)
{
  g_return_val_if_fail ((unsigned) variant < CONY_ATTENTION_N_VARIANTS, NULL);
  return &variants[variant];
}

static gboolean
has_flag (ConyAttentionVariant v, ConyAttentionVariantFlags flag)
{
  return (unsigned) v < CONY_ATTENTION_N_VARIANTS && (variants[v].flags & flag);
}

int
cony_attention_variant_count (void)
{
  return CONY_ATTENTION_N_VARIANTS;
}

const char *
cony_attention_variant_name (ConyAttentionVariant variant)
{
  return (unsigned) variant < CONY_ATTENTION_N_VARIANTS ? variants[variant].name : "unknown";
}

char *
cony_attention_variant_names (void)
{
  GString *s = g_string_new (NULL);
  for (int i = 0; i < CONY_ATTENTION_N_VARIANTS; i++)
    g_string_append_printf (s, "%s%s",
        i == 0                                   ? ""
            : i == CONY_ATTENTION_N_VARIANTS - 1 ? " or "
                                                 : ", ",
        variants[i].name);
  return g_string_free (s, FALSE);
}

const char *
cony_attention_variant_description (ConyAttentionVariant variant)
{
  return (unsigned) variant < CONY_ATTENTION_N_VARIANTS ? variants[variant].description : "unknown";
}

gboolean
cony_attention_variant_from_name (const char *name, ConyAttentionVariant *variant)
{
  for (int i = 0; i < CONY_ATTENTION_N_VARIANTS; i++)
    if (g_strcmp0 (name, variants[i].name) == 0) {
      *variant = i;
      return TRUE;
    }
  return FALSE;
}

gboolean
cony_attention_variant_is_continual (ConyAttentionVariant v)
{
  return has_flag (v, CONY_VARIANT_CONTINUAL);
}

gboolean
cony_attention_variant_uses_fixed_landmarks (ConyAttentionVariant v)
{
  return has_flag (v, CONY_VARIANT_FIXED_LANDMARKS);
}

ConyAttentionVariant
cony_attention_variant_windowed (ConyAttentionVariant v)
{
  return (unsigned) v < CONY_ATTENTION_N_VARIANTS ? variants[v].windowed : v;
}

gboolean
cony_attention_variant_single_output_only (ConyAttentionVariant v)
{
  return has_flag (v, CONY_VARIANT_SINGLE_OUTPUT);
}

static gboolean
uses_landmarks (ConyAttentionVariant v)
{
  return has_flag (v, CONY_VARIANT_LANDMARKS);
}

/* ------------------------------------------------------------------------ */
/* The variants' own settings: each row lists its keys; their values live in the
 * config's settings blob, in the row's order. */

int
cony_attention_variant_n_settings (ConyAttentionVariant v)
{
  if ((unsigned) v >= CONY_ATTENTION_N_VARIANTS || !variants[v].settings)
    return 0;
  int n = 0;
  while (variants[v].settings[n].key)
    n++;
  g_assert (n <= CONY_ATTENTION_MAX_SETTINGS);
  return n;
}

const ConyAttentionSetting *
cony_attention_variant_setting (ConyAttentionVariant v, int i)
{
  return i >= 0 && i < cony_attention_variant_n_settings (v) ? &variants[v].settings[i] : NULL;
}

int
cony_attention_setting (const ConyAttentionConfig *c, int i)
{
  const ConyAttentionSetting *s = cony_attention_variant_setting (c->variant, i);
  g_return_val_if_fail (s != NULL, 0);
  return c->settings[i] ? c->settings[i] : s->def;
}

/* Index of @key among the settings of @v, or -1. */
static int
setting_index (ConyAttentionVariant v, const char *key)
{
  for (int i = 0; i < cony_attention_variant_n_settings (v); i++)
    if (g_strcmp0 (variants[v].settings[i].key, key) == 0)
      return i;
  return -1;
}

gboolean
cony_attention_config_set (ConyAttentionConfig *c, const char *key, int value)
{
  int i = setting_index (c->variant, key);
  if (i < 0)
    return FALSE;
  c->settings[i] = value;
  return TRUE;
}

gboolean
cony_attention_config_get (const ConyAttentionConfig *c, const char *key, int *value)
{
  int i = setting_index (c->variant, key);
  if (i < 0)
    return FALSE;
  *value = cony_attention_setting (c, i);
  return TRUE;
}

const char *
cony_attention_config_settings_invalid (const ConyAttentionConfig *c)
{
  if ((unsigned) c->variant >= CONY_ATTENTION_N_VARIANTS || !variants[c->variant].settings_invalid)
    return NULL;
  return variants[c->variant].settings_invalid (c);
}

/* Unset settings of @c take their defaults. */
static void
resolve_settings (ConyAttentionConfig *c)
{
  for (int i = 0; i < cony_attention_variant_n_settings (c->variant); i++)
    c->settings[i] = cony_attention_setting (c, i);
}

/* ------------------------------------------------------------------------ */
/* The layer. */

/* Which windows a variant must keep between steps: its real state (docs/attention.md,
 * Variants). */
static gboolean
keeps_q (const ConyAttentionConfig *c)
{
  return has_flag (c->variant, CONY_VARIANT_RING_Q)
      || (c->retroactive && has_flag (c->variant, CONY_VARIANT_RING_Q_RETRO));
}

int
cony_attention_output_rows (const ConyAttention *a)
{
  return a->cfg.retroactive ? a->n : 1;
}

const ConyAttentionConfig *
cony_attention_get_config (const ConyAttention *a)
{
  return &a->cfg;
}

guint64
cony_attention_steps (const ConyAttention *a)
{
  return a->t;
}

void
cony_attention_free (ConyAttention *a)
{
  if (!a)
    return;
  cony_gemv_matrix_clear (&a->g_in);
  cony_gemv_matrix_clear (&a->g_out);
  void *buffers[] = { a->w_in, a->b_in, a->w_out, a->b_out, a->qkv, a->heads_out, a->ring_q,
    a->ring_k, a->ring_v, a->k_old, a->v_old, a->win_q, a->win_k, a->win_v, a->win_out, a->queries,
    a->scratch, a->scratch_d, a->row_offset, a->row_phi, a->row_acc, a->lm_q, a->lm_k, a->pinv,
    a->sk, a->rcache, a->seg_q, a->seg_k };
  for (guint i = 0; i < G_N_ELEMENTS (buffers); i++)
    g_free (buffers[i]);
  cony_vcc_free (a->vcc);
  g_free (a);
}

void
cony_attention_reset (ConyAttention *a)
{
  a->t = 0;
  a->steps_since_resync = 0;
  if (a->n_rows) {
    gsize rows = (gsize) a->heads * a->n_rows;
    for (gsize i = 0; i < rows; i++)
      a->row_offset[i] = -INFINITY;
    memset (a->row_phi, 0, sizeof (double) * rows);
    memset (a->row_acc, 0, sizeof (double) * rows * a->hd);
  }
  if (a->info->reset)
    a->info->reset (a);
}

static gboolean
check_finite (const float *x, gsize count, const char *what, GError **error)
{
  for (gsize i = 0; i < count; i++)
    if (!isfinite (x[i])) {
      g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
          "attention weights: %s holds a non-finite value at flat index %" G_GSIZE_FORMAT, what, i);
      return FALSE;
    }
  return TRUE;
}

static gboolean
validate (const ConyAttentionConfig *c, const ConyAttentionWeights *w, GError **error)
{
  const char *why = NULL;
  if ((unsigned) c->variant >= CONY_ATTENTION_N_VARIANTS)
    why = "unknown attention variant";
  else if (c->d < 1 || c->heads < 1 || c->d % c->heads != 0)
    why = "d must be a positive multiple of heads";
  else if (c->window < 1)
    why = "window must be at least 1";
  else if (uses_landmarks (c->variant) && (c->landmarks < 1 || c->landmarks > c->window))
    why = "landmarks must be between 1 and the window size";
  else if (c->pinv != CONY_PINV_EXACT && c->pinv != CONY_PINV_ITERATIVE)
    why = "unknown pseudo-inverse method";
  else if (c->pinv_iterations < 0 || c->resync_interval < 0)
    why = "pinv iterations and resync interval must not be negative";
  else if (c->d > CONY_ATTENTION_MAX_DIM || c->window > CONY_ATTENTION_MAX_WINDOW
      || (uses_landmarks (c->variant) && c->landmarks > CONY_ATTENTION_MAX_LANDMARKS))
    why =
        "d, window or landmarks above the most a layer serves (d 16384, window 16384, landmarks 128)";
  else if (variants[c->variant].invalid)
    why = variants[c->variant].invalid (c);
  if (!why && cony_attention_config_bytes (c) <= CONY_MEMORY_BUDGET) {
    if (!w || !w->in_proj_weight || !w->in_proj_bias || !w->out_proj_weight || !w->out_proj_bias)
      why = "in_proj_weight, in_proj_bias, out_proj.weight and out_proj.bias are required";
    else if (cony_attention_variant_uses_fixed_landmarks (c->variant)
        && (!w->q_landmarks || !w->k_landmarks))
      why = "fixed-landmark variants need q_landmarks and k_landmarks (heads, m, head_dim)";
  }
  if (why) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): %s",
        cony_attention_variant_name (c->variant), c->d, c->heads, c->window, c->landmarks, why);
    return FALSE;
  }
  gsize bytes = cony_attention_config_bytes (c);
  if (bytes > CONY_MEMORY_BUDGET) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): would need %" G_GSIZE_FORMAT
        " bytes (%.1f MiB) of state and scratch, more than the budget of %" G_GSIZE_FORMAT
        " bytes: use a smaller window",
        cony_attention_variant_name (c->variant), c->d, c->heads, c->window, c->landmarks, bytes,
        bytes / 1048576.0, (gsize) CONY_MEMORY_BUDGET);
    return FALSE;
  }
  gsize d = c->d;
  gsize lm = cony_attention_variant_uses_fixed_landmarks (c->variant) ? (gsize) c->landmarks * d
                                                                      : 0;
  return check_finite (w->in_proj_weight, 3 * d * d, "in_proj_weight", error)
      && check_finite (w->in_proj_bias, 3 * d, "in_proj_bias", error)
      && check_finite (w->out_proj_weight, d * d, "out_proj.weight", error)
      && check_finite (w->out_proj_bias, d, "out_proj.bias", error)
      && (!lm
          || (check_finite (w->q_landmarks, lm, "q_landmarks", error)
              && check_finite (w->k_landmarks, lm, "k_landmarks", error)));
}

/* Sets the sizes of a layer from its (validated) config. */
static void
set_sizes (ConyAttention *a, const ConyAttentionConfig *c)
{
  a->cfg = *c;
  a->info = &variants[c->variant];
  if (a->cfg.pinv_iterations == 0)
    a->cfg.pinv_iterations = 6;
  resolve_settings (&a->cfg);
  a->d = c->d;
  a->heads = c->heads;
  a->hd = c->d / c->heads;
  a->n = c->window;
  a->m = uses_landmarks (c->variant) ? c->landmarks : 0;
  a->scale = 1.0f / sqrtf ((float) a->hd);
  a->n_rows = has_flag (c->variant, CONY_VARIANT_LANDMARK_ROWS)                ? a->m
      : has_flag (c->variant, CONY_VARIANT_QUERY_ROWS_RETRO) && c->retroactive ? a->n
                                                                               : 0;
}

/* One buffer of a layer: where it goes, the size of an element, how many (0: none). */
typedef struct {
  void **dest;
  gsize elem, count;
} Buffer;

#define MAX_BUFFERS 32

/* Every buffer of a layer sized by set_sizes(): cony_attention_new() allocates exactly
 * these, and the memory budget is checked on their sum first. Returns the count. */
static int
layer_buffers (ConyAttention *a, Buffer *b)
{
  const ConyAttentionConfig *c = &a->cfg;
  gsize d = a->d, n = a->n, H = a->heads, m = a->m, hd = a->hd, nd = n * d, F = sizeof (float),
        D = sizeof (double);
  gboolean landmark_rows = has_flag (c->variant, CONY_VARIANT_LANDMARK_ROWS);
  gboolean segments = has_flag (c->variant, CONY_VARIANT_SEGMENTS);
  /* float: REGULAR_ROW_CHUNK rows of n scores of the regular layer, landmark means,
   * one query's scores of every head (attention-query.c);
   * double: the Nyström product (Γ⁺, ml×w kernel, ml×hd products), CoRe scores, N of
   * every head. */
  a->scratch_len = MAX (MAX (n * MIN (n, (gsize) REGULAR_ROW_CHUNK), 2 * m * hd),
                       MAX (2 * H * m, cony_attn_query_scratch (H, n, d)))
      + n;
  gsize dlen = m * m + m * n + 2 * m * hd + m;
  gsize rows = H * a->n_rows, per_slot = landmark_rows ? n * H * m : 0, lm = m ? H * m * hd : 0;
  Buffer list[] = {
    { (void **) &a->w_in, F, 3 * d * d },
    { (void **) &a->b_in, F, 3 * d },
    { (void **) &a->w_out, F, d * d },
    { (void **) &a->b_out, F, d },
    { (void **) &a->qkv, F, 3 * d },
    { (void **) &a->heads_out, F, nd },
    { (void **) &a->ring_q, F, keeps_q (c) ? nd : 0 },
    { (void **) &a->ring_k, F, has_flag (c->variant, CONY_VARIANT_RING_K) ? nd : 0 },
    { (void **) &a->ring_v, F, has_flag (c->variant, CONY_VARIANT_RING_V) ? nd : 0 },
    { (void **) &a->k_old, F, d },
    { (void **) &a->v_old, F, d },
    { (void **) &a->win_q, F, nd },
    { (void **) &a->win_k, F, nd },
    { (void **) &a->win_v, F, nd },
    { (void **) &a->win_out, F, nd },
    { (void **) &a->queries, F, nd },
    { (void **) &a->scratch, F, a->scratch_len },
    { (void **) &a->scratch_d, D, MAX (MAX (dlen, H * m * hd), n) + 1 },
    { (void **) &a->row_offset, D, rows },
    { (void **) &a->row_phi, D, rows },
    { (void **) &a->row_acc, D, rows * hd },
    { (void **) &a->lm_q, F, lm },
    { (void **) &a->lm_k, F, lm },
    { (void **) &a->pinv, D, H * m * m },
    { (void **) &a->sk, D, has_flag (c->variant, CONY_VARIANT_KEY_SCORES) ? per_slot : 0 },
    { (void **) &a->rcache, D, c->retroactive ? per_slot : 0 },
    { (void **) &a->seg_q, D, segments ? d : 0 },
    { (void **) &a->seg_k, D, segments ? d : 0 },
  };
  G_STATIC_ASSERT (G_N_ELEMENTS (list) <= MAX_BUFFERS);
  memcpy (b, list, sizeof list);
  return G_N_ELEMENTS (list);
}

gsize
cony_attention_config_bytes (const ConyAttentionConfig *config)
{
  const ConyAttentionConfig *c = config;
  /* sizes the layer refuses anyway: no figure (and no division by zero heads) */
  if (c->d < 1 || c->heads < 1 || c->d % c->heads != 0 || c->window < 1
      || c->d > CONY_ATTENTION_MAX_DIM || c->window > CONY_ATTENTION_MAX_WINDOW
      || (uses_landmarks (c->variant)
          && (c->landmarks < 1 || c->landmarks > CONY_ATTENTION_MAX_LANDMARKS)))
    return G_MAXSIZE;
  ConyAttention a = { 0 };
  Buffer b[MAX_BUFFERS];
  set_sizes (&a, config);
  int count = layer_buffers (&a, b);
  gsize bytes = sizeof (ConyAttention);
  for (int i = 0; i < count; i++)
    bytes += b[i].elem * b[i].count;
  if (a.info->config_bytes)
    bytes += a.info->config_bytes (&a.cfg);
  return bytes;
}

/* Allocates every buffer of layer_buffers() zeroed, with g_try_malloc0: FALSE when one
 * does not fit in memory (the budget was checked, the machine may still be short). */
static gboolean
allocate_buffers (ConyAttention *a)
{
  Buffer b[MAX_BUFFERS];
  int count = layer_buffers (a, b);
  for (int i = 0; i < count; i++)
    if (b[i].count && !(*b[i].dest = g_try_malloc0 (b[i].elem * b[i].count)))
      return FALSE;
  return TRUE;
}

ConyAttention *
cony_attention_new (const ConyAttentionConfig *config, const ConyAttentionWeights *w,
    GError **error)
{
  if (!validate (config, w, error))
    return NULL;
  g_autoptr (ConyAttention) a = g_new0 (ConyAttention, 1);
  set_sizes (a, config);
  const ConyAttentionConfig *c = &a->cfg;
  int d = a->d, H = a->heads, m = a->m, hd = a->hd;
  if (!allocate_buffers (a)) {
    g_set_error (error, CONY_ERROR, CONY_ERROR_INVALID,
        "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): out of memory for %" G_GSIZE_FORMAT
        " bytes of state and scratch",
        cony_attention_variant_name (c->variant), d, H, c->window, c->landmarks,
        cony_attention_config_bytes (c));
    return NULL;
  }
  memcpy (a->w_in, w->in_proj_weight, sizeof (float) * 3 * d * d);
  memcpy (a->b_in, w->in_proj_bias, sizeof (float) * 3 * d);
  memcpy (a->w_out, w->out_proj_weight, sizeof (float) * d * d);
  memcpy (a->b_out, w->out_proj_bias, sizeof (float) * d);
  cony_gemv_matrix_init (&a->g_in, a->w_in, 3 * d, d, cony_gemv_f16_enabled ());
  cony_gemv_matrix_init (&a->g_out, a->w_out, d, d, cony_gemv_f16_enabled ());
  a->ml = m;
  if (a->info->create)
    a->info->create (a); /* its bytes are in the budget checked by validate() */
  if (cony_attention_variant_uses_fixed_landmarks (c->variant)) {
    gsize lm = (gsize) H * m * hd;
    memcpy (a->lm_q, w->q_landmarks, sizeof (float) * lm);
    memcpy (a->lm_k, w->k_landmarks, sizeof (float) * lm);
    /* Computed once for the whole stream: extreme (finite) landmarks that give no
     * finite pseudo-inverse are refused here rather than spoiling every step. */
    for (int h = 0; h < H; h++)
      if (!cony_attn_landmark_pinv (a, a->lm_q + (gsize) h * m * hd, a->lm_k + (gsize) h * m * hd,
              m, a->pinv + (gsize) h * m * m)) {
        g_set_error (error, CONY_ERROR, CONY_ERROR_NUMERIC,
            "attention (%s, d=%d, heads=%d, window=%d, landmarks=%d): the fixed landmarks of "
            "head %d give no finite pseudo-inverse of their %dx%d kernel",
            cony_attention_variant_name (c->variant), d, H, c->window, m, h, m, m);
        return NULL;
      }
  }
  cony_attention_reset (a);
  return g_steal_pointer (&a);
}

void
cony_attention_project (ConyAttention *a, const float *x)
{
  memcpy (a->qkv, a->b_in, sizeof (float) * 3 * a->d);
  cony_gemv (&a->g_in, x, a->qkv);
}

/* Saves the token leaving slot t mod n, then writes the new one there. */
static void
push_token (ConyAttention *a)
{
  gsize d = a->d, at = (a->t % a->n) * d;
  float *rings[3] = { a->ring_q, a->ring_k, a->ring_v };
  if (a->ring_k)
    memcpy (a->k_old, a->ring_k + at, sizeof (float) * d);
  memcpy (a->v_old, a->ring_v + at, sizeof (float) * d);
  for (int i = 0; i < 3; i++)
    if (rings[i])
      memcpy (rings[i] + at, a->qkv + i * d, sizeof (float) * d);
}

/* Makes the token in a->qkv part of the state: into the rings, then the variant's own. */
static void
advance (ConyAttention *a)
{
  if (a->ring_v)
    push_token (a);
  if (a->info->advance)
    a->info->advance (a);
  a->t++;
}

void
cony_attention_core_step (ConyAttention *a)
{
  advance (a);
  a->info->emit (a, a->qkv, 1);
}

float *
cony_attention_qkv_buffer (ConyAttention *a)
{
  return a->qkv;
}

/* out = heads · W_outᵀ + b for @rows rows starting at @first; rows before it are 0. */
static void
out_project (const ConyAttention *a, const float *heads, int first, int rows, float *out)
{
  int d = a->d;
  memset (out, 0, sizeof (float) * first * d);
  float *o = out + (gsize) first * d;
  for (int i = 0; i < rows; i++)
    memcpy (o + (gsize) i * d, a->b_out, sizeof (float) * d);
  if (rows == 1) /* a one-row sgemm would spend most of its time packing W_out */
    cony_gemv (&a->g_out, heads + (gsize) first * d, o);
  else
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, d, d, 1.0f,
        heads + (gsize) first * d, d, a->w_out, d, 1.0f, o, d);
}

void
cony_attention_step (ConyAttention *a, const float *x, float *out)
{
  cony_attention_project (a, x);
  cony_attention_core_step (a);
  if (!a->cfg.retroactive) {
    out_project (a, a->heads_out, 0, 1, out);
    return;
  }
  int w = cony_attn_window_fill (a);
  out_project (a, a->heads_out, a->n - w, w, out);
}

void
cony_attention_step_tokens (ConyAttention *a, const float *x, int count, float *out)
{
  g_return_if_fail (count >= 1 && count <= a->n);
  int d = a->d;
  for (int i = 0; i < count; i++) {
    cony_attention_project (a, x + (gsize) i * d);
    memcpy (a->queries + (gsize) i * d, a->qkv, sizeof (float) * d);
    advance (a);
  }
  a->info->emit (a, a->queries, count);
  if (!a->cfg.retroactive) {
    out_project (a, a->heads_out, 0, count, out);
    return;
  }
  int w = cony_attn_window_fill (a);
  out_project (a, a->heads_out, a->n - w, w, out);
}

void
cony_attention_forward_window (ConyAttention *a, const float *x, int w, float *out)
{
  g_return_if_fail (w >= 1 && w <= a->n);
  int d = a->d;
  /* Project the window: rows of [q | k | v], then split into the window buffers. */
  for (int i = 0; i < w; i++) {
    cony_attention_project (a, x + (gsize) i * d);
    memcpy (a->win_q + (gsize) i * d, a->qkv, sizeof (float) * d);
    memcpy (a->win_k + (gsize) i * d, a->qkv + d, sizeof (float) * d);
    memcpy (a->win_v + (gsize) i * d, a->qkv + 2 * d, sizeof (float) * d);
  }
  const ConyAttentionVariantInfo *v = &variants[a->info->windowed];
  if (a->cfg.retroactive) {
    int first = a->n - w;
    v->forward (a, w, 0, a->win_out + (gsize) first * d);
    out_project (a, a->win_out, first, w, out);
  } else {
    v->forward (a, w, w - 1, a->win_out);
    out_project (a, a->win_out, 0, 1, out);
  }
}

gsize
cony_attention_state_bytes (const ConyAttention *a)
{
  gsize nd = (gsize) a->n * a->d, f = sizeof (float), bytes = 0;
  bytes += nd * f * ((a->ring_q != NULL) + (a->ring_k != NULL) + (a->ring_v != NULL));
  gsize dbl = sizeof (double), per_slot = (gsize) a->n * a->heads * a->m;
  if (a->n_rows) /* offset, φ and the hd sums of every row */
    bytes += (gsize) a->heads * a->n_rows * dbl * (2 + a->hd);
  if (a->sk)
    bytes += per_slot * dbl;
  if (a->rcache)
    bytes += per_slot * dbl;
  if (a->info->state_bytes)
    bytes += a->info->state_bytes (a);
  return bytes;
}

ConyAttentionFlops
cony_attention_flops (const ConyAttentionConfig *c)
{
  g_return_val_if_fail ((unsigned) c->variant < CONY_ATTENTION_N_VARIANTS,
      (ConyAttentionFlops){ 0 });
  const ConyAttentionVariantInfo *v = &variants[c->variant];
  double n = c->window, d = c->d;
  double rows = c->retroactive ? n : 1;
  return (ConyAttentionFlops){
    .sda = v->sda_flops (c),
    .projections = 3 * d * d + 3 * d + rows * (d * d + d),
    .paper = v->paper_flops ? v->paper_flops (c) : 0,
  };
}
