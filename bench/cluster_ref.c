/* A GROMACS-style 4x4 cluster-pair LJ kernel (f64, AVX2 4-wide), hand-written: what the
 * cluster layout gives on this CPU for in.lj, against simrun's neighbour-row kernel.
 * bench/cluster_pairs.py compiles it with `cc -O3 -march=native` (needs AVX2 and FMA).
 *
 * cluster_build: columns of side `colw` in x-y, each sorted by z and cut into clusters of 4
 * (the last padded with far-away dummies); cluster pairs (jc >= ic) whose bounding boxes
 * come within `reach` (one periodic image per cluster pair; the box must be much wider than
 * reach). O(clusters^2): a benchmark's build, not a fast one.
 * cluster_lj: U and dU/dx of the cut LJ over the cluster pairs: positions copied into the
 * clusters' SoA order, each i-cluster's 4 atoms broadcast against a j-cluster's 4 in one
 * vector (16 pair slots a cluster pair, masked by the cutoff and, within one cluster, j > i),
 * j forces stored once a cluster pair, i forces summed across lanes once an i-cluster, then
 * added back to `grad` in the caller's order. `slots`/`within` (when not NULL) get how many
 * pair slots it computed and how many were within the cutoff.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#define CL 4
typedef struct { int nc; int *perm; double *xs, *ys, *zs; double *fx, *fy, *fz;
  int npair; int *pi, *pj; double *sx, *sy, *sz; int *istart; } Clu;
static Clu C;
static const double *cmpz_x;
static int cmpz(const void *a, const void *b) { double za = cmpz_x[3 * *(int *)a + 2], zb = cmpz_x[3 * *(int *)b + 2]; return za < zb ? -1 : za > zb; }
/* build clusters: columns in x-y, sorted by z, cut into 4s; then cluster pairs within reach by bbox */
int cluster_build(int n, const double *x, const double *box, double reach, double colw) {
  void *old[] = {C.perm, C.xs, C.ys, C.zs, C.fx, C.fy, C.fz, C.pi, C.pj, C.sx, C.sy, C.sz, C.istart};
  for (size_t k = 0; k < sizeof old / sizeof *old; k++) free(old[k]);  /* a previous build's */
  int gx = (int)(box[0] / colw), gy = (int)(box[1] / colw);
  int ncol = gx * gy; int *cnt = calloc((size_t)ncol + 1, sizeof(int)); int *col = malloc((size_t)n * sizeof(int));
  for (int i = 0; i < n; i++) { double a = x[3*i] - box[0]*floor(x[3*i]/box[0]), b = x[3*i+1] - box[1]*floor(x[3*i+1]/box[1]);
    int cx = (int)(a / box[0] * gx), cy = (int)(b / box[1] * gy); if (cx >= gx) cx = gx-1; if (cy >= gy) cy = gy-1;
    col[i] = cx * gy + cy; cnt[col[i] + 1]++; }
  int *start = malloc((ncol + 1) * sizeof(int)); start[0] = 0; int ncl = 0;
  int *cstart = malloc((ncol + 1) * sizeof(int)); cstart[0] = 0;
  for (int c = 0; c < ncol; c++) { start[c+1] = start[c] + cnt[c+1]; cstart[c+1] = cstart[c] + (cnt[c+1] + CL - 1) / CL; }
  ncl = cstart[ncol];
  int *order = malloc((size_t)n * sizeof(int)); int *fill = calloc((size_t)ncol, sizeof(int));
  for (int i = 0; i < n; i++) order[start[col[i]] + fill[col[i]]++] = i;
  cmpz_x = x; for (int c = 0; c < ncol; c++) qsort(order + start[c], cnt[c+1], sizeof(int), cmpz);
  C.nc = ncl; C.perm = malloc(ncl * CL * sizeof(int));
  C.xs = aligned_alloc(32, ncl*CL*8); C.ys = aligned_alloc(32, ncl*CL*8); C.zs = aligned_alloc(32, ncl*CL*8);
  C.fx = aligned_alloc(32, ncl*CL*8); C.fy = aligned_alloc(32, ncl*CL*8); C.fz = aligned_alloc(32, ncl*CL*8);
  for (int c = 0; c < ncol; c++) for (int k = 0; k < (cstart[c+1]-cstart[c]) * CL; k++) {
    int slot = cstart[c] * CL + k; C.perm[slot] = k < cnt[c+1] ? order[start[c] + k] : -1; }
  /* bounding boxes from wrapped positions */
  double *lo = malloc(ncl * 3 * 8), *hi = malloc(ncl * 3 * 8);
  for (int c = 0; c < ncl; c++) { for (int d = 0; d < 3; d++) { lo[3*c+d] = 1e300; hi[3*c+d] = -1e300; }
    for (int k = 0; k < CL; k++) { int i = C.perm[c*CL+k]; if (i < 0) continue;
      for (int d = 0; d < 3; d++) { double v = x[3*i+d] - box[d]*floor(x[3*i+d]/box[d]); if (v < lo[3*c+d]) lo[3*c+d] = v; if (v > hi[3*c+d]) hi[3*c+d] = v; } } }
  /* cluster pairs: jc >= ic, minimum image by bbox centre shift */
  int cap = ncl * 64; C.pi = malloc(cap*4); C.pj = malloc(cap*4); C.sx = malloc(cap*8); C.sy = malloc(cap*8); C.sz = malloc(cap*8);
  C.istart = malloc((ncl+1)*4); int np = 0; double r2c = reach * reach;
  for (int a = 0; a < ncl; a++) { C.istart[a] = np;
    for (int b = a; b < ncl; b++) { double d2 = 0, sh[3];
      for (int d = 0; d < 3; d++) { double ca = 0.5*(lo[3*a+d]+hi[3*a+d]), cb = 0.5*(lo[3*b+d]+hi[3*b+d]);
        double s = -box[d] * floor((cb - ca) / box[d] + 0.5); sh[d] = s; /* shift to add to b */
        double g = fmax(0, fmax(lo[3*a+d] - (hi[3*b+d]+s), (lo[3*b+d]+s) - hi[3*a+d])); d2 += g*g; }
      if (d2 < r2c) { if (np == cap) { cap *= 2; C.pi = realloc(C.pi, cap*4); C.pj = realloc(C.pj, cap*4); C.sx = realloc(C.sx, cap*8); C.sy = realloc(C.sy, cap*8); C.sz = realloc(C.sz, cap*8); }
        C.pi[np] = a; C.pj[np] = b; C.sx[np] = sh[0]; C.sy[np] = sh[1]; C.sz[np] = sh[2]; np++; } } }
  C.istart[ncl] = np; C.npair = np;
  free(cnt); free(col); free(start); free(cstart); free(order); free(fill); free(lo); free(hi);
  return np;
}
/* copy positions in (wrapped), padding far away */
static void copy_in(const double *x, const double *box) {
  for (int s = 0; s < C.nc * CL; s++) { int i = C.perm[s];
    if (i < 0) { C.xs[s] = 1e6 * (s + 1); C.ys[s] = C.zs[s] = 0; continue; }  /* far from all */
    C.xs[s] = x[3*i] - box[0]*floor(x[3*i]/box[0]); C.ys[s] = x[3*i+1] - box[1]*floor(x[3*i+1]/box[1]); C.zs[s] = x[3*i+2] - box[2]*floor(x[3*i+2]/box[2]); }
}
static double hsum(__m256d v) { __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1)); return _mm_cvtsd_f64(_mm_add_sd(a, _mm_unpackhi_pd(a, a))); }
double cluster_lj(int n, const double *x, const double *box, double eps, double sigma, double cutoff, double *grad, long long *slots, long long *within) {
  copy_in(x, box);
  memset(C.fx, 0, C.nc*CL*8); memset(C.fy, 0, C.nc*CL*8); memset(C.fz, 0, C.nc*CL*8);
  __m256d rc2 = _mm256_set1_pd(cutoff*cutoff), s2 = _mm256_set1_pd(sigma*sigma), e4 = _mm256_set1_pd(4*eps), e24 = _mm256_set1_pd(24*eps), two = _mm256_set1_pd(2.0);
  __m256d uacc = _mm256_setzero_pd(); long long cnt = 0;
  for (int a = 0; a < C.nc; a++) {
    __m256d fix[CL], fiy[CL], fiz[CL];
    for (int k = 0; k < CL; k++) fix[k] = fiy[k] = fiz[k] = _mm256_setzero_pd();
    for (int p = C.istart[a]; p < C.istart[a+1]; p++) { int b = C.pj[p];
      __m256d xj = _mm256_add_pd(_mm256_load_pd(C.xs + b*CL), _mm256_set1_pd(C.sx[p]));
      __m256d yj = _mm256_add_pd(_mm256_load_pd(C.ys + b*CL), _mm256_set1_pd(C.sy[p]));
      __m256d zj = _mm256_add_pd(_mm256_load_pd(C.zs + b*CL), _mm256_set1_pd(C.sz[p]));
      __m256d fjx = _mm256_setzero_pd(), fjy = fjx, fjz = fjx;
      for (int k = 0; k < CL; k++) {
        __m256d dx = _mm256_sub_pd(xj, _mm256_set1_pd(C.xs[a*CL+k])), dy = _mm256_sub_pd(yj, _mm256_set1_pd(C.ys[a*CL+k])), dz = _mm256_sub_pd(zj, _mm256_set1_pd(C.zs[a*CL+k]));
        __m256d r2 = _mm256_fmadd_pd(dx, dx, _mm256_fmadd_pd(dy, dy, _mm256_mul_pd(dz, dz)));
        __m256d m = _mm256_cmp_pd(r2, rc2, _CMP_LT_OQ);
        if (a == b) { __m256d lane = _mm256_setr_pd(0, 1, 2, 3); m = _mm256_and_pd(m, _mm256_cmp_pd(lane, _mm256_set1_pd(k), _CMP_GT_OQ)); }
        __m256d inv = _mm256_div_pd(_mm256_set1_pd(1.0), r2); __m256d ir2 = _mm256_mul_pd(s2, inv); __m256d s6 = _mm256_mul_pd(_mm256_mul_pd(ir2, ir2), ir2);
        __m256d u = _mm256_mul_pd(e4, _mm256_fmsub_pd(s6, s6, s6));
        __m256d fr = _mm256_mul_pd(_mm256_mul_pd(e24, _mm256_fmsub_pd(two, _mm256_mul_pd(s6, s6), s6)), inv);
        u = _mm256_and_pd(u, m); fr = _mm256_and_pd(fr, m);  /* fr = -dU/dr / r */
        uacc = _mm256_add_pd(uacc, u);
        __m256d gx = _mm256_mul_pd(fr, dx), gy = _mm256_mul_pd(fr, dy), gz = _mm256_mul_pd(fr, dz); /* dU/dx_i */
        fix[k] = _mm256_add_pd(fix[k], gx); fiy[k] = _mm256_add_pd(fiy[k], gy); fiz[k] = _mm256_add_pd(fiz[k], gz);
        fjx = _mm256_sub_pd(fjx, gx); fjy = _mm256_sub_pd(fjy, gy); fjz = _mm256_sub_pd(fjz, gz);
        if (slots) { cnt += __builtin_popcount(_mm256_movemask_pd(m)); }
      }
      _mm256_store_pd(C.fx + b*CL, _mm256_add_pd(_mm256_load_pd(C.fx + b*CL), fjx));
      _mm256_store_pd(C.fy + b*CL, _mm256_add_pd(_mm256_load_pd(C.fy + b*CL), fjy));
      _mm256_store_pd(C.fz + b*CL, _mm256_add_pd(_mm256_load_pd(C.fz + b*CL), fjz));
    }
    for (int k = 0; k < CL; k++) { C.fx[a*CL+k] += hsum(fix[k]); C.fy[a*CL+k] += hsum(fiy[k]); C.fz[a*CL+k] += hsum(fiz[k]); }
  }
  for (int s = 0; s < C.nc * CL; s++) { int i = C.perm[s]; if (i < 0) continue; grad[3*i] += C.fx[s]; grad[3*i+1] += C.fy[s]; grad[3*i+2] += C.fz[s]; }
  if (slots) { *slots = (long long)C.npair * 16; *within = cnt; }
  return hsum(uacc);
}
