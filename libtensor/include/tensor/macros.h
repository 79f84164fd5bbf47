/* SPDX-License-Identifier: MIT */
/*
 * Export and linkage macros shared by every public libtensor header.
 *
 * The library is built with -fvisibility=hidden; only declarations marked TN_EXPORT are
 * visible, and the version script (libtensor.map) pins each one to a symbol version node.
 */
#ifndef TENSOR_MACROS_H
#define TENSOR_MACROS_H

#if defined(__GNUC__) && defined(TN_BUILDING_LIBRARY)
#define TN_EXPORT __attribute__((visibility("default")))
#else
#define TN_EXPORT
#endif

#if defined(__GNUC__)
#define TN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TN_PRINTF(fmt, args)
#endif

#ifdef __cplusplus
#define TN_BEGIN_DECLS extern "C" {
#define TN_END_DECLS }
#else
#define TN_BEGIN_DECLS
#define TN_END_DECLS
#endif

/* The largest number of dimensions a tensor may have (PyTorch's TensorIterator limit). */
#define TN_MAX_DIMS 64

#endif /* TENSOR_MACROS_H */
