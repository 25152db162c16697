/* CPU reference of gemv_q.cu's int8 path (gemv_q8.h): each input unit
 * quantized, each weight unit decoded to its integers and scales, the
 * unit products in the device's f32 operations, summed in its lane order.
 * Built with -ffp-contract=off (kernels/CMakeLists.txt), so every product
 * and sum is rounded on its own as the device's __f*_rn are. */
#include "gemv_q8.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "quant_k.h"

#define LANES 32

/* An input unit: quants, scale, scale times the quants' sum. */
struct xunit {
	int32_t q[32];
	float d, s;
};

/* A weight unit: integers, scales (gemv_q8.h's names). */
struct wunit {
	int32_t a[32];
	float d, d1, m; /* Q6_K: D0, D1; Q4_K: D, M; others: d */
};

static float bf16_f32(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* __float2int_rn: nearest even, NaN 0 (|v| <= 127.x here otherwise). */
static int32_t rint_i32(float v)
{
	return v != v ? 0 : (int32_t)nearbyintf(v);
}

static void quantize_unit(const uint16_t *x, struct xunit *o)
{
	float v[32], amax = 0.0f, inv;
	int32_t qsum = 0;
	bool nan = false;

	for (int e = 0; e < 32; e++) {
		v[e] = bf16_f32(x[e]);
		amax = fmaxf(amax, fabsf(v[e]));
		nan = nan || v[e] != v[e];
	}
	o->d = nan ? NAN : amax / 127.0f;
	inv = amax > 0.0f ? 127.0f / amax : 0.0f;
	for (int e = 0; e < 32; e++) {
		o->q[e] = rint_i32(v[e] * inv);
		qsum += o->q[e];
	}
	o->s = o->d * (float)qsum;
}

size_t o1_q8_input_bytes(uint32_t m, uint32_t k)
{
	uint32_t units = k / 32, pad = (units + 31) / 32 * 32;

	return (size_t)m * pad * 2 * 16 + (size_t)m * units * 8;
}

int o1_q8_input_cpu(void *out, const uint16_t *x, uint32_t m, uint32_t k)
{
	uint32_t units = k / 32, pad = (units + 31) / 32 * 32;
	uint8_t *q = out;
	float *ds = (float *)(q + (size_t)m * pad * 2 * 16);

	if (k % 32) {
		o1_err("q8 input: %u columns, not a multiple of 32", k);
		return -EINVAL;
	}
	memset(q, 0, (size_t)m * pad * 2 * 16);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t u = 0; u < units; u++) {
			struct xunit xu;
			/* the unit's low piece (elements 0..15); its high one
			 * 32 pieces on */
			uint8_t *lo = q + ((size_t)i * pad * 2 +
					   (u & ~31u) * 2 + (u & 31)) *
					      16;

			quantize_unit(x + (size_t)i * k + 32 * u, &xu);
			for (int e = 0; e < 32; e++)
				lo[e < 16 ? e : 32 * 16 + e - 16] =
				    (uint8_t)xu.q[e];
			ds[2 * ((size_t)i * units + u)] = xu.d;
			ds[2 * ((size_t)i * units + u) + 1] = xu.s;
		}
	return 0;
}

