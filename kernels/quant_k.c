/* Q4_K and Q6_K quantization, one super-block at a time, in llama.cpp's
 * reference arithmetic (quantize_row_q4_K_ref / _q6_K_ref without an
 * importance matrix):
 *
 * Q4_K: each 32-element sub-block gets a scale and a min from a weighted
 * least-squares search (weights sqrt(mean x^2) + |x|; 21 trial level
 * grids around the min-max one); the eight scales and mins are quantized
 * to 6 bits against their maxima (d, dmin in f16), then every element is
 * requantized against the stored scale and min.
 * Q6_K: each 16-element group gets a signed scale from a search over 19
 * grids weighted by x^2; the 16 scales become int8 against the one of
 * largest magnitude (d in f16), then every element is requantized.
 *
 * Every expression keeps the reference's operand order and conversions
 * (see quant.c), so that the levels, and hence the bytes, are the same.
 */
#include "quant_k.h"

#include <math.h>
#include <string.h>

#include "quant.h"

#define QK_K O1_QUANT_QK_K

/* Below this a group is all zeros (llama.cpp's GROUP_MAX_EPS). */
#define GROUP_MAX_EPS 1e-15f

static uint16_t load_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static void store_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Round to nearest, ties to even, by adding 1.5 * 2^23: exact for |V| <
 * 2^22; beyond that the same bits the reference gets (every caller clamps
 * the result). */
static int nearest_int(float v)
{
	float t = v + 12582912.f;
	int32_t i;

	memcpy(&i, &t, sizeof(i));
	return (i & 0x007fffff) - 0x00400000;
}

static int clamp(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void o1_quant_q4_k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *mn)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*mn = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
		*mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

/* Sums of a trial grid for N values: levels of ISCALE * (x - MIN) in 0..
 * NMAX into L, and the weighted sums a least-squares fit needs. */
struct grid_sums {
	float l, l2, xl;
};

static struct grid_sums grid_levels(int n, int nmax, const float *x,
				    const float *w, float iscale, float min,
				    uint8_t *L)
{
	struct grid_sums s = {0, 0, 0};

	for (int i = 0; i < n; i++) {
		int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);

		L[i] = (uint8_t)l;
		s.l += w[i] * l;
		s.l2 += w[i] * l * l;
		s.xl += w[i] * l * x[i];
	}
	return s;
}

/* Weighted squared error of x ~ SCALE * L + MIN. */
static float grid_error(int n, const float *x, const float *w, const uint8_t *L,
			float scale, float min)
{
	float err = 0;

	for (int i = 0; i < n; i++) {
		float diff = scale * L[i] + min - x[i];

		diff = diff * diff;
		err += w[i] * diff;
	}
	return err;
}

/* Scale and min for N values X in levels 0..NMAX (x ~ scale * l - the_min,
 * min <= 0): the min-max grid, then NSTEP + 1 grids of (NMAX + RMIN +
 * RDELTA * is) steps over the range, each refitted by weighted least
 * squares; the fit of least weighted squared error wins. L gets its
 * levels; returns the scale, *THE_MIN the negated min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w,
			   uint8_t *L, float *the_min, float rmin, float rdelta,
			   int nstep)
{
	float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	float iscale, scale, best = 0;
	uint8_t aux[32];

	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*the_min = -min;
		return 0.f;
	}
	iscale = nmax / (max - min);
	scale = 1 / iscale;
	for (int i = 0; i < n; i++)
		L[i] =
		    (uint8_t)clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
	best = grid_error(n, x, w, L, scale, min);
	for (int is = 0; is <= nstep; is++) {
		struct grid_sums g;
		float d, this_scale, this_min, err;

		iscale = (rmin + rdelta * is + nmax) / (max - min);
		g = grid_levels(n, nmax, x, w, iscale, min, aux);
		d = sum_w * g.l2 - g.l * g.l;
		if (!(d > 0))
			continue;
		this_scale = (sum_w * g.xl - sum_x * g.l) / d;
		this_min = (g.l2 * sum_x - g.l * g.xl) / d;
		if (this_min > 0) {
			this_min = 0;
			this_scale = g.xl / g.l2;
		}
		err = grid_error(n, x, w, aux, this_scale, this_min);
		if (err < best) {
			memcpy(L, aux, (size_t)n);
			best = err;
			scale = this_scale;
			min = this_min;
		}
	}
	*the_min = -min;
	return scale;
}

/* Stores sub-block J's 6-bit scale LS and min LM in the 12 bytes S (the
 * packing o1_quant_q4_k_scale_min reads; J ascending from 0). */
static void q4_k_pack(uint8_t *s, int j, uint8_t ls, uint8_t lm)
{
	if (j < 4) {
		s[j] = ls;
		s[j + 4] = lm;
	} else {
		s[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
		s[j - 4] |= (uint8_t)((ls >> 4) << 6);
		s[j] |= (uint8_t)((lm >> 4) << 6);
	}
}

/* The eight sub-blocks' scales and mins of X (levels into L). */
static void q4_k_fit(const float *x, uint8_t *L, float *scales, float *mins)
{
	float w[32];

	for (int j = 0; j < 8; j++) {
		const float *xs = x + 32 * j;
		float sum_x2 = 0, av_x;

		for (int l = 0; l < 32; l++)
			sum_x2 += xs[l] * xs[l];
		av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(xs[l]);
		scales[j] = fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j],
					  -1.f, 0.1f, 20);
	}
}

