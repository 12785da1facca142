/* The product kernel for one 4-byte dot-product instruction (vpdpbusd of AVX-VNNI or
 * AVX512-VNNI, or its exact AVX2 emulation), included by qkernels-avx2.c once per
 * instruction with these defined:
 *   DOT4_NAME(x)  the names of this copy's functions (x with a suffix)
 *   DOT4_TARGET   its target attribute
 *   DOT4(a, u, w) a plus, in each int32 lane, the four products of u's unsigned bytes
 *                 and w's signed bytes: exact (no int16 step, nothing saturates)
 * The panels are packed for it (ConyQGemm's bytes_int8): every quad whose weights fit
 * int8 is bytes, one DOT4 a row; the others int16 as for the AVX2 kernel. */

/* @MR (<= QROWS) rows of panel @p from the prepared inputs @u and @u16 into @out. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (rows) (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16, int MR,
    gint8 *out, gsize ldo)
{
  ConyQPanel pn = cony_qpanel (g, p);
  const gint8 *w8 = pn.w8;
  /* six named accumulators (rows past MR unused): with an array gcc copies each one
   * every iteration */
  __m256i a0 = _mm256_loadu_si256 ((const __m256i *) pn.bias), a1 = a0, a2 = a0, a3 = a0;
  __m256i a4 = a0, a5 = a0;
  for (guint i = 0; i < pn.n8; i++, w8 += 32) {
    __m256i w = _mm256_loadu_si256 ((const __m256i *) w8);
    const guint8 *a = u + (gsize) QROWS * 4 * pn.idx[i];
    _mm_prefetch ((const char *) (w8 + PREFETCH), _MM_HINT_T0);
#define DOT4_ROW(r, acc) \
  if ((r) < MR) { \
    gint32 v; \
    memcpy (&v, a + 4 * (r), sizeof v); \
    acc = DOT4 (acc, _mm256_set1_epi32 (v), w); \
  }
    DOT4_ROW (0, a0);
    DOT4_ROW (1, a1);
    DOT4_ROW (2, a2);
    DOT4_ROW (3, a3);
    DOT4_ROW (4, a4);
    DOT4_ROW (5, a5);
#undef DOT4_ROW
  }
  __m256i acc[QROWS] = { a0, a1, a2, a3, a4, a5 };
  word_quads (&pn, u16, MR, acc);
  store_rows (g, p, acc, MR, out, ldo);
}

DOT4_TARGET void
DOT4_NAME (cony_qgemm) (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch)
{
  g_assert (g->bytes_int8); /* packed for this kernel */
  guint8 *u;
  gint16 *u16;
  gsize blk = prepare_inputs (g, M, x, ldx, scratch, &u, &u16);
  for (guint p = 0; p < (g->N + 7) / 8; p++) {
    gsize b = M / QROWS, r = b * QROWS;
    for (gsize k = 0; k < b; k++)
      DOT4_NAME (rows) (g, p, u + k * blk, u16 + k * blk, QROWS, out + k * QROWS * ldo, ldo);
#define DOT4_TAIL(n) DOT4_NAME (rows) (g, p, u + b * blk, u16 + b * blk, n, out + r * ldo, ldo)
    TAIL_ROWS (M - r, DOT4_TAIL);
#undef DOT4_TAIL
  }
}

#undef DOT4_NAME
#undef DOT4_TARGET
#undef DOT4
