/* CNN engine: Winograd F(2x2,3x3) / F(4x4,3x3) convolutions (see include/cony/cnn.h). */
#include "cnn-private.h"
#include "cony/error.h"
#include "cony/safetensors.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Winograd product kernel (AVX2/FMA) ---- */

#ifdef CONY_CPU_X86
#include <immintrin.h>
#define CNN_HAVE_WINO_KERNEL 1

/* Winograd products out (T x K, row stride K) = v (T x cin, row stride cin) U,
 * with U packed in panels of 16 columns: up[p * 16 * cin + c * 16 + j] =
 * U[c][16 p + j] (K a multiple of 16). The packing is done once when the
 * weights are transformed, where OpenBLAS would repack U on every call: with
 * VGGish's few tiles per window (24 for conv4 in F(2x2)) that repacking costs
 * as much as the product. Blocks of 6 rows x 16 columns: 12 accumulators, 2
 * weight loads and 6 broadcasts per 12 FMAs. */
#define WG_MR 6
__attribute__ ((always_inline)) CONY_TARGET_V3 static inline void
wg_block (const int mr, const float *v, gsize cin, const float *up, float *out, gsize ldo)
{
  __m256 acc[WG_MR][2];
  for (int i = 0; i < WG_MR; i++)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps ();
  for (gsize c = 0; c < cin; c++) {
    __m256 b0 = _mm256_loadu_ps (up + 16 * c), b1 = _mm256_loadu_ps (up + 16 * c + 8);
    for (int i = 0; i < WG_MR; i++)
      if (i < mr) {
        __m256 a = _mm256_broadcast_ss (v + i * cin + c);
        acc[i][0] = _mm256_fmadd_ps (a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps (a, b1, acc[i][1]);
      }
  }
  for (int i = 0; i < WG_MR; i++)
    if (i < mr) {
      _mm256_storeu_ps (out + i * ldo, acc[i][0]);
      _mm256_storeu_ps (out + i * ldo + 8, acc[i][1]);
    }
}

/* One panel: out (T x 16, row stride ldo) = v (T x cin) panel (cin x 16). */
CONY_TARGET_V3 static void
wino_gemm_panel_avx2 (gsize T, gsize ldo, gsize cin, const float *v, const float *panel, float *o)
{
  gsize t = 0;
  for (; t + WG_MR <= T; t += WG_MR)
    wg_block (6, v + t * cin, cin, panel, o + t * ldo, ldo);
  switch (T - t) {
    case 5: wg_block (5, v + t * cin, cin, panel, o + t * ldo, ldo); break;
    case 4: wg_block (4, v + t * cin, cin, panel, o + t * ldo, ldo); break;
    case 3: wg_block (3, v + t * cin, cin, panel, o + t * ldo, ldo); break;
    case 2: wg_block (2, v + t * cin, cin, panel, o + t * ldo, ldo); break;
    case 1: wg_block (1, v + t * cin, cin, panel, o + t * ldo, ldo); break;
    default: break;
  }
}

CONY_TARGET_V3 static void
wino_gemm_avx2 (gsize T, gsize K, gsize cin, const float *v, const float *up, float *out)
{
  for (gsize p = 0; p < K / 16; p++)
    wino_gemm_panel_avx2 (T, K, cin, v, up + p * 16 * cin, out + 16 * p);
}
#endif

/* The kernels this CPU runs; CONY_CNN_PORTABLE=1 (cony_cpu_force_portable) forces
 * the portable ones (tests use it to cover that path): then the FC layers use the
 * portable gemv and the Winograd products use OpenBLAS. */
const CnnKernels *
cnn_kernels (void)
{
  static CnnKernels k;
  static gsize done;
  if (g_once_init_enter (&done)) {
    k.portable = cony_cpu_force_portable ();
#ifdef CNN_HAVE_WINO_KERNEL
    if (!k.portable && cony_cpu_has_v3 ()) {
      k.wino_gemm = wino_gemm_avx2;
      k.gemm_panel = wino_gemm_panel_avx2;
    }
#endif
    g_once_init_leave (&done, 1);
  }
  return &k;
}

/* ---- Winograd F(m x m, 3x3), m = 2 or 4 ----
 * One mechanism for both tile sizes: with n = m + 2 and the interpolation
 * points a_0..a_{n-2} plus infinity,
 *   Y = A^T [ (G g G^T) . (B^T d B) ] A,
 *   A^T[i][j] = a_j^i (last column: 1 in the last row only),
 *   G[j][k]   = a_j^k / f_j, f_j = prod_{l != j} (a_j - a_l) (last row: 0 0 1),
 *   B^T       = f_j times the inverse of the Vandermonde matrix V[s][j] = a_j^s
 *               on the finite points, plus the row that removes the a^{n-1} term.
 * Points {0, 1, -1} give the usual F(2x2,3x3); F(4x4,3x3) uses {0, 1, -1, 1/2, -1/2}
 * (every coefficient of A and B a power of two times a small integer; float32
 * error about 2e-6 relative for 256 input channels, against 4e-7 for F(2x2)).
 * The matrices are computed in double once. Per layer, the n*n elementwise
 * products summed over input channels are n*n sgemms (tiles x Cin) (Cin x Cout):
 * 16 multiplications per 4 outputs (2.25x fewer than direct) for F(2x2), 36 per
 * 16 (4x fewer) for F(4x4), at the price of 36/9 = 4x larger transformed
 * weights and fewer, larger-overhead tiles. */

#define WINO_MAX_N 6

typedef struct {
  guint m, n;
  /* Sparse rows: nnz[r] terms, column idx[r][t] with coefficient coef[r][t]. */
  int bt_nnz[WINO_MAX_N], bt_idx[WINO_MAX_N][WINO_MAX_N];
  float bt_coef[WINO_MAX_N][WINO_MAX_N];
  int at_nnz[WINO_MAX_N], at_idx[WINO_MAX_N][WINO_MAX_N];
  float at_coef[WINO_MAX_N][WINO_MAX_N];
  double g[WINO_MAX_N][3];
} WinoMats;

static void
wino_mats_compute (guint m, WinoMats *w)
{
  static const double pts2[] = { 0, 1, -1 }, pts4[] = { 0, 1, -1, 0.5, -0.5 };
  const double *a = m == 2 ? pts2 : pts4;
  guint n = m + 2, p = n - 1; /* p finite points */
  double at[WINO_MAX_N][WINO_MAX_N] = { { 0 } }, bt[WINO_MAX_N][WINO_MAX_N] = { { 0 } };
  double f[WINO_MAX_N], v[WINO_MAX_N][2 * WINO_MAX_N];
  memset (w, 0, sizeof *w);
  w->m = m;
  w->n = n;
  for (guint j = 0; j < p; j++) {
    f[j] = 1.0;
    for (guint l = 0; l < p; l++)
      if (l != j)
        f[j] *= a[j] - a[l];
  }
  for (guint i = 0; i < m; i++) {
    for (guint j = 0; j < p; j++)
      at[i][j] = pow (a[j], i);
    at[i][p] = i == m - 1;
  }
  for (guint j = 0; j < p; j++)
    for (int k = 0; k < 3; k++)
      w->g[j][k] = pow (a[j], k) / f[j];
  w->g[p][0] = w->g[p][1] = 0.0;
  w->g[p][2] = 1.0;
  /* Invert V[s][j] = a_j^s by Gauss-Jordan with partial pivoting (p <= 5). */
  for (guint s = 0; s < p; s++)
    for (guint j = 0; j < p; j++) {
      v[s][j] = pow (a[j], s);
      v[s][p + j] = s == j;
    }
  for (guint c = 0; c < p; c++) {
    guint piv = c;
    for (guint r = c + 1; r < p; r++)
      if (fabs (v[r][c]) > fabs (v[piv][c]))
        piv = r;
    for (guint k = 0; k < 2 * p; k++) {
      double t = v[c][k];
      v[c][k] = v[piv][k];
      v[piv][k] = t;
    }
    double d = v[c][c];
    for (guint k = 0; k < 2 * p; k++)
      v[c][k] /= d;
    for (guint r = 0; r < p; r++)
      if (r != c) {
        double e = v[r][c];
        for (guint k = 0; k < 2 * p; k++)
          v[r][k] -= e * v[c][k];
      }
  }
  /* X = V^{-1} (v[.][p..]); B^T[j][l] = f_j X[j][l]; last row cancels a^{n-1}. */
  for (guint j = 0; j < p; j++)
    for (guint l = 0; l < p; l++)
      bt[j][l] = f[j] * v[j][p + l];
  for (guint l = 0; l < n; l++) {
    double s = l == p ? 1.0 : 0.0;
    if (l < p)
      for (guint j = 0; j < p; j++)
        s -= pow (a[j], p) * v[j][p + l];
    bt[p][l] = s;
  }
  for (guint r = 0; r < n; r++) {
    for (guint c = 0; c < n; c++) {
      double x = nearbyint (bt[r][c] * 64.0) / 64.0; /* exact dyadic values */
      if (x != 0.0) {
        w->bt_idx[r][w->bt_nnz[r]] = (int) c;
        w->bt_coef[r][w->bt_nnz[r]++] = (float) x;
      }
    }
    if (r < m)
      for (guint c = 0; c < n; c++)
        if (at[r][c] != 0.0) {
          w->at_idx[r][w->at_nnz[r]] = (int) c;
          w->at_coef[r][w->at_nnz[r]++] = (float) at[r][c];
        }
  }
}

static const WinoMats *
wino_mats (guint m)
{
  static WinoMats mats[2];
  static gsize done[2];
  int k = m == 4;
  if (g_once_init_enter (&done[k])) {
    wino_mats_compute (m, &mats[k]);
    g_once_init_leave (&done[k], 1);
  }
  return &mats[k];
}

/* d[c] = sum_t coef[t] * s[idx[t]][c], vectorised over c. */
static inline void
lincomb (float *restrict d, gsize len, int nnz, const float *coef, const int *idx,
    const float *const *s)
{
  const float *s0 = s[idx[0]], *s1 = nnz > 1 ? s[idx[1]] : NULL;
  const float *s2 = nnz > 2 ? s[idx[2]] : NULL, *s3 = nnz > 3 ? s[idx[3]] : NULL;
  float c0 = coef[0], c1 = nnz > 1 ? coef[1] : 0, c2 = nnz > 2 ? coef[2] : 0;
  float c3 = nnz > 3 ? coef[3] : 0;

  switch (nnz) {
    case 1:
      for (gsize c = 0; c < len; c++)
        d[c] = c0 * s0[c];
      return;
    case 2:
      for (gsize c = 0; c < len; c++)
        d[c] = c0 * s0[c] + c1 * s1[c];
      return;
    case 3:
      for (gsize c = 0; c < len; c++)
        d[c] = c0 * s0[c] + c1 * s1[c] + c2 * s2[c];
      return;
    default:
      for (gsize c = 0; c < len; c++)
        d[c] = c0 * s0[c] + c1 * s1[c] + c2 * s2[c] + c3 * s3[c];
      for (int t = 4; t < nnz; t++) {
        const float *st = s[idx[t]];
        float ct = coef[t];
        for (gsize c = 0; c < len; c++)
          d[c] += ct * st[c];
      }
  }
}

/* Which tile size a layer uses (0: not Winograd). */
guint
cnn_wino_tile (const ConyCnn *cnn, const Layer *l, gsize nb)
{
  /* The transforms here compute stride-1 convs with a ReLU (the VGG layers). */
  if (l->stride > 1 || isfinite (l->relu_max))
    return 0;
  switch (cnn->conv_algo) {
    case CONY_CNN_CONV_IM2COL: return 0;
    case CONY_CNN_CONV_WINOGRAD: return 2;
    case CONY_CNN_CONV_WINOGRAD4: return 4;
    default: break;
  }
  if (l->in_c < 16)
    return 0;
  /* F(4x4) when the map (times the examples run together) gives enough tiles
   * for its 4x larger transformed weights to pay off (measured on VGGish, one
   * window: conv2 and conv3, not conv4). */
  gsize tiles4 = (gsize) ((l->in_h + 3) / 4) * ((l->in_w + 3) / 4) * nb;
  return tiles4 >= WINO4_MIN_TILES ? 4 : 2;
}

static void
winograd_weights (Layer *l, guint m)
{
  const WinoMats *wm = wino_mats (m);
  guint n = wm->n, in = l->in_c, out = l->out_c;
  gsize plane = (gsize) in * out;
  float *u = g_new (float, (gsize) n *n *plane);
  for (guint i = 0; i < in; i++)
    for (guint o = 0; o < out; o++) {
      double g[3][3], gg[WINO_MAX_N][3];
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++)
          g[ky][kx] = l->w[((gsize) (ky * 3 + kx) * in + i) * out + o];
      for (guint r = 0; r < n; r++)
        for (int c = 0; c < 3; c++)
          gg[r][c] = wm->g[r][0] * g[0][c] + wm->g[r][1] * g[1][c] + wm->g[r][2] * g[2][c];
      for (guint r = 0; r < n; r++)
        for (guint c = 0; c < n; c++)
          u[(gsize) (r * n + c) * plane + (gsize) i * out + o] = (float) (gg[r][0] * wm->g[c][0]
              + gg[r][1] * wm->g[c][1] + gg[r][2] * wm->g[c][2]);
    }
  /* Panels of 16 output channels for the packed-weight kernel. */
  l->wino_packed[m == 4] = FALSE;
  if (cnn_kernels ()->wino_gemm != NULL && out % 16 == 0) {
    float *pk = g_new (float, (gsize) n *n *plane);
    for (guint k = 0; k < n * n; k++)
      for (guint p = 0; p < out / 16; p++)
        for (guint i = 0; i < in; i++)
          memcpy (pk + (gsize) k * plane + ((gsize) p * in + i) * 16,
              u + (gsize) k * plane + (gsize) i * out + 16 * p, 16 * sizeof (float));
    g_free (u);
    u = pk;
    l->wino_packed[m == 4] = TRUE;
  }
  g_atomic_pointer_set (&l->wino[m == 4], u);
}

