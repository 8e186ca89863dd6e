/* The LJ list's force pass hand-vectorised in intrinsics: how fast the row loop can go on
 * this CPU (bench/row_limit.py times these beside simrun's fused launch).
 *
 * The arithmetic of bench/pair_ref.c's lj_energy_grad (half list, minimum image, cut LJ,
 * U and dU/dx in one pass), with the gathers and scatters a compiler does not write:
 * partner j's position is one unaligned 4-double load at x + 3j (x, y, z and the next
 * atom's x), the loads of 4 or 8 partners transposed into x, y and z lanes by shuffles;
 * dU/dx_j is added the same way back, (f_x, f_y, f_z, 0) in one 4-double load, add and
 * store per partner, in lane order (a row's partners are distinct, and an add of 0 to the
 * next atom's x is harmless one partner at a time). x and grad need one double of padding.
 *
 * rowvec4_lj: AVX2, 4 partners at a time. rowvec8_lj: AVX-512, 8 at a time (2-source
 * permutes). Each row's last count % 4 (or 8) partners go through the scalar loop. Both
 * are compiled per function (target attributes), so one build serves any x86-64 CPU;
 * bench/row_limit.py calls rowvec8_lj only where /proc/cpuinfo lists avx512f.
 */
#include <immintrin.h>
#include <math.h>

/* The loop's constants as vectors of type T (set1: that width's broadcast). */
#define CONSTANTS(T, set1)                                                       \
    T L0 = set1(box[0]), L1 = set1(box[1]), L2 = set1(box[2]);                   \
    T I0 = set1(1 / box[0]), I1 = set1(1 / box[1]), I2 = set1(1 / box[2]);       \
    T half = set1(0.5), vrc2 = set1(rc2), vs2 = set1(s2), one = set1(1);        \
    T c4 = set1(4 * eps), c24 = set1(-24 * eps);

typedef struct {
    double u, gx, gy, gz;
} tail_sums;

/* The scalar remainder of row i from partner k on: what pair_ref.c does per pair. */
static tail_sums row_tail(int i, int k, const int *row, const double *x, const double *box,
                          double eps, double s2, double rc2, double *grad) {
    tail_sums s = {0, 0, 0, 0};
    for (; k < row[0]; k++) {
        int j = row[k + 1];
        double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1];
        double dz = x[3 * j + 2] - x[3 * i + 2];
        dx -= box[0] * floor(dx / box[0] + 0.5);
        dy -= box[1] * floor(dy / box[1] + 0.5);
        dz -= box[2] * floor(dz / box[2] + 0.5);
        double r2 = dx * dx + dy * dy + dz * dz;
        if (r2 < rc2) {
            double inv = 1 / r2, s6 = s2 * inv;
            s6 = s6 * s6 * s6;
            s.u += 4 * eps * (s6 * s6 - s6);
            double c = -24 * eps * (2 * s6 * s6 - s6) * inv;
            s.gx += c * dx, s.gy += c * dy, s.gz += c * dz;
            grad[3 * j] += c * dx, grad[3 * j + 1] += c * dy, grad[3 * j + 2] += c * dz;
        }
    }
    return s;
}

__attribute__((target("avx2,fma"))) static double sum4(__m256d v) {
    double h[4];
    _mm256_storeu_pd(h, v);
    return h[0] + h[1] + h[2] + h[3];
}

