/* SPDX-License-Identifier: MIT */
/*
 * The contiguous fill kernel and the streaming copy, compiled once per CPU capability (see
 * stub.h): DEFAULT with SSE2 (the x86-64 baseline), AVX2 with 256-bit and AVX512 with 512-bit
 * stores.
 *
 * The element is replicated into one vector register, the head is written element by element
 * up to the vector alignment (the head is a whole number of elements, since the element size
 * divides the vector width, so the pattern's phase is unchanged), the body with aligned
 * vector stores, the tail element by element. Fills larger than the last-level caches use
 * non-temporal (streaming) stores, as memset does: they skip the read-for-ownership of each
 * line and run at the memory's write bandwidth instead of about half of it; smaller fills
 * keep their lines in cache for whoever reads them next.
 */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "stub.h"

static void put(unsigned char *p, const void *elem, size_t itemsize)
{
	memcpy(p, elem, itemsize);
}

#if defined(__AVX512F__)
#define VEC_BYTES 64
typedef __m512i vec;
static inline vec splat(const unsigned char *pat) { return _mm512_loadu_si512((const void *)pat); }
static inline void store(unsigned char *p, vec v) { _mm512_store_si512((void *)p, v); }
static inline void stream(unsigned char *p, vec v) { _mm512_stream_si512((void *)p, v); }
static inline vec load(const unsigned char *p) { return _mm512_loadu_si512((const void *)p); }
#elif defined(__AVX2__)
#define VEC_BYTES 32
typedef __m256i vec;
static inline vec splat(const unsigned char *pat) { return _mm256_loadu_si256((const void *)pat); }
static inline void store(unsigned char *p, vec v) { _mm256_store_si256((void *)p, v); }
static inline void stream(unsigned char *p, vec v) { _mm256_stream_si256((void *)p, v); }
static inline vec load(const unsigned char *p) { return _mm256_loadu_si256((const void *)p); }
#elif defined(__SSE2__)
#define VEC_BYTES 16
typedef __m128i vec;
static inline vec splat(const unsigned char *pat) { return _mm_loadu_si128((const void *)pat); }
static inline void store(unsigned char *p, vec v) { _mm_store_si128((void *)p, v); }
static inline void stream(unsigned char *p, vec v) { _mm_stream_si128((void *)p, v); }
static inline vec load(const unsigned char *p) { return _mm_loadu_si128((const void *)p); }
#endif

void TN_KERNEL_FN(tn__fill_kernel)(void *dst, const void *elem, size_t itemsize, int64_t count)
{
	unsigned char *d = dst;
	size_t n = (size_t)count;

	if (count <= 0)
		return;
#ifdef VEC_BYTES
	unsigned char pat[VEC_BYTES];
	for (size_t i = 0; i < VEC_BYTES; i += itemsize)
		memcpy(pat + i, elem, itemsize);
	/* Head: whole elements up to the vector alignment. */
	while (n && ((uintptr_t)d % VEC_BYTES)) {
		put(d, elem, itemsize);
		d += itemsize;
		n--;
	}
	size_t bytes = n * itemsize, body = bytes - bytes % VEC_BYTES;
	vec v = splat(pat);
	if (body >= (size_t)TN_STREAM_BYTES) {
		for (size_t off = 0; off < body; off += VEC_BYTES)
			stream(d + off, v);
		/* Streaming stores are weakly ordered: fence them before the data is
		 * published to another thread or process. */
		_mm_sfence();
	} else {
		/* Four stores per iteration: the loop overhead would otherwise cost as much as
		 * the stores on an in-cache block. */
		size_t off = 0;
		for (; off + 4 * VEC_BYTES <= body; off += 4 * VEC_BYTES) {
			store(d + off, v);
			store(d + off + VEC_BYTES, v);
			store(d + off + 2 * VEC_BYTES, v);
			store(d + off + 3 * VEC_BYTES, v);
		}
		for (; off < body; off += VEC_BYTES)
			store(d + off, v);
	}
	d += body;
	n -= body / itemsize;
#endif
	/* Tail (and the whole fill where there is no vector unit). */
	switch (itemsize) {
	case 1:
		memset(d, *(const unsigned char *)elem, n);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			put(d + i * itemsize, elem, itemsize);
		break;
	}
}

/*
 * Copy @bytes from @src (a buffer in cache) to @dst with streaming stores, for element-wise
 * operators whose output is larger than the caches: the operator computes a block into a
 * small buffer and streams it out, so the output lines are written without first being read
 * (the read-for-ownership a plain store pays), which moves 3 bytes of memory traffic per
 * output byte of a binary operator instead of 4. The stores are weakly ordered: the caller
 * fences (tn__store_fence) before the data is read by another thread.
 */
void TN_KERNEL_FN(tn__stream_copy_kernel)(void *dst, const void *src, size_t bytes)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

#ifdef VEC_BYTES
	size_t head = (VEC_BYTES - (uintptr_t)d % VEC_BYTES) % VEC_BYTES;
	if (head > bytes)
		head = bytes;
	memcpy(d, s, head);
	d += head;
	s += head;
	bytes -= head;
	size_t body = bytes - bytes % VEC_BYTES;
	for (size_t off = 0; off < body; off += VEC_BYTES)
		stream(d + off, load(s + off));
	d += body;
	s += body;
	bytes -= body;
#endif
	memcpy(d, s, bytes);
}