static uint32_t u16(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static void decode_unit(enum o1_quant_type type, const uint8_t *row, uint32_t u,
			struct wunit *h)
{
	memset(h, 0, sizeof(*h));
	if (type == O1_QUANT_Q8_0) {
		const uint8_t *b = row + (size_t)u * O1_QUANT_Q8_0_BYTES;

		h->d = o1_quant_f16_to_f32((uint16_t)u16(b));
		for (int e = 0; e < 32; e++)
			h->a[e] = (int8_t)b[2 + e];
	} else if (type == O1_QUANT_Q4_0) {
		const uint8_t *b = row + (size_t)u * O1_QUANT_Q4_0_BYTES;

		h->d = o1_quant_f16_to_f32((uint16_t)u16(b));
		for (int e = 0; e < 16; e++) {
			h->a[e] = b[2 + e] & 0xf;
			h->a[16 + e] = b[2 + e] >> 4;
		}
	} else if (type == O1_QUANT_Q5_0) {
		const uint8_t *b = row + (size_t)u * O1_QUANT_Q5_0_BYTES;
		uint32_t qh = u16(b + 2) | u16(b + 4) << 16;

		h->d = o1_quant_f16_to_f32((uint16_t)u16(b));
		for (int e = 0; e < 16; e++) {
			h->a[e] = (b[6 + e] & 0xf) | (qh >> e & 1) << 4;
			h->a[16 + e] = (b[6 + e] >> 4) | (qh >> (16 + e) & 1)
							     << 4;
		}
	} else if (type == O1_QUANT_Q4_K) {
		const uint8_t *b = row + (size_t)(u / 8) * O1_QUANT_Q4_K_BYTES;
		const uint8_t *q = b + 16 + 32 * (u % 8 / 2);
		uint8_t sc, mn;

		o1_quant_q4_k_scale_min(b + 4, (int)(u % 8), &sc, &mn);
		h->d = o1_quant_f16_to_f32((uint16_t)u16(b)) * (float)sc;
		h->m = o1_quant_f16_to_f32((uint16_t)u16(b + 2)) * (float)mn;
		for (int e = 0; e < 32; e++)
			h->a[e] = u % 2 ? q[e] >> 4 : q[e] & 0xf;
	} else {
		const uint8_t *b = row + (size_t)(u / 8) * O1_QUANT_Q6_K_BYTES;
		uint32_t hf = u % 8 / 4, g = u % 4;
		const int8_t *sc = (const int8_t *)(b + 192) + 8 * hf + 2 * g;
		const uint8_t *ql = b + 64 * hf + 32 * (g % 2);
		const uint8_t *qh = b + 128 + 32 * hf;
		float d = o1_quant_f16_to_f32((uint16_t)u16(b + 208));

		h->d = d * (float)sc[0];
		h->d1 = d * (float)sc[1];
		for (int e = 0; e < 32; e++) {
			int lo = g < 2 ? ql[e] & 0xf : ql[e] >> 4;

			h->a[e] = (lo | ((qh[e] >> (2 * g)) & 3) << 4) - 32;
		}
	}
}

/* The unit product (gemv_q8.h's table). */
static float unit_product(enum o1_quant_type type, const struct wunit *h,
			  const struct xunit *x)
{
	int32_t s0 = 0, s1 = 0;

	for (int e = 0; e < 16; e++) {
		s0 += h->a[e] * x->q[e];
		s1 += h->a[16 + e] * x->q[16 + e];
	}
	switch (type) {
	case O1_QUANT_Q8_0:
		return (h->d * x->d) * (float)(s0 + s1);
	case O1_QUANT_Q4_0:
		return h->d * (x->d * (float)(s0 + s1) - 8.0f * x->s);
	case O1_QUANT_Q5_0:
		return h->d * (x->d * (float)(s0 + s1) - 16.0f * x->s);
	case O1_QUANT_Q4_K:
		return (h->d * x->d) * (float)(s0 + s1) - h->m * x->s;
	default:
		return x->d * (h->d * (float)s0 + h->d1 * (float)s1);
	}
}

/* The lane that adds unit U: Q4_K's and Q6_K's lanes take pairs of units
 * (gemv_q8.h). */
static uint32_t lane_of(enum o1_quant_type type, uint32_t u)
{
	if (type == O1_QUANT_Q4_K)
		return u / 2 % LANES;
	if (type == O1_QUANT_Q6_K)
		return (u / 8 * 4 + u % 8 / 4 * 2 + u % 2) % LANES;
	return u % LANES;
}

/* The lanes' sums (the kernel's xor butterfly), lane 0's result. */
static float lane_sum(float (*v)[LANES])
{
	for (int o = LANES / 2; o; o /= 2) {
		float t[LANES];

		for (int l = 0; l < LANES; l++)
			t[l] = (*v)[l] + (*v)[l ^ o];
		memcpy(*v, t, sizeof(t));
	}
	return (*v)[0];
}

static int check(const char *what, const void *y, const uint16_t *x,
		 const void *w, enum o1_quant_type type, uint32_t m, uint32_t n,
		 uint32_t k, uint32_t ldy, uint64_t *rb)
{
	if (y && x && w && m && n && ldy >= n && k && k % 32 == 0 &&
	    !o1_quant_row_bytes(type, k, rb))
		return 0;
	o1_err("%s: bad operands: type %u m %u n %u k %u ldy %u", what,
	       (unsigned)type, m, n, k, ldy);
	return -EINVAL;
}

/* The M input rows quantized, (M, K / 32) units. */
static struct xunit *quantize_rows(const uint16_t *x, uint32_t m, uint32_t k)
{
	uint32_t units = k / 32;
	struct xunit *xu = malloc((size_t)m * units * sizeof(*xu));

	for (size_t c = 0; xu && c < (size_t)m * units; c++)
		quantize_unit(x + 32 * c, &xu[c]);
	return xu;
}

int o1_gemv_q8_cpu(float *y, const uint16_t *x, const void *w,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   uint32_t ldy)
{
	uint64_t rb;
	uint32_t units = k / 32;
	struct xunit *xu;
	struct wunit h;

	if (check("gemv_q8", y, x, w, type, m, n, k, ldy, &rb))
		return -EINVAL;
	xu = quantize_rows(x, m, k);
	if (!xu)
		return -ENOMEM;
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			const uint8_t *row = (const uint8_t *)w + j * rb;
			float lanes[LANES] = {0};

			for (uint32_t u = 0; u < units; u++) {
				uint32_t l = lane_of(type, u);

				decode_unit(type, row, u, &h);
				lanes[l] = lanes[l] +
					   unit_product(type, &h,
							&xu[(size_t)i * units + u]);
			}
			y[(size_t)i * ldy + j] = lane_sum(&lanes);
		}
	free(xu);
	return 0;
}

