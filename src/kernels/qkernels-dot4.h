/* The product kernel for one 4-byte dot-product instruction (vpdpbusd of AVX-VNNI or
 * AVX512-VNNI, or its exact AVX2 emulation), included by qkernels-avx2.c once per
 * instruction and register width with these defined:
 *   DOT4_NAME(x)   the names of this copy's functions (x with a suffix)
 *   DOT4_TARGET    its target attribute
 *   DOT4_LANES     the int32 lanes of its registers: 8 (256-bit) or 16 (512-bit)
 *   DOT4(a, u, w)  a plus, in each int32 lane, the four products of u's unsigned bytes
 *                  and w's signed bytes: exact (no int16 step, nothing saturates)
 * The panels are packed for it (ConyQGemm's bytes_int8, panels of 2 * DOT4_LANES columns,
 * int16 vectors of DOT4_LANES): every quad whose weights fit int8 is bytes, one DOT4 per
 * row and vector; the others int16, two vpmaddwd per row and vector.
 *
 * A block of QROWS rows keeps 2 * QROWS accumulators (two vectors a row): vpdpbusd's
 * latency is several cycles and a core issues two a cycle, so fewer independent sums
 * leave it waiting (the 8-column kernel with 6 reached 61 % of the measured peak). Per
 * quad two weight loads and QROWS broadcasts feed 2 * QROWS dot products. */

#define DOT4_PANEL (2 * DOT4_LANES)
/* the register operations of that width (512-bit: the requantisation put16 too) */
#if DOT4_LANES == 8
#define DOT4_VEC __m256i
#define DOT4_LOAD(p) _mm256_loadu_si256 ((const void *) (p))
#define DOT4_SET1(v) _mm256_set1_epi32 (v)
#define DOT4_ADD(a, b) _mm256_add_epi32 (a, b)
#define DOT4_MADD(a, b) _mm256_madd_epi16 (a, b)
#else
#define DOT4_VEC __m512i
#define DOT4_LOAD(p) _mm512_loadu_si512 ((const void *) (p))
#define DOT4_SET1(v) _mm512_set1_epi32 (v)
#define DOT4_ADD(a, b) _mm512_add_epi32 (a, b)
#define DOT4_MADD(a, b) _mm512_madd_epi16 (a, b)
#endif

/* Rows @r and @r + 1's accumulators of vector @v (@a, @b) requantised into @out; @two
 * FALSE: row r only. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (store) (const ConyQGemm *g, const ConyQOut *o, guint p, int v, DOT4_VEC a, DOT4_VEC b,
    gboolean two, gint8 *out, gsize ldo)
{
  guint c = DOT4_PANEL * p + DOT4_LANES * v;
  if (c >= g->N)
    return;
#if DOT4_LANES == 8
  put8x2 (g, c, requant8x2 (g, c, a, b), two, out, ldo);
#else
  put16 (o, g->N, c, a, out);
  if (two)
    put16 (o, g->N, c, b, out + ldo);
#endif
}

/* @MR (<= QROWS) rows of panel @p from the prepared inputs @u and @u16 into @out. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (rows) (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16, int MR,
    gint8 *out, gsize ldo)
{
  ConyQPanel pn = cony_qpanel (g, p);
  /* named accumulators (rows past MR unused): with an array gcc copies each one every
   * iteration */
  DOT4_VEC b0 = DOT4_LOAD (pn.bias), b1 = DOT4_LOAD (pn.bias + DOT4_LANES);
  DOT4_VEC a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1;
  DOT4_VEC a30 = b0, a31 = b1, a40 = b0, a41 = b1, a50 = b0, a51 = b1;
  const gint8 *w8 = pn.w8;
  for (guint i = 0; i < pn.n8; i++, w8 += 4 * DOT4_PANEL) {
    DOT4_VEC w0 = DOT4_LOAD (w8), w1 = DOT4_LOAD (w8 + 4 * DOT4_LANES);
    const guint8 *a = u + (gsize) QROWS * 4 * pn.idx[i];
    for (int line = 0; line < 4 * DOT4_PANEL; line += 64)
      _mm_prefetch ((const char *) (w8 + PREFETCH + line), _MM_HINT_T0);
#define DOT4_ROW(r) \
  if ((r) < MR) { \
    gint32 v; \
    memcpy (&v, a + 4 * (r), sizeof v); \
    DOT4_VEC x = DOT4_SET1 (v); \
    a##r##0 = DOT4 (a##r##0, x, w0); \
    a##r##1 = DOT4 (a##r##1, x, w1); \
  }
    DOT4_ROW (0);
    DOT4_ROW (1);
    DOT4_ROW (2);
    DOT4_ROW (3);
    DOT4_ROW (4);
    DOT4_ROW (5);
#undef DOT4_ROW
  }
  const gint16 *w16 = pn.w16;
  for (guint i = pn.n8; i < pn.nq; i++, w16 += 4 * DOT4_PANEL) {
    const gint16 *a = u16 + (gsize) QROWS * 4 * pn.idx[i];
    /* one vector at a time: its two weight vectors and a row's two broadcasts */
#define DOT4_WORD_ROW(r, v) \
  if ((r) < MR) { \
    gint32 x0, x1; \
    memcpy (&x0, a + 4 * (r), sizeof x0); \
    memcpy (&x1, a + 4 * (r) + 2, sizeof x1); \
    a##r##v = DOT4_ADD (a##r##v, \
        DOT4_ADD (DOT4_MADD (DOT4_SET1 (x0), p0), DOT4_MADD (DOT4_SET1 (x1), p1))); \
  }
