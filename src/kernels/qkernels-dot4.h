/* The product and depthwise kernels for one 4-byte dot-product instruction (vpdpbusd of
 * AVX-VNNI or AVX512-VNNI, or its exact AVX2 emulation), included by qkernels-avx2.c once
 * per instruction and register width with these defined:
 *   DOT4_NAME(x)   the names of this copy's functions (x with a suffix)
 *   DOT4_TARGET    its target attribute
 *   DOT4_LANES     the int32 lanes of its registers: 8 (256-bit) or 16 (512-bit)
 *   DOT4_VECS      vectors a row keeps: 2 (256-bit: 16 registers) or 4 (512-bit: 32)
 *   DOT4(a, u, w)  a plus, in each int32 lane, the four products of u's unsigned bytes
 *                  and w's signed bytes: exact (no int16 step, nothing saturates)
 *   DOT2(a, x, w)  a plus, in each int32 lane, the two products of x's and w's int16
 *                  (vpmaddwd and an add, or vpdpwssd)
 * The panels are packed for it (ConyQGemm's bytes_int8, panels of DOT4_VECS * DOT4_LANES
 * columns, int16 vectors of DOT4_LANES): every quad whose weights fit int8 is bytes, one
 * DOT4 per row and vector; the others int16, two DOT2 per row and vector.
 *
 * A block of QROWS rows keeps DOT4_VECS * QROWS accumulators: vpdpbusd's latency is
 * several cycles and a core issues two a cycle, so fewer independent sums leave it
 * waiting (the 8-column kernel with 6 reached 61 % of the measured peak), and per quad
 * DOT4_VECS weight loads and QROWS broadcasts feed DOT4_VECS * QROWS dot products. The
 * last panel of a product computes only the vectors that hold columns (NV). */

#define DOT4_PANEL (DOT4_VECS * DOT4_LANES)
/* the register operations of that width, and its requantisation (qkernels-avx2.c) */
#if DOT4_LANES == 8
#define DOT4_PUT_ROWS put_rows8
#define DOT4_DEFER void
#define DOT4_PREPARE prepare_inputs
#define DOT4_VEC __m256i
#define DOT4_LOAD(p) _mm256_loadu_si256 ((const void *) (p))
#define DOT4_SET1(v) _mm256_set1_epi32 (v)
#define DOT4_ADD(a, b) _mm256_add_epi32 (a, b)
#define DOT4_ZERO() _mm256_setzero_si256 ()
#else
#define DOT4_PUT_ROWS put_rows16
#define DOT4_DEFER QDefer16
#define DOT4_PREPARE prepare_inputs_zmm
#define DOT4_VEC __m512i
#define DOT4_LOAD(p) _mm512_loadu_si512 ((const void *) (p))
#define DOT4_SET1(v) _mm512_set1_epi32 (v)
#define DOT4_ADD(a, b) _mm512_add_epi32 (a, b)
#define DOT4_ZERO() _mm512_setzero_si512 ()
#endif

/* Row @r's accumulators a<r>0 .. a<r>3 (named: with an array gcc copies each one every
 * iteration), from the bias vectors; those past NV are never used. */
#if DOT4_VECS > 2
#define DOT4_ACCS(r) DOT4_VEC a##r##0 = b0, a##r##1 = b1, a##r##2 = b2, a##r##3 = b3
#else
#define DOT4_ACCS(r) DOT4_VEC a##r##0 = b0, a##r##1 = b1
#endif
/* row @r's first two accumulators plus the vector @v */
#define DOT4_CORRECT_PAIR(r, v) a##r##0 = DOT4_ADD (a##r##0, v), a##r##1 = DOT4_ADD (a##r##1, v)
/* row @r's accumulators plus its correction corr[r] (those past NV unused) */
#if DOT4_VECS > 2
#define DOT4_CORRECT(r) \
  { \
    DOT4_VEC c = DOT4_SET1 (corr[r]); \
    DOT4_CORRECT_PAIR (r, c); \
    a##r##2 = DOT4_ADD (a##r##2, c), a##r##3 = DOT4_ADD (a##r##3, c); \
  }
#else
#define DOT4_CORRECT(r) \
  { \
    DOT4_VEC c = DOT4_SET1 (corr[r]); \
    DOT4_CORRECT_PAIR (r, c); \
  }
#endif
/* row @r's accumulators into the array acc (row r's at DOT4_VECS r) */
#if DOT4_VECS > 2
#define DOT4_KEEP(r) \
  acc[4 * (r)] = a##r##0, acc[4 * (r) + 1] = a##r##1, acc[4 * (r) + 2] = a##r##2, \
          acc[4 * (r) + 3] = a##r##3;
#else
#define DOT4_KEEP(r) acc[2 * (r)] = a##r##0, acc[2 * (r) + 1] = a##r##1;
#endif
/* CALL (r) for the QROWS rows */
#define DOT4_EACH_ROW(CALL) CALL (0) CALL (1) CALL (2) CALL (3) CALL (4) CALL (5)

