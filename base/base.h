/* SPDX-License-Identifier: MIT */
/*
 * The base floor: what every other folder may use and what uses nothing of theirs. The
 * thread's last error, the library's own memory with fault injection, and handles (structs
 * whose first word is a magic, quarantined when freed so a stale pointer is refused).
 *
 * Nothing here knows tensors, storages, arenas or devices (DESIGN.md section 3). Never
 * installed; the names are tn__* and may change at any time.
 */
#ifndef TN_BASE_H
#define TN_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tensor/macros.h>
#include <tensor/error.h>

#define TN_UNUSED __attribute__((unused))
#define TN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors (error.c) ---- */

/* Format the calling thread's last-error message and return @code, so a failure is one line:
 * return tn__error(TN_EINVAL, "...", ...); */
int tn__error(int code, const char *fmt, ...) TN_PRINTF(2, 3);
int tn__verror(int code, const char *fmt, va_list ap) TN_PRINTF(2, 0);

/* The code of the calling thread's last tn__error, 0 when the message was cleared since. */
int tn__last_error_code(void);
/* How many errors the calling thread has reported: a callee reported one when it changed. */
uint64_t tn__error_seq(void);
/* The calling thread's error state, kept across clean-up calls that may set their own
 * (a deleter, a release after a failure). */
struct tn__saved_error {
	char message[1024];
	int code;
};
void tn__error_save(struct tn__saved_error *s);
void tn__error_restore(const struct tn__saved_error *s);

/* Format "[2, 3]" into @buf (always NUL-terminated, truncated with "...]" if too small). */
void tn__format_shape(char *buf, size_t len, int n, const int64_t *values);

/* ---- memory (memory.c) ---- */

/* Every allocation the library makes goes through these, so fault injection sees them all. */
void *tn__malloc(size_t size);
void *tn__calloc(size_t n, size_t size);
void tn__free(void *ptr);
/* True when the injected fault fires for this attempt (counts the attempt). */
bool tn__fault_fires(void);

/* ---- handles (handle.c) ---- */

/* Handles: structs whose first member is a 32-bit magic. Freed handles get TN_MAGIC_DEAD and
 * sit in a quarantine before their memory is returned, so a stale pointer is refused (EBADF)
 * rather than read after free. */
#define TN_MAGIC_STORAGE 0x53544f52u /* "STOR" */
#define TN_MAGIC_TENSOR 0x54454e53u  /* "TENS" */
#define TN_MAGIC_GENERATOR 0x524e4753u /* "RNGS" */
#define TN_MAGIC_DEAD 0xdeadbeefu
void *tn__handle_alloc(size_t size, uint32_t magic);
void tn__handle_free(void *handle);
static inline bool tn__handle_is(const void *handle, uint32_t magic)
{
	return handle && *(const volatile uint32_t *)handle == magic;
}
uint64_t tn__live_handles(void);

/* ---- per-thread state (handle.c) ---- */

/* A kind of per-thread state: @size zeroed bytes made on a thread's first use, passed to
 * @destroy (which frees them) when the thread exits. Define one with TN_THREAD_KEY. */
struct tn__thread_key {
	pthread_once_t once;
	void (*init)(void);
	pthread_key_t key;
	bool key_ok;
	size_t size;
	void (*destroy)(void *);
};
#define TN_THREAD_KEY(name, type, destroy_fn)                                       \
	static void name##_init(void);                                                \
	static struct tn__thread_key name = { PTHREAD_ONCE_INIT, name##_init, 0, false, \
					      sizeof(type), destroy_fn };             \
	static void name##_init(void)                                                 \
	{                                                                             \
		name.key_ok = pthread_key_create(&name.key, name.destroy) == 0;        \
	}

void *tn__thread_state_slow(struct tn__thread_key *k, void **tls);
/* The calling thread's state of kind @k, cached in the thread-local pointer *@tls; NULL when
 * out of memory (callers then do without it). */
#define tn__thread_state(k, tls)                                                     \
	(TN_LIKELY(*(tls) != NULL) ? *(tls)                                           \
				   : (__typeof__(*(tls)))tn__thread_state_slow((k), (void **)(tls)))

#endif /* TN_BASE_H */
