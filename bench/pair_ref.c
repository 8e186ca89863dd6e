/* Hand-written pair loops: the practical limit on this CPU for bench/pair_cycles.py.
 *
 * The same arithmetic as simrun's kernels/lj.py:lj (half neighbour list, minimum image,
 * cut LJ) and kernels/gravity.py:gravity (all ordered pairs, softened), in plain C with no
 * NumPy. pair_cycles.py compiles this file at run time with `cc -O3 -march=native`, once
 * as written (IEEE order: the reduction stays serial) and once with -ffast-math (the
 * compiler may reassociate the sums and vectorise the loops), with -DREAL=float or double.
 *
 * Layouts are simrun's: x is n rows of DIM reals; the list is n rows of (cap + 1) ints,
 * row[0] = count, row[1..count] = partners j > i.
 */
#include <tgmath.h> /* floor and sqrt in REAL's precision */

/* With -fopenmp-simd, SIMD(...) asserts what a hand-coder knows and the compiler cannot
 * prove: a row's partners are distinct (its scatters never collide) and its sums may be
 * split over lanes. Without the flag it expands to nothing and the loops stay serial. */
#define PRAGMA(x) _Pragma(#x)
#define SIMD(clauses) PRAGMA(omp simd clauses)

#ifndef REAL
#define REAL double
#endif
typedef REAL real;

/* dx, dy, dz = x_j - x_i folded to the nearest periodic image, and r2 = |d|^2 (a macro,
 * not a function taking an array: gcc keeps these in registers across the SIMD lanes). */
#define SEPARATION(j)                                                                   \
    real dx = x[3 * (j)] - xi, dy = x[3 * (j) + 1] - yi, dz = x[3 * (j) + 2] - zi;       \
    dx -= box[0] * floor(dx / box[0] + (real)0.5);                                       \
    dy -= box[1] * floor(dy / box[1] + (real)0.5);                                       \
    dz -= box[2] * floor(dz / box[2] + (real)0.5);                                       \
    real r2 = dx * dx + dy * dy + dz * dz;

/* Energy of the cut LJ over the half list, in a periodic box (minimum image). */
real lj_energy(int n, int cap, const real *x, const int *nb, const real *box, real eps,
               real sigma, real cutoff) {
    real u = 0, rc2 = cutoff * cutoff, s2 = sigma * sigma;
    for (int i = 0; i < n; i++) {
        const int *row = nb + (long)i * (cap + 1);
        real xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
        SIMD(reduction(+ : u))
        for (int k = 0; k < row[0]; k++) {
            int j = row[k + 1];
            SEPARATION(j)
            if (r2 < rc2) {
                real s6 = s2 / r2;
                s6 = s6 * s6 * s6;
                u += 4 * eps * (s6 * s6 - s6);
            }
        }
    }
    return u;
}

/* Energy and dU/dx (added to grad) of the cut LJ: what forward + reverse computes. */
real lj_energy_grad(int n, int cap, const real *x, const int *nb, const real *box,
                    real eps, real sigma, real cutoff, real *grad) {
    real u = 0, rc2 = cutoff * cutoff, s2 = sigma * sigma;
    for (int i = 0; i < n; i++) {
        const int *row = nb + (long)i * (cap + 1);
        real xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
        real gx = 0, gy = 0, gz = 0;
        SIMD(reduction(+ : u, gx, gy, gz))
        for (int k = 0; k < row[0]; k++) {
            int j = row[k + 1];
            SEPARATION(j)
            if (r2 < rc2) {
                real inv = 1 / r2, s6 = s2 * inv;
                s6 = s6 * s6 * s6;
                u += 4 * eps * (s6 * s6 - s6);
                real c = -24 * eps * (2 * s6 * s6 - s6) * inv; /* dphi/dr2 * 2 */
                gx += c * dx, gy += c * dy, gz += c * dz;
                grad[3 * j] += c * dx, grad[3 * j + 1] += c * dy, grad[3 * j + 2] += c * dz;
            }
        }
        grad[3 * i] -= gx, grad[3 * i + 1] -= gy, grad[3 * i + 2] -= gz;
    }
    return u;
}

/* Softened gravity over all ordered pairs (i == j included), in two dimensions. */
real gravity_energy(int n, const real *x, const real *m, real soft, real strength) {
    real u = 0;
    for (int i = 0; i < n; i++)
        SIMD(reduction(+ : u))
        for (int j = 0; j < n; j++) {
            real dx = x[2 * i] - x[2 * j], dy = x[2 * i + 1] - x[2 * j + 1];
            u += -strength * m[i] * m[j] / sqrt(dx * dx + dy * dy + soft);
        }
    return u;
}

/* Energy and dU/dx (owner computes: each row sums its own gradient, no scatter). */
real gravity_energy_grad(int n, const real *x, const real *m, real soft, real strength,
                         real *grad) {
    real u = 0;
    for (int i = 0; i < n; i++) {
        real gx = 0, gy = 0;
        SIMD(reduction(+ : u, gx, gy))
        for (int j = 0; j < n; j++) {
            real dx = x[2 * i] - x[2 * j], dy = x[2 * i + 1] - x[2 * j + 1];
            real inv = 1 / sqrt(dx * dx + dy * dy + soft), e = strength * m[i] * m[j] * inv;
            u -= e;
            real c = 2 * e * inv * inv; /* both orders (i, j) and (j, i) */
            gx += c * dx, gy += c * dy;
        }
        grad[2 * i] += gx, grad[2 * i + 1] += gy;
    }
    return u;
}