/* Panel @pn (its first column @c0, @NV vectors of columns) for the QROWS rows of one
 * block of prepared inputs @u and @u16, of which the first @MR are stored into @out
 * (row stride @ldo; the block's rows past M are zero), each row's accumulators from the
 * bias plus its correction @corr (NULL: none; ConyQGemm's row_scale); @SMALL:
 * g->small_acc. With
 * @defer (512-bit, a constant of the caller: NULL or not), the previous block's
 * accumulators kept there are requantised one a quad during this block's products, and
 * this block's are left there in their place (QDefer16 says why). */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (block) (const ConyQGemm *g, const ConyQPanel *pn, guint c0, const guint8 *u,
    const gint16 *u16, const gint32 *corr, const int NV, const gboolean SMALL, gsize MR, gint8 *out,
    gsize ldo, DOT4_DEFER *defer)
{
  /* the bias read again for each block (an opaque pointer): kept in registers across
   * the blocks, it leaves the 256-bit kernel too few for its accumulators */
  const gint32 *bias = pn->bias;
  __asm__("" : "+r"(bias));
  DOT4_VEC b0 = DOT4_LOAD (bias);
  DOT4_VEC b1 = NV > 1 ? DOT4_LOAD (bias + DOT4_LANES) : DOT4_ZERO ();
#if DOT4_VECS > 2
  DOT4_VEC b2 = NV > 2 ? DOT4_LOAD (bias + 2 * DOT4_LANES) : DOT4_ZERO ();
  DOT4_VEC b3 = NV > 3 ? DOT4_LOAD (bias + 3 * DOT4_LANES) : DOT4_ZERO ();
#endif
  DOT4_ACCS (0);
  DOT4_ACCS (1);
  DOT4_ACCS (2);
  DOT4_ACCS (3);
  DOT4_ACCS (4);
  DOT4_ACCS (5);
  if (corr) {
    DOT4_EACH_ROW (DOT4_CORRECT)
  }
  /* one quad of bytes at @a: NV weight vectors, a broadcast and NV DOT4 a row */
#define DOT4_ROW(r) \
  { \
    gint32 v; \
    memcpy (&v, a + 4 * (r), sizeof v); \
    DOT4_VEC x = DOT4_SET1 (v); \
    a##r##0 = DOT4 (a##r##0, x, w0); \
    if (NV > 1) \
      a##r##1 = DOT4 (a##r##1, x, w1); \
  }
#if DOT4_LANES == 16
  /* a row in assembly: with intrinsics gcc copies each of the 24 accumulators from
   * register to register every quad. zmm31 the row's broadcast. */
#define DOT4_Z_DOT(v) "vpdpbusd %[w" #v "], %%zmm31, %[a" #v "]\n\t"
#define DOT4_Z_ROW(r, DOTS) \
  __asm__("vpbroadcastd %c[off](%[a]), %%zmm31\n\t" DOTS \
          : [a0] "+v"(a##r##0), [a1] "+v"(a##r##1), [a2] "+v"(a##r##2), [a3] "+v"(a##r##3) \
          : [w0] "v"(w0), [w1] "v"(w1), [w2] "v"(w2), [w3] "v"(w3), [a] "r"(a), \
          [off] "i"(4 * (r)), "m"(*(const guint8 (*)[QROWS * 4]) a) \
          : "xmm31")
#define DOT4_ROW_N(r) \
  if (NV == 4) \
    DOT4_Z_ROW (r, DOT4_Z_DOT (0) DOT4_Z_DOT (1) DOT4_Z_DOT (2) DOT4_Z_DOT (3)); \
  else if (NV == 3) \
    DOT4_Z_ROW (r, DOT4_Z_DOT (0) DOT4_Z_DOT (1) DOT4_Z_DOT (2)); \
  else if (NV == 2) \
    DOT4_Z_ROW (r, DOT4_Z_DOT (0) DOT4_Z_DOT (1)); \
  else \
    DOT4_Z_ROW (r, DOT4_Z_DOT (0));
#define DOT4_QUAD() \
  { \
    DOT4_VEC w0 = DOT4_LOAD (w8); \
    DOT4_VEC w1 = NV > 1 ? DOT4_LOAD (w8 + 4 * DOT4_LANES) : DOT4_ZERO (); \
    DOT4_VEC w2 = NV > 2 ? DOT4_LOAD (w8 + 8 * DOT4_LANES) : DOT4_ZERO (); \
    DOT4_VEC w3 = NV > 3 ? DOT4_LOAD (w8 + 12 * DOT4_LANES) : DOT4_ZERO (); \
    DOT4_EACH_ROW (DOT4_ROW_N) \
  }
#else
#define DOT4_QUAD() \
  { \
    DOT4_VEC w0 = DOT4_LOAD (w8); \
    DOT4_VEC w1 = NV > 1 ? DOT4_LOAD (w8 + 4 * DOT4_LANES) : DOT4_ZERO (); \
    DOT4_EACH_ROW (DOT4_ROW) \
  }
#endif
#define DOT4_BYTES() \
  { \
    for (int line = 0; line < 4 * DOT4_LANES * NV; line += 64) \
      _mm_prefetch ((const char *) (w8 + PREFETCH + line), _MM_HINT_T0); \
    DOT4_QUAD () \
  }
#if DOT4_LANES == 16
#define DOT4_DEFERRED_PUT(i) \
  if (defer && (i) < defer->count) \
    put_deferred16 (defer, i);
#else
#define DOT4_DEFERRED_PUT(i)
#endif
  const gint8 *w8 = pn->w8;
  if (pn->n8 == pn->nq) { /* every quad bytes, in order: no index to read */
    const guint8 *a = u;
    for (guint i = 0; i < pn->n8; i++, w8 += 4 * DOT4_PANEL, a += QROWS * 4) {
      DOT4_BYTES ();
      DOT4_DEFERRED_PUT (i);
    }
  } else {
    for (guint i = 0; i < pn->n8; i++, w8 += 4 * DOT4_PANEL) {
      const guint8 *a = u + (gsize) QROWS * 4 * pn->idx[i];
      DOT4_BYTES ();
      DOT4_DEFERRED_PUT (i);
    }
  }
#if DOT4_LANES == 16
  /* those left over where the quads of bytes are fewer */
  for (guint i = pn->n8; defer && i < defer->count; i++)
    put_deferred16 (defer, i);
#endif
#undef DOT4_DEFERRED_PUT
#undef DOT4_BYTES
#undef DOT4_QUAD
#undef DOT4_ROW
  const gint16 *w16 = pn->w16;
  for (guint i = pn->n8; i < pn->nq; i++, w16 += 4 * DOT4_PANEL) {
    const gint16 *a = u16 + (gsize) QROWS * 4 * pn->idx[i];
#if DOT4_LANES == 16
    /* two vectors at a time, a row in assembly (as the bytes'): their four weight vectors
     * (p: the pairs k, k + 1 and k + 2, k + 3 of vector v, q: of w = v + 1), a row's two
     * broadcasts in zmm30 and zmm31; with intrinsics gcc spilled */
#define DOT4_Z_WDOT(w0, w1, acc) \
  "vpdpwssd %[" w0 "], %%zmm30, %[" acc "]\n\tvpdpwssd %[" w1 "], %%zmm31, %[" acc "]\n\t"
#define DOT4_WORD_ROW(r, v, w, DOTS) \
  __asm__("vpbroadcastd %c[off](%[a]), %%zmm30\n\tvpbroadcastd %c[off2](%[a]), %%zmm31\n\t" DOTS \
          : [x] "+v"(a##r##v), [y] "+v"(a##r##w) \
          : [p0] "v"(p0), [p1] "v"(p1), [q0] "v"(q0), [q1] "v"(q1), [a] "r"(a), \
          [off] "i"(8 * (r)), [off2] "i"(8 * (r) + 4), "m"(*(const gint16 (*)[QROWS * 4]) a) \
          : "xmm30", "xmm31")
#define DOT4_WORD_ROWS(v, w, DOTS) \
  DOT4_WORD_ROW (0, v, w, DOTS); \
  DOT4_WORD_ROW (1, v, w, DOTS); \
  DOT4_WORD_ROW (2, v, w, DOTS); \
  DOT4_WORD_ROW (3, v, w, DOTS); \
  DOT4_WORD_ROW (4, v, w, DOTS); \
  DOT4_WORD_ROW (5, v, w, DOTS);
#define DOT4_WORD(v, w) \
  if (NV > (v)) { \
    const gint16 *wv = w16 + 4 * DOT4_LANES * (v); \
    DOT4_VEC p0 = DOT4_LOAD (wv), p1 = DOT4_LOAD (wv + 2 * DOT4_LANES); \
    DOT4_VEC q0 = NV > (w) ? DOT4_LOAD (wv + 4 * DOT4_LANES) : DOT4_ZERO (); \
    DOT4_VEC q1 = NV > (w) ? DOT4_LOAD (wv + 6 * DOT4_LANES) : DOT4_ZERO (); \
    if (NV > (w)) { \
      DOT4_WORD_ROWS (v, w, DOT4_Z_WDOT ("p0", "p1", "x") DOT4_Z_WDOT ("q0", "q1", "y")) \
    } else { \
      DOT4_WORD_ROWS (v, w, DOT4_Z_WDOT ("p0", "p1", "x")) \
    } \
  }
    DOT4_WORD (0, 1);
    DOT4_WORD (2, 3);
#undef DOT4_Z_WDOT
#undef DOT4_WORD_ROWS
#else
    /* one vector at a time: its two weight vectors and a row's two broadcasts */
#define DOT4_WORD_ROW(r, v) \
  { \
    gint32 x0, x1; \
    memcpy (&x0, a + 4 * (r), sizeof x0); \
    memcpy (&x1, a + 4 * (r) + 2, sizeof x1); \
    a##r##v = DOT2 (DOT2 (a##r##v, DOT4_SET1 (x0), p0), DOT4_SET1 (x1), p1); \
  }
#define DOT4_WORD(v) \
  if (NV > (v)) { \
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
#endif
#undef DOT4_WORD
#undef DOT4_WORD_ROW
  }
#if DOT4_LANES == 16
  if (defer) {
    __m512i *acc = defer->acc;
    DOT4_EACH_ROW (DOT4_KEEP)
    defer->count = (guint) MR * 4;
    defer->out = out + c0;
    defer->kp = defer->kn;
    return;
  }
#endif
  /* the accumulators stored, then requantised in a pass of their own (put_rows8 and
   * put_rows16 in qkernels-avx2.c say why; @o: a local copy of g->out, see put16) */
  const ConyQOut o = g->out;
  DOT4_VEC acc[QROWS * DOT4_VECS];
  DOT4_EACH_ROW (DOT4_KEEP)
  DOT4_PUT_ROWS (&o, SMALL, c0, acc, MR, NV, g->N, out, ldo);
}

/* Panel @p (@NV vectors of columns) of the @M rows prepared in @u and @u16 (@blk values
 * a block) into @out; @defer as in DOT4_NAME (block): it may keep a block of the panel
 * before, and keeps this panel's last block. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (panel) (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16,
    const gint32 *corr, gsize blk, gsize M, const int NV, const gboolean SMALL, gint8 *out,
    gsize ldo, DOT4_DEFER *defer)
{
  ConyQPanel pn = cony_qpanel (g, p);
  gsize full = M / QROWS;
  const guint c0 = DOT4_PANEL * p;
#if DOT4_LANES == 16
  if (defer)
    qdefer16_panel (defer, &g->out, c0);
#endif
  /* full blocks with the row count a constant (the stores unconditional), then the rest */
  for (gsize b = 0; b < full; b++, u += blk, u16 += blk, out += QROWS * ldo)
    DOT4_NAME (block)
  (g, &pn, c0, u, u16, corr ? corr + b * QROWS : NULL, NV, SMALL, QROWS, out, ldo, defer);
  if (M % QROWS)
    DOT4_NAME (block)
  (g, &pn, c0, u, u16, corr ? corr + full * QROWS : NULL, NV, SMALL, M % QROWS, out, ldo, defer);
}

#if DOT4_LANES == 16
/* Short products on 512-bit registers (K up to DOT4_SWEEP_K, every quad bytes, the short
 * rounding): there the requantisation takes about as long as the products (1 ns a vector
 * of 16 outputs, against 8 vpdpbusd at K = 32), and as a pass after each block's products
 * it hardly overlaps them. So a whole panel is swept in two halves of 32 columns (6 x 2
 * tiles, 12 accumulators): the short rounding's constants of the half's two vectors stay
 * in registers for the whole sweep, and each block's rows are requantised one a quad
 * during the next block's products. */
#define DOT4_SWEEP_K 128
/* row @r's broadcast and its two dot products */
#define DOT4_SWEEP_ROW(r) \
  __asm__("vpbroadcastd %c[off](%[a]), %%zmm31\n\t" \
          "vpdpbusd %[w0], %%zmm31, %[a0]\n\tvpdpbusd %[w1], %%zmm31, %[a1]\n\t" \
          : [a0] "+v"(a##r##0), [a1] "+v"(a##r##1) \
          : [w0] "v"(w0), [w1] "v"(w1), [a] "r"(a), [off] "i"(4 * (r)), \
          "m"(*(const guint8 (*)[QROWS * 4]) a) \
          : "xmm31");
/* the previous block's row @r requantised and stored: its vector @v, both */
#define DOT4_SWEEP_PUT_VEC(r, v) \
  if ((r) < prev_rows) \
    put16_small_k (&o, &k##v, p##r##v, prev_out + ldo * (r) + 16 * (v), CLAMP);
#define DOT4_SWEEP_PUT(r) DOT4_SWEEP_PUT_VEC (r, 0) DOT4_SWEEP_PUT_VEC (r, 1)
/* quad @i of this block's products */
#define DOT4_SWEEP_QUAD(i) \
  { \
    const gint8 *w8 = w8h + (gsize) 4 * DOT4_PANEL * (i); \
    const guint8 *a = u + (gsize) QROWS * 4 * (i); \
    __m512i w0 = DOT4_LOAD (w8), w1 = DOT4_LOAD (w8 + 4 * DOT4_LANES); \
    DOT4_EACH_ROW (DOT4_SWEEP_ROW); \
  }
#define DOT4_SWEEP_KEEP(r) p##r##0 = a##r##0, p##r##1 = a##r##1;
/* row @r's two accumulators plus its correction rc[r] */
#define DOT4_SWEEP_CORRECT(r) \
  { \
    DOT4_VEC v = DOT4_SET1 (rc[r]); \
    DOT4_CORRECT_PAIR (r, v); \
  }
/* the previous block's row @r requantised after quad @r of this one, or its vectors
 * after quads 2 @r and 2 @r + 1; for the rows (DOT4_EACH_ROW, which a quad expands) */
#define DOT4_SWEEP_BY_ROW(r) \
  DOT4_SWEEP_QUAD (r); \
  DOT4_SWEEP_PUT (r)
#define DOT4_SWEEP_BY_VECTOR(r) \
  DOT4_SWEEP_QUAD (2 * (r)); \
  DOT4_SWEEP_PUT_VEC (r, 0) \
  DOT4_SWEEP_QUAD (2 * (r) + 1); \
  DOT4_SWEEP_PUT_VEC (r, 1)
#define DOT4_SWEEP_EACH_ROW(CALL) CALL (0) CALL (1) CALL (2) CALL (3) CALL (4) CALL (5)
/* rows @r and @s after quad @q (the three quads of a short product) */
#define DOT4_SWEEP_BY_PAIR(q, r, s) \
  DOT4_SWEEP_QUAD (q); \
  DOT4_SWEEP_PUT (r) \
  DOT4_SWEEP_PUT (s)
/* How a block's rows are requantised during the next block's products: two rows after
 * each of its first 3 quads, a row after each of its first QROWS, or a vector after each
 * of its first 2 QROWS. */
typedef enum
{
  DOT4_SWEEP_PAIRS,
  DOT4_SWEEP_ROWS,
  DOT4_SWEEP_VECTORS
} Dot4SweepSchedule;

/* Columns 32 @h .. 32 @h + 31 of whole panel @p for the @M rows prepared in @u (@blk
 * bytes a block) into @out; @CLAMP: q_out_clamps (the bytes clamped to [lo, hi]).
 * The previous block's rows are requantised from registers during this block's first
 * quads, as @SCHED says (a constant): a row a quad (K >= 4 QROWS), a vector a quad where
 * there are 2 QROWS quads or more (YAMNet's 64-deep layer 7 % faster, its 128-deep one
 * 5 %), two rows a quad for 3 to 5 quads (MobileNet-v2's 16- and 24-deep expansions).
 * Spilled to memory, the twelve 512-bit stores a block took the vpdpbusd pipes for about
 * as long as 12 of its products. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (half_sweep_body) (const ConyQGemm *g, guint p, guint h, const guint8 *u,
    const gint32 *corr, gsize blk, gsize M, gint8 *out, gsize ldo, const gboolean CLAMP,
    const Dot4SweepSchedule SCHED)
{
  const ConyQPanel pn = cony_qpanel (g, p);
  const ConyQOut o = g->out; /* a local copy: see put16 */
  const guint c = DOT4_PANEL * p + 32 * h;
  const QSmall16 k0 = q_small16 (&o, c), k1 = q_small16 (&o, c + 16);
  const __m512i b0 = DOT4_LOAD (pn.bias + 32 * h), b1 = DOT4_LOAD (pn.bias + 32 * h + 16);
  const gint8 *w8h = pn.w8 + 2 * 4 * DOT4_LANES * h;
  __m512i p00, p01, p10, p11, p20, p21, p30, p31, p40, p41, p50, p51;
  gsize prev_rows = 0;
  gint8 *prev_out = out + c;
  for (gsize row0 = 0; row0 < M; row0 += QROWS, u += blk) {
    __m512i a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1, a30 = b0, a31 = b1,
            a40 = b0, a41 = b1, a50 = b0, a51 = b1;
    if (corr) {
      const gint32 *rc = corr + row0;
      DOT4_EACH_ROW (DOT4_SWEEP_CORRECT)
    }
    if (SCHED == DOT4_SWEEP_VECTORS) {
      DOT4_SWEEP_EACH_ROW (DOT4_SWEEP_BY_VECTOR)
    } else if (SCHED == DOT4_SWEEP_ROWS) {
      DOT4_SWEEP_EACH_ROW (DOT4_SWEEP_BY_ROW)
    } else {
      DOT4_SWEEP_BY_PAIR (0, 0, 1)
      DOT4_SWEEP_BY_PAIR (1, 2, 3)
      DOT4_SWEEP_BY_PAIR (2, 4, 5)
    }
    guint first = SCHED == DOT4_SWEEP_VECTORS ? 2 * QROWS : SCHED == DOT4_SWEEP_ROWS ? QROWS : 3;
    for (guint i = first; i < pn.n8; i++)
      DOT4_SWEEP_QUAD (i);
    DOT4_EACH_ROW (DOT4_SWEEP_KEEP);
    prev_rows = MIN (QROWS, M - row0);
    prev_out = out + row0 * ldo + c;
  }
  DOT4_EACH_ROW (DOT4_SWEEP_PUT)
}
#undef DOT4_SWEEP_QUAD
#undef DOT4_SWEEP_KEEP
#undef DOT4_SWEEP_CORRECT
#undef DOT4_SWEEP_ROW
#undef DOT4_SWEEP_PUT
#undef DOT4_SWEEP_PUT_VEC
#undef DOT4_SWEEP_BY_ROW
#undef DOT4_SWEEP_BY_VECTOR
#undef DOT4_SWEEP_BY_PAIR
#undef DOT4_SWEEP_EACH_ROW

/* DOT4_NAME (half_sweep_body) with CLAMP a constant: most layers (ReLU6, linear) keep
 * the whole int8 range, and the clamp's two instructions a vector are a sixth of the
 * short rounding's. */
DOT4_TARGET static void
DOT4_NAME (half_sweep) (const ConyQGemm *g, guint p, guint h, const guint8 *u, const gint32 *corr,
    gsize blk, gsize M, gint8 *out, gsize ldo)
{
  guint nq = cony_qpanel (g, p).n8;
  Dot4SweepSchedule sched = nq >= 2 * QROWS ? DOT4_SWEEP_VECTORS
      : nq >= QROWS                         ? DOT4_SWEEP_ROWS
                                            : DOT4_SWEEP_PAIRS;
#define DOT4_SWEEP_CASE(s) \
  case s: \
    if (q_out_clamps (&g->out)) \
      DOT4_NAME (half_sweep_body) (g, p, h, u, corr, blk, M, out, ldo, TRUE, s); \
    else \
      DOT4_NAME (half_sweep_body) (g, p, h, u, corr, blk, M, out, ldo, FALSE, s); \
    break;
  switch (sched) {
    DOT4_SWEEP_CASE (DOT4_SWEEP_PAIRS)
    DOT4_SWEEP_CASE (DOT4_SWEEP_ROWS)
    DOT4_SWEEP_CASE (DOT4_SWEEP_VECTORS)
  }
#undef DOT4_SWEEP_CASE
}

/* How many half sweeps run panel @p of @g (0: none): two for a whole panel, one for a
 * last panel of exactly 32 columns (the half sweeps store whole halves); where the
 * product is short (3 quads or more: DOT4_SWEEP_PAIRS needs them), the short rounding,
 * every quad bytes. */
static inline guint
DOT4_NAME (sweeps) (const ConyQGemm *g, guint p)
{
  guint left = g->N - DOT4_PANEL * p, halves = left >= DOT4_PANEL ? 2 : left == 32 ? 1 : 0;
  if (halves == 0 || !g->small_acc || g->K > DOT4_SWEEP_K || g->p8.Kq < 12)
    return 0;
  ConyQPanel pn = cony_qpanel (g, p);
  return pn.n8 == pn.nq ? halves : 0;
}
#endif

/* DOT4_NAME (panel) with @nv (1 .. DOT4_VECS) and @small as constants. */
DOT4_TARGET static void
DOT4_NAME (panel_nv) (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16,
    const gint32 *corr, gsize blk, gsize M, int nv, gboolean small, gint8 *out, gsize ldo)
{
#define DOT4_CASE(n) \
  case n: \
    if (small) \
      DOT4_NAME (panel) (g, p, u, u16, corr, blk, M, n, TRUE, out, ldo, NULL); \
    else \
      DOT4_NAME (panel) (g, p, u, u16, corr, blk, M, n, FALSE, out, ldo, NULL); \
    break;
  switch (nv) {
#if DOT4_VECS > 2
    DOT4_CASE (4)
    DOT4_CASE (3)
#endif
    DOT4_CASE (2)
    DOT4_CASE (1)
    default: g_assert_not_reached ();
  }
#undef DOT4_CASE
}

#if DOT4_LANES == 16
/* A whole panel, the short rounding, each block's requantisation deferred in @defer. */
DOT4_TARGET static void
DOT4_NAME (panel_deferred) (const ConyQGemm *g, guint p, const guint8 *u, const gint16 *u16,
    const gint32 *corr, gsize blk, gsize M, gint8 *out, gsize ldo, QDefer16 *defer)
{
  DOT4_NAME (panel) (g, p, u, u16, corr, blk, M, DOT4_VECS, TRUE, out, ldo, defer);
}
#endif

DOT4_TARGET void
DOT4_NAME (cony_qgemm) (const ConyQGemm *g, gsize M, const gint8 *x, gsize ldx, gint8 *out,
    gsize ldo, gint16 *scratch)
{
  /* packed for this kernel */
  g_assert (g->bytes_int8 && g->p8.width == DOT4_PANEL && g->p8.word == DOT4_LANES);
#if DOT4_LANES == 16
  if (cony_qgemm_rows_ok (g)) {
    ConyQRows rows = { x, ldx, M ? M : 1, 0, 4 };
    cony_qgemm_rows_avx512 (g, M, &rows, out, ldo);
    return;
  }
#endif
  guint8 *u;
  gint16 *u16;
  gsize blk = DOT4_PREPARE (g, M, x, ldx, scratch, &u, &u16);
  gint32 *corr = NULL;
  if (g->row_scale != 0) {
    corr = cony_qgemm_corrections (g, M, scratch);
    cony_qgemm_row_corrections_avx2 (g, M, u, blk, corr);
  }
#if DOT4_LANES == 16
  QDefer16 defer;
  qdefer16_init (&defer, &g->out, ldo);
  const gboolean deferring = g->small_acc && !q_out_clamps (&g->out);
#endif
  for (guint p = 0; p < cony_qgemm_panels (g); p++) {
    guint left = g->N - DOT4_PANEL * p;
    int nv = left >= DOT4_PANEL ? DOT4_VECS : (int) ((left + DOT4_LANES - 1) / DOT4_LANES);
#if DOT4_LANES == 16
    guint halves = DOT4_NAME (sweeps) (g, p);
    if (halves > 0) {
      qdefer16_flush (&defer);
      for (guint h = 0; h < halves; h++)
        DOT4_NAME (half_sweep) (g, p, h, u, corr, blk, M, out, ldo);
      continue;
    }
    if (deferring && nv == DOT4_VECS) {
      DOT4_NAME (panel_deferred) (g, p, u, u16, corr, blk, M, out, ldo, &defer);
      continue;
    }
    qdefer16_flush (&defer);
#endif
    DOT4_NAME (panel_nv) (g, p, u, u16, corr, blk, M, nv, g->small_acc, out, ldo);
  }
#if DOT4_LANES == 16
  qdefer16_flush (&defer);
#endif
}

/* The depthwise 3x3 layer by DOT4 on ConyQDw's w64 (every tap fits int8, or uint8 taps
 * with one zero point as w - 128 and scale64): DOT4_DW channels a pass over every pixel,
 * 64 on 512-bit registers, 32 on 256-bit ones (the low or the high half of each of
 * w64's vectors, whose lanes 0-1 and 2-3 hold channels 0-31 and 32-63 of its 64). */
#define DOT4_DW (4 * DOT4_LANES)
#if DOT4_LANES == 8
#define DOT4_SMALL QSmall8
#define DOT4_SMALL_AT q_small8
#define DOT4_PACK_SMALL pack32_small
#define DOT4_XOR _mm256_xor_si256
#define DOT4_SET1_8 _mm256_set1_epi8
#define DOT4_UNPACKLO8 _mm256_unpacklo_epi8
#define DOT4_UNPACKHI8 _mm256_unpackhi_epi8
#define DOT4_UNPACKLO16 _mm256_unpacklo_epi16
#define DOT4_UNPACKHI16 _mm256_unpackhi_epi16
#define DOT4_STORE(p, v) _mm256_storeu_si256 ((void *) (p), v)
#else
#define DOT4_SMALL QSmall16
#define DOT4_SMALL_AT q_small16
#define DOT4_PACK_SMALL pack64_small
#define DOT4_XOR _mm512_xor_si512
#define DOT4_SET1_8 _mm512_set1_epi8
#define DOT4_UNPACKLO8 _mm512_unpacklo_epi8
#define DOT4_UNPACKHI8 _mm512_unpackhi_epi8
#define DOT4_UNPACKLO16 _mm512_unpacklo_epi16
#define DOT4_UNPACKHI16 _mm512_unpackhi_epi16
#define DOT4_STORE(p, v) _mm512_storeu_si512 ((void *) (p), v)
#endif

/* Input column @at (the window's top row; rows @row bytes apart) of channels
 * c..c+DOT4_DW-1 as u = x + 128 quads of its three rows and a zero (one dword per channel,
 * as ConyQDw's w64), in the four vectors @u: unpacking bytes, then words. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (dw_column) (const gint8 *at, gsize row, DOT4_VEC u[4])
{
  const DOT4_VEC flip = DOT4_SET1_8 ((char) 0x80), zero = DOT4_ZERO ();
  DOT4_VEC r0 = DOT4_XOR (DOT4_LOAD (at), flip), r1 = DOT4_XOR (DOT4_LOAD (at + row), flip);
  DOT4_VEC r2 = DOT4_XOR (DOT4_LOAD (at + 2 * row), flip);
  DOT4_VEC lo01 = DOT4_UNPACKLO8 (r0, r1), hi01 = DOT4_UNPACKHI8 (r0, r1);
  DOT4_VEC lo2 = DOT4_UNPACKLO8 (r2, zero), hi2 = DOT4_UNPACKHI8 (r2, zero);
  u[0] = DOT4_UNPACKLO16 (lo01, lo2);
  u[1] = DOT4_UNPACKHI16 (lo01, lo2);
  u[2] = DOT4_UNPACKLO16 (hi01, hi2);
  u[3] = DOT4_UNPACKHI16 (hi01, hi2);
}

/* The sums (w64 order) of the output pixel whose window has the columns @a, @b and @e
 * (dw_column): the bias (vector j's at @bias + 16 j), then a DOT4 a column (weights @w:
 * 12 vectors); where @SCALED (a constant), a second DOT4 a column adds ConyQDw's scale64
 * times its u (@s: scale64 in every byte; the fourth input byte is zero). */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (dw_window) (const DOT4_VEC *w, const gint32 *bias, const DOT4_VEC *a, const DOT4_VEC *b,
    const DOT4_VEC *e, const gboolean SCALED, DOT4_VEC s, DOT4_VEC acc[4])
{
  const DOT4_VEC *col[3] = { a, b, e };
  for (int j = 0; j < 4; j++)
    acc[j] = DOT4_LOAD (bias + 16 * j);
  for (int kx = 0; kx < 3; kx++)
    for (int j = 0; j < 4; j++) {
      acc[j] = DOT4 (acc[j], col[kx][j], w[4 * kx + j]);
      if (SCALED)
        acc[j] = DOT4 (acc[j], col[kx][j], s);
    }
}

/* Sums @acc (w64 order) requantised (pack64_small, pack32_small) and stored at @dst. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (dw_put) (const ConyQOut *o, const DOT4_SMALL *k, const DOT4_VEC acc[4], gboolean clamp,
    gint8 *dst)
{
  DOT4_STORE (dst, DOT4_PACK_SMALL (o, k, acc, clamp));
}

/* Channels @c..c+DOT4_DW-1 of every output pixel by DOT4 (the short rounding), each
 * pixel requantised after the next pixel's products, as dw32_channels. A window's quads
 * are its columns (three rows and a zero, dw_column), so neighbouring pixels share them:
 * at stride 1 each column is unpacked once for three pixels, at stride 2 for two
 * (unpacking a window's taps to four per channel costs fewer instructions than widening
 * them to int16, as dw16 and dw32 do, and packing the sums to bytes restores the channel
 * order without a permute). A layer of 32 channels on 512-bit registers (stride 1, even
 * width) runs two neighbouring pixels a vector: their windows' taps and their outputs lie
 * side by side. @STEP (a constant, 1 or 2): the columns from one vector of pixels to the
 * next. */
DOT4_TARGET static inline __attribute__ ((always_inline)) void
DOT4_NAME (dw_channels_body) (const ConyQDw *d, const gint8 *in, gsize row, guint oh, guint ow,
    guint stride, guint c, gint8 *out, const gboolean SCALED, const guint STEP)
{
  const ConyQOut o = d->out64; /* a local copy: see put16 */
  const DOT4_VEC s = DOT4_SET1_8 ((char) d->scale64);
  const gboolean clamp = q_out_clamps (&o);
  /* channel c's place in w64's order: its group of 64, then the half (lanes 2-3) */
  const guint place = c / 64 * 64 + c % 64 / 4;
  DOT4_VEC w[12];
  for (int i = 0; i < 12; i++)
    w[i] = DOT4_LOAD (d->w64 + ((gsize) (c / 64) * 12 + i) * 64 + c % 64);
  const gint32 *bias = d->bias64 + place;
  DOT4_SMALL k[4];
  for (int j = 0; j < 4; j++)
    k[j] = DOT4_SMALL_AT (&o, place + 16 * j);
  const guint C = d->C, pixels = STEP / stride; /* a vector's */
  DOT4_VEC prev[4];
  gint8 *prev_at = NULL; /* where the sums kept go */
  for (guint y = 0; y < oh; y++) {
    const gint8 *line = in + (gsize) y * stride * row + c;
    gint8 *ox = out + (gsize) y * ow * C + c;
    /* the columns of two vectors of pixels, the first 3 - STEP kept from the two before */
    DOT4_VEC u[5][4];
    for (guint i = 0; i < 3 - STEP; i++)
      DOT4_NAME (dw_column) (line + (gsize) i * C, row, u[i]);
    guint x = 0;
    for (; x + 2 * pixels <= ow; x += 2 * pixels, ox += 2 * pixels * C) {
      const gint8 *at = line + (gsize) x * stride * C;
      for (guint i = 3 - STEP; i < 3 + STEP; i++)
        DOT4_NAME (dw_column) (at + (gsize) i * C, row, u[i]);
      DOT4_VEC acc[4];
      DOT4_NAME (dw_window) (w, bias, u[0], u[1], u[2], SCALED, s, acc);
      if (prev_at)
        DOT4_NAME (dw_put) (&o, k, prev, clamp, prev_at);
      DOT4_NAME (dw_window) (w, bias, u[STEP], u[STEP + 1], u[STEP + 2], SCALED, s, prev);
      DOT4_NAME (dw_put) (&o, k, acc, clamp, ox);
      prev_at = ox + pixels * C;
      for (guint i = 0; i < 3 - STEP; i++)
        for (int j = 0; j < 4; j++)
          u[i][j] = u[i + 2 * STEP][j];
    }
    for (; x < ow; x += pixels, ox += pixels * C) { /* a last vector of pixels */
      const gint8 *at = line + (gsize) x * stride * C;
      for (guint i = 0; i < 3; i++)
        DOT4_NAME (dw_column) (at + (gsize) i * C, row, u[i]);
      DOT4_VEC acc[4];
      DOT4_NAME (dw_window) (w, bias, u[0], u[1], u[2], SCALED, s, acc);
      if (prev_at)
        DOT4_NAME (dw_put) (&o, k, prev, clamp, prev_at);
      for (int j = 0; j < 4; j++)
        prev[j] = acc[j];
      prev_at = ox;
    }
  }
  if (prev_at)
    DOT4_NAME (dw_put) (&o, k, prev, clamp, prev_at);
}

/* DOT4_NAME (dw_channels_body) with SCALED (ConyQDw's scale64 not 0) and STEP constants. */
DOT4_TARGET static void
DOT4_NAME (dw_channels) (const ConyQDw *d, const gint8 *in, gsize row, guint oh, guint ow,
    guint stride, guint c, gint8 *out)
{
  guint step = (d->C < DOT4_DW ? DOT4_DW / d->C : 1) * stride;
  if (d->scale64 != 0 && step == 1)
    DOT4_NAME (dw_channels_body) (d, in, row, oh, ow, stride, c, out, TRUE, 1);
  else if (d->scale64 != 0)
    DOT4_NAME (dw_channels_body) (d, in, row, oh, ow, stride, c, out, TRUE, 2);
  else if (step == 1)
    DOT4_NAME (dw_channels_body) (d, in, row, oh, ow, stride, c, out, FALSE, 1);
  else
    DOT4_NAME (dw_channels_body) (d, in, row, oh, ow, stride, c, out, FALSE, 2);
}

/* The depthwise layer: DOT4_DW channels a pass (DOT4_NAME (dw_channels)) where ConyQDw's
 * w64 holds them and the short rounding applies; the rest 32 at a time through vpdpwssd
 * (dw32_channels, 512-bit registers) and 16 at a time (dw16_layer). */
DOT4_TARGET void
DOT4_NAME (cony_qdw) (const ConyQDw *d, const gint8 *in, guint in_w, guint oh, guint ow,
    guint stride, gint8 *out, gint32 *acc)
{
  guint C = d->C, c = 0;
  gsize row = (gsize) in_w * C;
  /* whole passes of DOT4_DW channels; 32 on 512-bit registers (w64 holds them twice) as
   * two neighbouring pixels, at stride 1 and an even width */
  guint n64 = DOT4_DW == 64 && C == 32 && stride == 1 && ow % 2 == 0 ? 32 : C / DOT4_DW * DOT4_DW;
  if (d->w64 != NULL && d->small_acc)
    for (; c < n64; c += DOT4_DW)
      DOT4_NAME (dw_channels) (d, in, row, oh, ow, stride, c, out);
#if DOT4_LANES == 16
  gsize off[10];
  for (guint k = 0; k < 9; k++)
    off[k] = (k / 3) * row + (k % 3) * C;
  for (; c + 32 <= C; c += 32)
    dw32_channels (d, in, row, off, oh, ow, stride, c, out);
#endif
  if (c < C)
    dw16_layer (d, in, in_w, oh, ow, stride, c, out, acc);
}

#undef DOT4_DW
#undef DOT4_SMALL
#undef DOT4_SMALL_AT
#undef DOT4_PACK_SMALL
#undef DOT4_XOR
#undef DOT4_SET1_8
#undef DOT4_UNPACKLO8
#undef DOT4_UNPACKHI8
#undef DOT4_UNPACKLO16
#undef DOT4_UNPACKHI16
#undef DOT4_STORE

#undef DOT4_ACCS
#undef DOT4_EACH_ROW
#undef DOT4_Z_DOT
#undef DOT4_Z_ROW
#undef DOT4_ROW_N
#undef DOT4_PANEL
#undef DOT4_SWEEP_K
#undef DOT4_NAME
#undef DOT4_TARGET
#undef DOT4_VEC
#undef DOT4_PUT_ROWS
#undef DOT4_DEFER
#undef DOT4_KEEP
#undef DOT4_PREPARE
#undef DOT4_VECS
#undef DOT4_LANES
#undef DOT4_LOAD
#undef DOT4_SET1
#undef DOT4_ADD
#undef DOT4_CORRECT
#undef DOT4_CORRECT_PAIR
#undef DOT4_ZERO
#undef DOT4
#undef DOT2