/* @nb examples (HWC maps one after the other): their tiles share each sgemm.
 * The transforms are channel-vector loops: built for x86-64-v3 too (AVX2/FMA,
 * 8 floats per instruction instead of SSE2's 4), chosen at load time. */
CONY_CLONES void
cnn_conv_winograd (ConyCnn *cnn, Layer *l, guint m, const float *in, float *out, gsize nb)
{
  const WinoMats *wm = wino_mats (m);
  guint n = wm->n, nn = n * n;
  guint H = l->in_h, W = l->in_w, C = l->in_c, K = l->out_c;
  guint th = (H + m - 1) / m, tw = (W + m - 1) / m;
  gsize T1 = (gsize) th * tw, T = T1 * nb, map_in = (gsize) H * W * C, map_out = (gsize) H * W * K;
  /* Shared weights: transformed once, under their lock (winograd_weights()
   * publishes wino[] atomically, after wino_packed[]). */
  const float *U = g_atomic_pointer_get (&l->wino[m == 4]);
  if (U == NULL) {
    pthread_mutex_lock (&cnn->w->lazy);
    if (l->wino[m == 4] == NULL)
      winograd_weights (l, m);
    U = l->wino[m == 4];
    pthread_mutex_unlock (&cnn->w->lazy);
  }
  if (cnn->wv == NULL) {
    cnn->wv = g_new (float, cnn->conv_cap * cnn->w->max_wv);
    cnn->wm = g_new (float, cnn->conv_cap * cnn->w->max_wm);
    cnn->wt = g_new (float, 2 * WINO_MAX_N * WINO_MAX_N * cnn->w->max_ch);
  }
  float *V = cnn->wv, *M = cnn->wm;
  gsize vplane = T * C, mplane = T * K;
  float *zeros = g_alloca (sizeof (float) * C);
  memset (zeros, 0, sizeof (float) * C);
  float *t = cnn->wt;

  /* Input transform: V[r*n+s][tile][c] = (B^T d B)[r][s], channels innermost. */
  for (gsize e = 0; e < nb; e++)
    for (guint ty = 0; ty < th; ty++)
      for (guint tx = 0; tx < tw; tx++) {
        gsize tile = e * T1 + (gsize) ty * tw + tx;
        const float *in_e = in + e * map_in;
        const float *px[WINO_MAX_N * WINO_MAX_N]; /* column-major: px[q * n + r] */
        for (guint r = 0; r < n; r++)
          for (guint q = 0; q < n; q++) {
            int y = (int) (m * ty + r) - 1, x = (int) (m * tx + q) - 1;
            px[q * n + r] = (y < 0 || y >= (int) H || x < 0 || x >= (int) W)
                ? zeros
                : in_e + ((gsize) y * W + x) * C;
          }
        /* t[r][q] = sum_l B^T[r][l] d[l][q]  (t stored row-major: t + (r*n+q)*C). */
        const float *trow[WINO_MAX_N];
        for (guint r = 0; r < n; r++)
          for (guint q = 0; q < n; q++)
            lincomb (t + (gsize) (r * n + q) * C, C, wm->bt_nnz[r], wm->bt_coef[r], wm->bt_idx[r],
                px + q * n);
        /* V[r][s] = sum_q t[r][q] B^T[s][q]. */
        for (guint r = 0; r < n; r++) {
          for (guint q = 0; q < n; q++)
            trow[q] = t + (gsize) (r * n + q) * C;
          for (guint s = 0; s < n; s++)
            lincomb (V + (gsize) (r * n + s) * vplane + tile * C, C, wm->bt_nnz[s], wm->bt_coef[s],
                wm->bt_idx[s], trow);
        }
      }

  /* n*n products (T x C) (C x K). */
  gsize uplane = (gsize) C * K;
  if (l->wino_packed[m == 4]) {
    const CnnKernels *kern = cnn_kernels ();
    for (guint k = 0; k < nn; k++)
      kern->wino_gemm (T, K, C, V + k * vplane, U + k * uplane, M + k * mplane);
  } else {
    for (guint k = 0; k < nn; k++)
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) T, (int) K, (int) C, 1.0f,
          V + k * vplane, (int) C, U + k * uplane, (int) K, 0.0f, M + k * mplane, (int) K);
  }

  /* Output transform, bias, ReLU; output channels innermost. */
  float *u = t, *yv = t + (gsize) WINO_MAX_N * WINO_MAX_N * K;
  const float *b = l->b;
  for (gsize e = 0; e < nb; e++)
    for (guint ty = 0; ty < th; ty++)
      for (guint tx = 0; tx < tw; tx++) {
        gsize tile = e * T1 + (gsize) ty * tw + tx;
        float *out_e = out + e * map_out;
        const float *mcol[WINO_MAX_N * WINO_MAX_N]; /* column-major: mcol[q * n + j] */
        for (guint j = 0; j < n; j++)
          for (guint q = 0; q < n; q++)
            mcol[q * n + j] = M + (gsize) (j * n + q) * mplane + tile * K;
        /* u[i][q] = sum_j A^T[i][j] M[j][q]. */
        for (guint i = 0; i < m; i++)
          for (guint q = 0; q < n; q++)
            lincomb (u + (gsize) (i * n + q) * K, K, wm->at_nnz[i], wm->at_coef[i], wm->at_idx[i],
                mcol + q * n);
        guint y0 = m * ty, x0 = m * tx;
        for (guint i = 0; i < m && y0 + i < H; i++) {
          const float *urow[WINO_MAX_N];
          for (guint q = 0; q < n; q++)
            urow[q] = u + (gsize) (i * n + q) * K;
          for (guint p = 0; p < m && x0 + p < W; p++) {
            /* y[i][p] = sum_q u[i][q] A^T[p][q] + b, ReLU. */
            lincomb (yv, K, wm->at_nnz[p], wm->at_coef[p], wm->at_idx[p], urow);
            float *o = out_e + ((gsize) (y0 + i) * W + x0 + p) * K;
            for (guint k = 0; k < K; k++) {
              float v = yv[k] + b[k];
              o[k] = v > 0.0f ? v : 0.0f;
            }
          }
        }
      }
}
