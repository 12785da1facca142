/* Running exponential sums of attention rows, shared by the continual families
 * (attention-continual.c: CoRe rows; attention-cony.c: landmark rows). Inline: the
 * add/remove pair sits in the per-step loops. */
#pragma once
#include "attention-private.h"
#include "linalg.h"

#include <math.h>
#include <string.h>

G_BEGIN_DECLS

/* A new score this far above a row's offset rescales the row (exp(30) ≈ 1e13 keeps
 * float exponentials and double sums far from overflow). */
#define RESCALE_MARGIN 30.0f
/* A subtraction that leaves less than this fraction of a row's mass means the removed
 * term dominated: the row is rebuilt exactly instead of trusting the difference. */
#define COLLAPSE_FRACTION 1e-6

/* Running exponential sums.
 *
 * A row keeps φ = Σ exp(s_i − c) and acc = Σ exp(s_i − c)·v_i over the tokens it has
 * seen, c being the row's offset. Everything is double: a term removed later is then
 * the added one to ~1e-16, so even a term that dominated the row leaves an accurate
 * remainder; exponent arguments stay below RESCALE_MARGIN, so nothing overflows. */

typedef struct {
  double *offset;
  double *phi;
  double *acc;
} RowSum;

static inline RowSum
row_at (ConyAttention *a, int head, int row)
{
  int i = head * a->n_rows + row;
  return (RowSum){ a->row_offset + i, a->row_phi + i, a->row_acc + (gsize) i * a->hd };
}

/* How a row's terms are computed; a row must use one kind for its whole life. CoRe
 * recomputes a removed term from a fresh score, so it needs the exact double exp; CoNy
 * recomputes it from the stored score with the deterministic fast float exp, which
 * gives back the added term bit for bit while the row offset has not moved. */
typedef enum
{
  TERMS_EXACT,
  TERMS_STORED
} TermKind;

static inline double
term_exp (TermKind kind, double arg)
{
  if (kind == TERMS_EXACT)
    return exp (arg);
  float x = (float) arg;
  cony_exp_batch (&x, 1);
  return x;
}

/* Moves the offset up to @s when @s would exceed it by more than RESCALE_MARGIN;
 * returns the factor applied to the existing terms (1 when nothing moved). */
static G_ALWAYS_INLINE inline double
rowsum_make_room (RowSum r, int hd, double s)
{
  if (!(s > *r.offset + RESCALE_MARGIN))
    return 1.0;
  double factor = isinf (*r.offset) ? 0.0 : exp (*r.offset - s);
  *r.phi *= factor;
  for (int c = 0; c < hd; c++)
    r.acc[c] *= factor;
  *r.offset = s;
  return factor;
}

static G_ALWAYS_INLINE inline void
rowsum_add_term (RowSum r, int hd, double e, const float *restrict v)
{
  *r.phi += e;
  for (int c = 0; c < hd; c++)
    r.acc[c] += e * v[c];
}

/* Adds a token with score @s and value @v, exact kind; returns the added term. */
static inline double
rowsum_add (RowSum r, int hd, double s, const float *restrict v)
{
  rowsum_make_room (r, hd, s);
  double e = term_exp (TERMS_EXACT, s - *r.offset);
  rowsum_add_term (r, hd, e, v);
  return e;
}

/* Removes a term added earlier (@e relative to the current offset). TRUE when the
 * remaining mass is too small to trust: the caller rebuilds the row. */
static G_ALWAYS_INLINE inline gboolean
rowsum_remove (RowSum r, int hd, double e, const float *restrict v)
{
  double before = *r.phi;
  *r.phi -= e;
  for (int c = 0; c < hd; c++)
    r.acc[c] -= e * v[c];
  return !(*r.phi > before * COLLAPSE_FRACTION);
}

/* Recomputes a row exactly from @count scores (stride @ss) and values (stride @vs);
 * writes each term to @e (stride @es) when @e is not NULL. */
static inline void
rowsum_rebuild (RowSum r, int hd, TermKind kind, const double *s, int ss, const float *v, int vs,
    int count, double *e, int es)
{
  double max = -INFINITY;
  for (int i = 0; i < count; i++)
    max = fmax (max, s[(gsize) i * ss]);
  *r.offset = max;
  *r.phi = 0.0;
  memset (r.acc, 0, sizeof (double) * hd);
  for (int i = 0; i < count; i++) {
    double ev = term_exp (kind, s[(gsize) i * ss] - max);
    const float *vi = v + (gsize) i * vs;
    *r.phi += ev;
    for (int c = 0; c < hd; c++)
      r.acc[c] += ev * vi[c];
    if (e)
      e[(gsize) i * es] = ev;
  }
}

/* out = acc / φ */
static inline void
rowsum_normalised (RowSum r, int hd, double *out)
{
  double inv = 1.0 / *r.phi;
  for (int c = 0; c < hd; c++)
    out[c] = r.acc[c] * inv;
}

G_END_DECLS
