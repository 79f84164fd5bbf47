/* SPDX-License-Identifier: MIT */
/*
 * Error codes and the per-thread last-error message.
 *
 * Every fallible libtensor call returns 0 (or a non-negative count) on success and one of the
 * negative codes below on failure. The codes are negated errno values, so they can be compared
 * with -EINVAL and friends and passed to strerror(3) after negation. On failure the call also
 * stores a human-readable message for the calling thread, readable with tn_last_error(); for
 * shape, dtype and view errors the wording follows PyTorch so the message can be searched for.
 * The library never prints, never sets errno for the caller and never aborts on bad input.
 */
#ifndef TENSOR_ERROR_H
#define TENSOR_ERROR_H

#include <errno.h>

#include <tensor/macros.h>

TN_BEGIN_DECLS

/*
 * The error table: X(name, value, description). One list feeds the enum, tn_strerror() and
 * the tests.
 */
#define TN_ERROR_LIST(X)                                                                    \
	X(TN_OK, 0, "success")                                                              \
	X(TN_EINVAL, -EINVAL, "invalid argument")                                           \
	X(TN_ENOMEM, -ENOMEM, "out of memory")                                              \
	X(TN_ERANGE, -ERANGE, "index or dimension out of range")                            \
	X(TN_EOVERFLOW, -EOVERFLOW, "size or value overflows its type")                     \
	X(TN_EBADF, -EBADF, "not a live handle (freed, foreign or NULL)")                   \
	X(TN_EBUSY, -EBUSY, "object is in use")                                             \
	X(TN_ENOTSUP, -ENOTSUP, "operation not supported for this dtype or device")         \
	X(TN_ENODEV, -ENODEV, "no such device")                                             \
	X(TN_EPERM, -EPERM, "operation not permitted")                                      \
	X(TN_ENOENT, -ENOENT, "no such entry")                                              \
	X(TN_EIO, -EIO, "input/output error")                                               \
	X(TN_EEXIST, -EEXIST, "entry already exists")                                       \
	X(TN_ENOSPC, -ENOSPC, "no space left")                                              \
	X(TN_ESTALE, -ESTALE, "stale handle: the entry changed since")                     \
	X(TN_EACCES, -EACCES, "permission denied")                                          \
	X(TN_EPROTO, -EPROTO, "protocol error")                                             \
	X(TN_ECONNREFUSED, -ECONNREFUSED, "no tensord is listening on the socket")          \
	X(TN_ENOTCONN, -ENOTCONN, "the connection to tensord was lost")                     \
	X(TN_ENAMETOOLONG, -ENAMETOOLONG, "name or path too long")                          \
	X(TN_ETIMEDOUT, -ETIMEDOUT, "timed out")                                            \
	X(TN_EAGAIN, -EAGAIN, "not available yet: try again")

enum tn_error {
#define TN_X_(name, value, desc) name = (value),
	TN_ERROR_LIST(TN_X_)
#undef TN_X_
};

/*
 * tn_strerror - describe an error code.
 * @code: a value returned by a libtensor call (negative) or its negation.
 *
 * Returns a static, never-NULL string. Unknown codes give "unknown error".
 */
TN_EXPORT const char *tn_strerror(int code);

/*
 * tn_last_error - the message left by the last failing libtensor call on this thread.
 *
 * Returns a thread-local string; "" when no call has failed since the thread started or since
 * tn_clear_error(). The pointer stays valid for the life of the thread; the text changes only
 * when a later call on the same thread fails or tn_clear_error() runs (successful calls,
 * tn_strerror() and the getters never change it).
 */
TN_EXPORT const char *tn_last_error(void);

/*
 * tn_clear_error - forget the calling thread's last-error message.
 */
TN_EXPORT void tn_clear_error(void);

TN_END_DECLS

#endif /* TENSOR_ERROR_H */