__attribute__((target("avx2,fma")))
double rowvec4_lj(int n, int cap, const double *x, const int *nb, const double *box,
                  double eps, double sigma, double cutoff, double *grad) {
    double rc2 = cutoff * cutoff, s2 = sigma * sigma, us = 0;
    CONSTANTS(__m256d, _mm256_set1_pd)
    __m256d u = _mm256_setzero_pd(), zero = _mm256_setzero_pd();
    for (int i = 0; i < n; i++) {
        const int *row = nb + (long)i * (cap + 1);
        __m256d xi = _mm256_set1_pd(x[3 * i]), yi = _mm256_set1_pd(x[3 * i + 1]);
        __m256d zi = _mm256_set1_pd(x[3 * i + 2]);
        __m256d gx = zero, gy = zero, gz = zero;
        int k = 0;
        for (; k + 4 <= row[0]; k += 4) {
            const int *jj = row + k + 1;
            __m256d a0 = _mm256_loadu_pd(x + 3 * jj[0]), a1 = _mm256_loadu_pd(x + 3 * jj[1]);
            __m256d a2 = _mm256_loadu_pd(x + 3 * jj[2]), a3 = _mm256_loadu_pd(x + 3 * jj[3]);
            __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
            __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
            __m256d dx = _mm256_sub_pd(_mm256_permute2f128_pd(t0, t2, 0x20), xi);
            __m256d dy = _mm256_sub_pd(_mm256_permute2f128_pd(t1, t3, 0x20), yi);
            __m256d dz = _mm256_sub_pd(_mm256_permute2f128_pd(t0, t2, 0x31), zi);
            dx = _mm256_fnmadd_pd(L0, _mm256_floor_pd(_mm256_fmadd_pd(dx, I0, half)), dx);
            dy = _mm256_fnmadd_pd(L1, _mm256_floor_pd(_mm256_fmadd_pd(dy, I1, half)), dy);
            dz = _mm256_fnmadd_pd(L2, _mm256_floor_pd(_mm256_fmadd_pd(dz, I2, half)), dz);
            __m256d r2 = _mm256_fmadd_pd(dz, dz, _mm256_fmadd_pd(dy, dy, _mm256_mul_pd(dx, dx)));
            __m256d within = _mm256_cmp_pd(r2, vrc2, _CMP_LT_OQ);
            __m256d inv = _mm256_div_pd(one, r2), s6 = _mm256_mul_pd(vs2, inv);
            s6 = _mm256_mul_pd(s6, _mm256_mul_pd(s6, s6));
            u = _mm256_add_pd(u, _mm256_and_pd(within,
                                               _mm256_mul_pd(c4, _mm256_fmsub_pd(s6, s6, s6))));
            __m256d c = _mm256_and_pd(within, _mm256_mul_pd(_mm256_mul_pd(
                c24, _mm256_fmsub_pd(_mm256_add_pd(s6, s6), s6, s6)), inv));
            __m256d fx = _mm256_mul_pd(c, dx), fy = _mm256_mul_pd(c, dy), fz = _mm256_mul_pd(c, dz);
            gx = _mm256_add_pd(gx, fx), gy = _mm256_add_pd(gy, fy), gz = _mm256_add_pd(gz, fz);
            __m256d p0 = _mm256_unpacklo_pd(fx, fy), p1 = _mm256_unpackhi_pd(fx, fy);
            __m256d p2 = _mm256_unpacklo_pd(fz, zero), p3 = _mm256_unpackhi_pd(fz, zero);
            __m256d f[4] = {_mm256_permute2f128_pd(p0, p2, 0x20), _mm256_permute2f128_pd(p1, p3, 0x20),
                            _mm256_permute2f128_pd(p0, p2, 0x31), _mm256_permute2f128_pd(p1, p3, 0x31)};
            for (int l = 0; l < 4; l++) {
                double *g = grad + 3 * jj[l];
                _mm256_storeu_pd(g, _mm256_add_pd(_mm256_loadu_pd(g), f[l]));
            }
        }
        tail_sums s = row_tail(i, k, row, x, box, eps, s2, rc2, grad);
        us += s.u;
        grad[3 * i] -= s.gx + sum4(gx), grad[3 * i + 1] -= s.gy + sum4(gy);
        grad[3 * i + 2] -= s.gz + sum4(gz);
    }
    return us + sum4(u);
}

__attribute__((target("avx512f")))
static __m512d two_rows(const double *a, const double *b) {
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(a)), _mm256_loadu_pd(b), 1);
}