#define DOT4_WORD(v) \
  { \
    DOT4_VEC p0 = DOT4_LOAD (w16 + 4 * DOT4_LANES * (v)); \
    DOT4_VEC p1 = DOT4_LOAD (w16 + 4 * DOT4_LANES * (v) + 2 * DOT4_LANES); \
    DOT4_WORD_ROW (0, v); \
    DOT4_WORD_ROW (1, v); \
    DOT4_WORD_ROW (2, v); \
    DOT4_WORD_ROW (3, v); \
    DOT4_WORD_ROW (4, v); \
    DOT4_WORD_ROW (5, v); \
  }
    DOT4_WORD (0);
    DOT4_WORD (1);
#undef DOT4_WORD
#undef DOT4_WORD_ROW
  }
  /* requantised and stored two rows at a time, fused with the accumulation (@o: a local
   * copy of g->out, see put16) */
  const ConyQOut o = g->out;
  DOT4_NAME (store) (g, &o, p, 0, a00, a10, MR > 1, out, ldo);
  DOT4_NAME (store) (g, &o, p, 1, a01, a11, MR > 1, out, ldo);
  if (MR > 2) {
    DOT4_NAME (store) (g, &o, p, 0, a20, a30, MR > 3, out + 2 * ldo, ldo);
    DOT4_NAME (store) (g, &o, p, 1, a21, a31, MR > 3, out + 2 * ldo, ldo);
  }
  if (MR > 4) {
    DOT4_NAME (store) (g, &o, p, 0, a40, a50, MR > 5, out + 4 * ldo, ldo);
    DOT4_NAME (store) (g, &o, p, 1, a41, a51, MR > 5, out + 4 * ldo, ldo);
  }
}

DOT4_TARGET void
DOT4_NAME (cony_qgemm) (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch)
{
  /* packed for this kernel */
  g_assert (g->bytes_int8 && g->p8.width == DOT4_PANEL && g->p8.word == DOT4_LANES);
  guint8 *u;
  gint16 *u16;
  gsize blk = prepare_inputs (g, M, x, ldx, scratch, &u, &u16);
  for (guint p = 0; p < cony_qgemm_panels (g); p++) {
    gsize b = M / QROWS, r = b * QROWS;
    for (gsize k = 0; k < b; k++)
      DOT4_NAME (rows) (g, p, u + k * blk, u16 + k * blk, QROWS, out + k * QROWS * ldo, ldo);
#define DOT4_TAIL(n) DOT4_NAME (rows) (g, p, u + b * blk, u16 + b * blk, n, out + r * ldo, ldo)
    TAIL_ROWS (M - r, DOT4_TAIL);
#undef DOT4_TAIL
  }
}

#undef DOT4_PANEL
#undef DOT4_NAME
#undef DOT4_TARGET
#undef DOT4_VEC
#undef DOT4_LANES
#undef DOT4_LOAD
#undef DOT4_SET1
#undef DOT4_ADD
#undef DOT4_MADD
#undef DOT4