/* Requantizes X against the stored scales and mins of block B into L
 * (sub-blocks whose stored scale is 0 keep their fitted levels). */
static void q4_k_requant(const float *x, const uint8_t *b, uint8_t *L)
{
	float d_all = o1_quant_f16_to_f32(load_u16(b));
	float dmin_all = o1_quant_f16_to_f32(load_u16(b + 2));

	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		float d, dm;

		o1_quant_q4_k_scale_min(b + 4, j, &sc, &m);
		d = d_all * sc;
		if (d == 0)
			continue;
		dm = dmin_all * m;
		for (int i = 0; i < 32; i++)
			L[32 * j + i] = (uint8_t)clamp(
			    nearest_int((x[32 * j + i] + dm) / d), 0, 15);
	}
}

void o1_quant_q4_k_block(const float *x, uint8_t *b)
{
	float scales[8], mins[8], max_scale = 0, max_min = 0, inv_s, inv_m;
	uint8_t L[QK_K], *q = b + 16;

	q4_k_fit(x, L, scales, mins);
	for (int j = 0; j < 8; j++) {
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	inv_s = max_scale > 0 ? 63.f / max_scale : 0.f;
	inv_m = max_min > 0 ? 63.f / max_min : 0.f;
	for (int j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)nearest_int(inv_s * scales[j]);
		uint8_t lm = (uint8_t)nearest_int(inv_m * mins[j]);

		q4_k_pack(b + 4, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
	}
	store_u16(b, o1_quant_f32_to_f16(max_scale / 63.f));
	store_u16(b + 2, o1_quant_f32_to_f16(max_min / 63.f));
	q4_k_requant(x, b, L);
	for (int j = 0; j < QK_K; j += 64, q += 32)
		for (int l = 0; l < 32; l++)
			q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

/* Weighted sums (weights x^2) of the levels of ISCALE * x in -NMAX..
 * NMAX-1; with L, stores the levels + NMAX. */
static void signed_grid(int n, int nmax, const float *x, float iscale,
			int8_t *L, float *sumlx, float *suml2)
{
	*sumlx = 0;
	*suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
		float w = x[i] * x[i];

		if (L)
			L[i] = (int8_t)(l + nmax);
		*sumlx += w * x[i] * l;
		*suml2 += w * l * l;
	}
}

/* Signed scale for N values X in levels -NMAX..NMAX-1 (L gets level +
 * NMAX): the grid through the value of largest magnitude, then 18 grids
 * of (NMAX + 0.1 is) steps; the one with the best x^2-weighted
 * least-squares fit wins. */
static float fit_scale(int n, int nmax, const float *x, int8_t *L)
{
	float max = 0, amax = 0, iscale, sumlx, suml2, scale, best;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	iscale = -nmax / max;
	signed_grid(n, nmax, x, iscale, L, &sumlx, &suml2);
	scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
	best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		iscale = -(nmax + 0.1f * is) / max;
		signed_grid(n, nmax, x, iscale, NULL, &sumlx, &suml2);
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			signed_grid(n, nmax, x, iscale, L, &sumlx, &suml2);
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* Packs the 256 levels L (0..63) into ql (low 4 bits) and qh (top 2). */
static void q6_k_pack(const int8_t *L, uint8_t *b)
{
	uint8_t *ql = b, *qh = b + 128;

	for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
		for (int l = 0; l < 32; l++) {
			const int8_t *p = L + j + l;

			ql[l] = (uint8_t)((p[0] & 0xf) | ((p[64] & 0xf) << 4));
			ql[l + 32] =
			    (uint8_t)((p[32] & 0xf) | ((p[96] & 0xf) << 4));
			qh[l] = (uint8_t)((p[0] >> 4) | ((p[32] >> 4) << 2) |
					  ((p[64] >> 4) << 4) |
					  ((p[96] >> 4) << 6));
		}
}

void o1_quant_q6_k_block(const float *x, uint8_t *b)
{
	float scales[16], max_scale = 0, max_abs = 0, iscale, d_all;
	int8_t L[QK_K], *sc = (int8_t *)(b + 192);

	for (int ib = 0; ib < 16; ib++) {
		scales[ib] = fit_scale(16, 32, x + 16 * ib, L + 16 * ib);
		if (fabsf(scales[ib]) > max_abs) {
			max_abs = fabsf(scales[ib]);
			max_scale = scales[ib];
		}
	}
	if (max_abs < GROUP_MAX_EPS) {
		memset(b, 0, O1_QUANT_Q6_K_BYTES);
		return;
	}
	iscale = -128.f / max_scale;
	store_u16(b + 208, o1_quant_f32_to_f16(1 / iscale));
	for (int ib = 0; ib < 16; ib++) {
		int s = nearest_int(iscale * scales[ib]);

		sc[ib] = (int8_t)(s < 127 ? s : 127);
	}
	d_all = o1_quant_f16_to_f32(load_u16(b + 208));
	for (int j = 0; j < 16; j++) {
		float d = d_all * sc[j];

		if (d == 0)
			continue;
		for (int i = 0; i < 16; i++)
			L[16 * j + i] =
			    (int8_t)(clamp(nearest_int(x[16 * j + i] / d), -32,
					   31) +
				     32);
	}
	q6_k_pack(L, b);
}
