/* SPDX-License-Identifier: MIT */
/*
 * DLPack: exchanging tensors with other libraries (PyTorch, NumPy, CuPy, JAX...) without copying.
 *
 * The data structures are DLPack's (https://dmlc.github.io/dlpack/latest/), written here from
 * the specification so that no DLPack header is needed: the legacy DLManagedTensor that
 * PyTorch 1.13 and NumPy 1.24 exchange (DLPack 0.x), and the versioned
 * DLManagedTensorVersioned of DLPack 1.x, with its read-only and is-copied flags. They are
 * ABI-compatible with dlpack.h: when a DLPack header was included first, its definitions are
 * used, and only what a 0.x header lacks (the versioned structure, kDLBool, the flags) is
 * added; including dlpack.h after this header is harmless (its include guard is defined).
 */
#ifndef TENSOR_DLPACK_H
#define TENSOR_DLPACK_H

#include <stdint.h>

#include <tensor/macros.h>
#include <tensor/tensor.h>

TN_BEGIN_DECLS

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_EXTERN_C
#define DLPACK_DLL

/* Where the data lives (DLPack's codes). */
typedef enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLCUDAHost = 3,
	kDLOpenCL = 4,
	kDLVulkan = 7,
	kDLMetal = 8,
	kDLVPI = 9,
	kDLROCM = 10,
	kDLROCMHost = 11,
	kDLExtDev = 12,
	kDLCUDAManaged = 13,
	kDLOneAPI = 14,
	kDLWebGPU = 15,
	kDLHexagon = 16,
} DLDeviceType;

typedef struct {
	DLDeviceType device_type;
	int32_t device_id;
} DLDevice;

/* Type codes; a type is a code, a width in bits and a number of lanes. */
typedef enum {
	kDLInt = 0U,
	kDLUInt = 1U,
	kDLFloat = 2U,
	kDLOpaqueHandle = 3U,
	kDLBfloat = 4U,
	kDLComplex = 5U,
	kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

/* The tensor: element [0, ..., 0] lies at (char *)data + byte_offset; shape and strides (in
 * elements; NULL strides: compact row-major) have ndim entries. */
typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
} DLTensor;

/* The legacy (unversioned) managed tensor: the consumer calls deleter(self) once when done. */
typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#endif /* DLPACK_DLPACK_H_ */

/* What a DLPack 0.x header lacks. */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#if !defined(DLPACK_MAJOR_VERSION)
#define kDLBool ((DLDataTypeCode)6U)
#endif

typedef struct {
	uint32_t major;
	uint32_t minor;
} DLPackVersion;

/* The consumer must not write through the tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The producer made a copy for this exchange: the consumer owns the bytes alone. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

/* The versioned managed tensor of DLPack 1.x: a consumer checks version.major first. */
typedef struct DLManagedTensorVersioned {
	DLPackVersion version;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensorVersioned *self);
	uint64_t flags;
	DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/*
 * tn_to_dlpack - export @tensor as a legacy DLManagedTensor (DLPack 0.x: what PyTorch 1.13's
 * from_dlpack and NumPy 1.24's from_dlpack take). tn_to_dlpack_versioned - as a DLPack 1.x
 * DLManagedTensorVersioned, with DLPACK_FLAG_BITMASK_READ_ONLY set when the tensor is read-only
 * (a sealed arena tensor, a read-only mapping).
 *
 * The managed tensor describes the tensor's bytes in place (no copy): data points at its first
 * element (byte_offset 0), shape and strides (in elements) are its own, the device is kDLCPU,
 * or kDLCUDA with the device index. It holds a reference to the tensor, and so to its storage
 * and an arena block's hold, until the consumer calls its deleter, once. bool exports as kDLBool
 * (8 bits), which DLPack 0.x consumers (PyTorch 1.13) refuse; bfloat16 as kDLBfloat.
 * *ret_managed gets it. Errors: TN_EBADF (not a tensor), TN_EINVAL (NULL ret_managed, a Meta
 * tensor: no data), TN_ENOMEM.
 */
TN_EXPORT int tn_to_dlpack(const tn_tensor *tensor, DLManagedTensor **ret_managed);
TN_EXPORT int tn_to_dlpack_versioned(const tn_tensor *tensor,
				     DLManagedTensorVersioned **ret_managed);

/*
 * tn_from_dlpack - a tensor over the bytes a producer exported as @managed (no copy), which it
 * takes over: the producer's deleter is called once the tensor, its views and its storage are
 * gone. tn_from_dlpack_versioned - the same for DLPack 1.x; a tensor flagged read-only becomes
 * read-only (operators refuse to write to it), and a major version other than 1 is refused.
 * A tensor libtensor exported comes back as a new tensor over the same storage (the deleter is
 * called at once). Types: bool (kDLBool, 8 bits), uint8, int8/16/32/64, float16/32/64,
 * bfloat16, one lane; devices: kDLCPU and kDLCUDAHost (host memory), kDLCUDA. Strides must not
 * be negative (as PyTorch refuses them); NULL strides are row-major.
 * On failure @managed stays the caller's (its deleter is not called). Errors: TN_EINVAL (NULL
 * arguments, a bad ndim, shape or stride, a size that overflows), TN_ENOTSUP (a type, a lane
 * count, a device or a version libtensor does not take; the message names it), TN_ENOMEM.
 */
TN_EXPORT int tn_from_dlpack(DLManagedTensor *managed, tn_tensor **ret_tensor);
TN_EXPORT int tn_from_dlpack_versioned(DLManagedTensorVersioned *managed,
				       tn_tensor **ret_tensor);

TN_END_DECLS

#endif /* TENSOR_DLPACK_H */