/* Element E's scale in unit H, and the offset its value subtracts. */
static double scale_of(enum o1_quant_type type, const struct wunit *h, int e)
{
	return type == O1_QUANT_Q6_K && e >= 16 ? h->d1 : h->d;
}

static double offset_of(enum o1_quant_type type, const struct wunit *h)
{
	return type == O1_QUANT_Q4_0   ? 8.0 * h->d
	       : type == O1_QUANT_Q5_0 ? 16.0 * h->d
	       : type == O1_QUANT_Q4_K ? h->m
				       : 0.0;
}

/* gemv_q8.h's bound for one input unit X (values V) and weight unit H. */
static void unit_bound(enum o1_quant_type type, const struct wunit *h,
		       const struct xunit *x, const float *v, double *quant,
		       double *mag)
{
	double sw = 0, s0 = 0, s1 = 0;

	for (int e = 0; e < 32; e++) {
		double a = fabs(scale_of(type, h, e) * h->a[e]);
		double we = scale_of(type, h, e) * h->a[e] - offset_of(type, h);

		sw += fabs(we);
		*mag += a * fabs(x->q[e] * (double)x->d);
		*quant += fabs(we) * 3 * 0x1p-24 * fabs(v[e]);
		*mag += fabs(we * v[e]);
		*(e < 16 ? &s0 : &s1) += (double)h->a[e] * x->q[e];
	}
	*quant += (double)x->d / 2 * sw;
	if (type == O1_QUANT_Q6_K)
		*mag += fabs(x->d * h->d * s0) + fabs(x->d * h->d1 * s1);
	else
		*mag += fabs(x->d * (double)h->d * (s0 + s1)) +
			fabs(offset_of(type, h) * x->s);
}

int o1_gemv_q8_bound_cpu(float *bound, const uint16_t *x, const void *w,
			 enum o1_quant_type type, uint32_t m, uint32_t n,
			 uint32_t k)
{
	uint64_t rb;
	uint32_t units = k / 32;
	struct xunit *xu;
	struct wunit h;

	if (check("gemv_q8_bound", bound, x, w, type, m, n, k, n, &rb))
		return -EINVAL;
	xu = quantize_rows(x, m, k);
	if (!xu)
		return -ENOMEM;
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			const uint8_t *row = (const uint8_t *)w + j * rb;
			double quant = 0, mag = 0;

			for (uint32_t u = 0; u < units; u++) {
				const uint16_t *xr = x + (size_t)i * k + 32 * u;
				float v[32];

				for (int e = 0; e < 32; e++)
					v[e] = bf16_f32(xr[e]);
				decode_unit(type, row, u, &h);
				unit_bound(type, &h, &xu[(size_t)i * units + u],
					   v, &quant, &mag);
			}
			bound[(size_t)i * n + j] =
			    (float)((quant * (1 + 0x1p-20) + 0x1p-17 * mag) *
					(1 + 0x1p-20) +
				    1e-30);
		}
	free(xu);
	return 0;
}