__attribute__((target("avx512f")))
double rowvec8_lj(int n, int cap, const double *x, const int *nb, const double *box,
                  double eps, double sigma, double cutoff, double *grad) {
    double rc2 = cutoff * cutoff, s2 = sigma * sigma, us = 0;
    CONSTANTS(__m512d, _mm512_set1_pd)
    const __m512i xy = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
    const __m512i zw = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i lo = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
    const __m512i hi = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
    const __m512i q0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i q1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    const __m512i r0 = _mm512_setr_epi64(0, 1, 8, 0, 2, 3, 9, 0);
    const __m512i r1 = _mm512_setr_epi64(4, 5, 10, 0, 6, 7, 11, 0);
    const __m512i r2i = _mm512_setr_epi64(0, 1, 12, 0, 2, 3, 13, 0);
    const __m512i r3 = _mm512_setr_epi64(4, 5, 14, 0, 6, 7, 15, 0);
    __m512d u = _mm512_setzero_pd();
    for (int i = 0; i < n; i++) {
        const int *row = nb + (long)i * (cap + 1);
        __m512d xi = _mm512_set1_pd(x[3 * i]), yi = _mm512_set1_pd(x[3 * i + 1]);
        __m512d zi = _mm512_set1_pd(x[3 * i + 2]);
        __m512d gx = _mm512_setzero_pd(), gy = gx, gz = gx;
        int k = 0;
        for (; k + 8 <= row[0]; k += 8) {
            const int *jj = row + k + 1;
            __m512d a01 = two_rows(x + 3 * jj[0], x + 3 * jj[1]);
            __m512d a23 = two_rows(x + 3 * jj[2], x + 3 * jj[3]);
            __m512d a45 = two_rows(x + 3 * jj[4], x + 3 * jj[5]);
            __m512d a67 = two_rows(x + 3 * jj[6], x + 3 * jj[7]);
            __m512d t0 = _mm512_permutex2var_pd(a01, xy, a23), t1 = _mm512_permutex2var_pd(a45, xy, a67);
            __m512d t2 = _mm512_permutex2var_pd(a01, zw, a23), t3 = _mm512_permutex2var_pd(a45, zw, a67);
            __m512d dx = _mm512_sub_pd(_mm512_permutex2var_pd(t0, lo, t1), xi);
            __m512d dy = _mm512_sub_pd(_mm512_permutex2var_pd(t0, hi, t1), yi);
            __m512d dz = _mm512_sub_pd(_mm512_permutex2var_pd(t2, lo, t3), zi);
            dx = _mm512_fnmadd_pd(L0, _mm512_roundscale_pd(_mm512_fmadd_pd(dx, I0, half), 9), dx);
            dy = _mm512_fnmadd_pd(L1, _mm512_roundscale_pd(_mm512_fmadd_pd(dy, I1, half), 9), dy);
            dz = _mm512_fnmadd_pd(L2, _mm512_roundscale_pd(_mm512_fmadd_pd(dz, I2, half), 9), dz);
            __m512d r2 = _mm512_fmadd_pd(dz, dz, _mm512_fmadd_pd(dy, dy, _mm512_mul_pd(dx, dx)));
            __mmask8 within = _mm512_cmp_pd_mask(r2, vrc2, _CMP_LT_OQ);
            __m512d inv = _mm512_div_pd(one, r2), s6 = _mm512_mul_pd(vs2, inv);
            s6 = _mm512_mul_pd(s6, _mm512_mul_pd(s6, s6));
            u = _mm512_mask_add_pd(u, within, u, _mm512_mul_pd(c4, _mm512_fmsub_pd(s6, s6, s6)));
            __m512d c = _mm512_maskz_mul_pd(within, _mm512_mul_pd(
                c24, _mm512_fmsub_pd(_mm512_add_pd(s6, s6), s6, s6)), inv);
            __m512d fx = _mm512_mul_pd(c, dx), fy = _mm512_mul_pd(c, dy), fz = _mm512_mul_pd(c, dz);
            gx = _mm512_add_pd(gx, fx), gy = _mm512_add_pd(gy, fy), gz = _mm512_add_pd(gz, fz);
            __m512d p0 = _mm512_permutex2var_pd(fx, q0, fy), p1 = _mm512_permutex2var_pd(fx, q1, fy);
            __m512d f[4] = {_mm512_maskz_permutex2var_pd(0x77, p0, r0, fz),
                            _mm512_maskz_permutex2var_pd(0x77, p0, r1, fz),
                            _mm512_maskz_permutex2var_pd(0x77, p1, r2i, fz),
                            _mm512_maskz_permutex2var_pd(0x77, p1, r3, fz)};
            for (int l = 0; l < 4; l++) {
                double *g0 = grad + 3 * jj[2 * l], *g1 = grad + 3 * jj[2 * l + 1];
                _mm256_storeu_pd(g0, _mm256_add_pd(_mm256_loadu_pd(g0), _mm512_castpd512_pd256(f[l])));
                _mm256_storeu_pd(g1, _mm256_add_pd(_mm256_loadu_pd(g1), _mm512_extractf64x4_pd(f[l], 1)));
            }
        }
        tail_sums s = row_tail(i, k, row, x, box, eps, s2, rc2, grad);
        us += s.u;
        grad[3 * i] -= s.gx + _mm512_reduce_add_pd(gx);
        grad[3 * i + 1] -= s.gy + _mm512_reduce_add_pd(gy);
        grad[3 * i + 2] -= s.gz + _mm512_reduce_add_pd(gz);
    }
    return us + _mm512_reduce_add_pd(u);
}
