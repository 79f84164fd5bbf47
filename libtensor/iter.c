/* SPDX-License-Identifier: MIT */
/*
 * TensorIterator: build (the reference notes' order) and the loops (for_each with a grain
 * size over OpenMP threads, serial_for_each with a DimCounter taking 2-D steps). See iter.h.
 */
#include <stdlib.h>
#include <string.h>

#include "iter.h"

#define SHAPE_BUF 256

/* ---- dtypes ---- */

enum tn_dtype tn__promote_types(enum tn_dtype a, enum tn_dtype b)
{
	if (a == b)
		return a;
	if (a == TN_BOOL)
		return b;
	if (b == TN_BOOL)
		return a;
	bool fa = tn__is_floating(a), fb = tn__is_floating(b);
	if (fa && fb) {
		/* Neither 16-bit float holds the other: both go to float32. */
		if ((a == TN_FLOAT16 && b == TN_BFLOAT16) || (a == TN_BFLOAT16 && b == TN_FLOAT16))
			return TN_FLOAT32;
		return tn__itemsize(a) >= tn__itemsize(b) ? a : b;
	}
	if (fa)
		return a;
	if (fb)
		return b;
	/* Both integral. uint8 with a signed type needs the next wider signed type. */
	bool sa = tn_dtype_is_signed(a), sb = tn_dtype_is_signed(b);
	if (sa == sb)
		return tn__itemsize(a) >= tn__itemsize(b) ? a : b;
	enum tn_dtype s = sa ? a : b;
	return s == TN_INT8 ? TN_INT16 : s;
}

bool tn__can_cast(enum tn_dtype from, enum tn_dtype to)
{
	if (tn__is_floating(from) && !tn__is_floating(to))
		return false;
	if (from != TN_BOOL && to == TN_BOOL)
		return false;
	return true;
}

const char *tn__scalar_type_name(enum tn_dtype dtype)
{
	static const char *const names[] = { "Bool", "Byte",	 "Char",     "Short", "Int",
					     "Long", "Half",	 "BFloat16", "Float", "Double" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == TN_NUM_DTYPES, "a name per dtype");
	return (unsigned)dtype < TN_NUM_DTYPES ? names[dtype] : "Undefined";
}

/* PyTorch's ResultTypeState: the result of each priority class, combined by category. */
#define TN_UNDEFINED_DTYPE ((enum tn_dtype) - 1)

static enum tn_dtype promote_skip_undefined(enum tn_dtype a, enum tn_dtype b)
{
	if (a == TN_UNDEFINED_DTYPE)
		return b;
	if (b == TN_UNDEFINED_DTYPE)
		return a;
	return tn__promote_types(a, b);
}

static enum tn_dtype combine_categories(enum tn_dtype higher, enum tn_dtype lower)
{
	if (higher == TN_UNDEFINED_DTYPE)
		return lower;
	if (tn__is_floating(higher))
		return higher;
	if (higher == TN_BOOL || (lower != TN_UNDEFINED_DTYPE && tn__is_floating(lower)))
		return promote_skip_undefined(higher, lower);
	return higher;
}

enum tn_dtype tn__result_type(int n, const enum tn_dtype *dtypes, const enum tn__prio *prio)
{
	enum tn_dtype dim = TN_UNDEFINED_DTYPE, zero = TN_UNDEFINED_DTYPE,
		      wrapped = TN_UNDEFINED_DTYPE;
	for (int i = 0; i < n; i++) {
		enum tn_dtype cur = dtypes[i];
		if (prio[i] == TN_PRIO_WRAPPED) {
			/* A Python float counts as the default dtype, float32. */
			if (tn__is_floating(cur))
				cur = TN_FLOAT32;
			wrapped = promote_skip_undefined(wrapped, cur);
		} else if (prio[i] == TN_PRIO_DIM) {
			dim = promote_skip_undefined(dim, cur);
		} else {
			zero = promote_skip_undefined(zero, cur);
		}
	}
	return combine_categories(dim, combine_categories(zero, wrapped));
}

/* ---- build ---- */

void tn__iter_config_init(struct tn_iter_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->check_mem_overlap = true;
	cfg->check_all_same_dtype = true;
	cfg->resize_outputs = true;
}

void tn__iter_release(struct tn_iter *it)
{
	for (int i = 0; i < it->ntensors; i++) {
		if (it->ops[i].owned)
			tn_tensor_unref(it->ops[i].tensor);
		it->ops[i].tensor = NULL;
		it->ops[i].owned = false;
	}
	it->ntensors = 0;
}

tn_tensor *tn__iter_output(const struct tn_iter *it, int i)
{
	return tn_tensor_ref(it->ops[i].tensor);
}

static bool same_tensor(const tn_tensor *a, const tn_tensor *b)
{
	if (a == b)
		return true;
	return a->storage == b->storage && a->offset == b->offset && a->ndim == b->ndim &&
	       a->dtype == b->dtype &&
	       memcmp(a->sizes, b->sizes, (size_t)a->ndim * sizeof(int64_t)) == 0 &&
	       memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

enum overlap { OVERLAP_NO, OVERLAP_FULL, OVERLAP_PARTIAL, OVERLAP_TOO_HARD };

/* ATen's get_overlap_status. */
static enum overlap overlap_status(const tn_tensor *a, const tn_tensor *b)
{
	if (a == b)
		return OVERLAP_FULL;
	if (a->numel == 0 || b->numel == 0)
		return OVERLAP_NO;
	if (!tn__is_non_overlapping_and_dense(a) || !tn__is_non_overlapping_and_dense(b))
		return OVERLAP_TOO_HARD;
	if (a->storage != b->storage)
		return OVERLAP_NO;
	size_t ia = tn__itemsize(a->dtype), ib = tn__itemsize(b->dtype);
	int64_t a0 = a->offset * (int64_t)ia, a1 = a0 + a->numel * (int64_t)ia;
	int64_t b0 = b->offset * (int64_t)ib, b1 = b0 + b->numel * (int64_t)ib;
	if (a0 == b0 && a1 == b1)
		return a->ndim == b->ndim &&
				       memcmp(a->strides, b->strides,
					      (size_t)a->ndim * sizeof(int64_t)) == 0
			       ? OVERLAP_FULL
			       : OVERLAP_PARTIAL;
	if (a0 < b1 && b0 < a1)
		return OVERLAP_PARTIAL;
	return OVERLAP_NO;
}

/* ATen's assert_no_internal_overlap on each output (tn__check_internal_overlap: a dimension
 * of size > 1 with stride 0; other overlaps are "too hard" to prove and allowed, as in
 * PyTorch), then assert_no_partial_overlap between each output and each input. */
static int check_overlaps(const struct tn_iter *it)
{
	int rc;
	for (int o = 0; o < it->noutputs; o++) {
		const tn_tensor *out = it->ops[o].tensor;
		if (!out)
			continue;
		if ((rc = tn__check_internal_overlap(out)) < 0)
			return rc;
		for (int i = it->noutputs; i < it->ntensors; i++) {
			if (overlap_status(out, it->ops[i].tensor) == OVERLAP_PARTIAL)
				return tn__error(TN_EINVAL,
						 "unsupported operation: some elements of the input "
						 "tensor and the written-to tensor refer to a single "
						 "memory location. Please clone() the tensor before "
						 "performing the operation.");
		}
	}
	return 0;
}

/* A reduction's outputs have the input's shape with size 1 along the reduced dimensions (the
 * keepdim shape; ATen passes a view of its result with stride 0 there), so that they broadcast
 * to the input. The operator allocates them: the iterator cannot tell which dims reduce. */
static int check_reduction_outputs(const struct tn_iter *it)
{
	char a[SHAPE_BUF], b[SHAPE_BUF];

	for (int o = 0; o < it->noutputs; o++) {
		const tn_tensor *t = it->ops[o].tensor;
		bool ok = t && t->ndim == it->out_ndim;
		for (int d = 0; ok && d < t->ndim; d++)
			ok = t->sizes[d] == it->out_shape[d] || t->sizes[d] == 1;
		if (ok)
			continue;
		if (!t)
			return tn__error(TN_EINVAL, "a reduction's output %d must be given", o);
		tn__format_shape(a, sizeof(a), t->ndim, t->sizes);
		tn__format_shape(b, sizeof(b), it->out_ndim, it->out_shape);
		return tn__error(TN_EINVAL, "output with shape %s doesn't match the reduction of shape %s",
				 a, b);
	}
	return 0;
}

/* infer_size over every operand that takes part (ATen's compute_shape). */
static int compute_shape(struct tn_iter *it, const struct tn_iter_config *cfg)
{
	char a[SHAPE_BUF], b[SHAPE_BUF];
	bool first = true;

	if (cfg->has_static_shape) {
		it->out_ndim = cfg->static_ndim;
		memcpy(it->out_shape, cfg->static_shape, (size_t)cfg->static_ndim * sizeof(int64_t));
		return 0;
	}
	it->out_ndim = 0;
	for (int k = 0; k < it->ntensors; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		/* A reduction's shape is its input's: the outputs broadcast to it, not the
		 * other way round. */
		if (!t || ((cfg->resize_outputs || cfg->is_reduction) && it->ops[k].is_output))
			continue;
		if (first) {
			it->out_ndim = t->ndim;
			memcpy(it->out_shape, t->sizes, (size_t)t->ndim * sizeof(int64_t));
			first = false;
			continue;
		}
		int n = t->ndim > it->out_ndim ? t->ndim : it->out_ndim;
		int64_t merged[TN_MAX_DIMS];
		for (int i = n - 1; i >= 0; i--) {
			int off = n - 1 - i;
			int da = it->out_ndim - 1 - off, db = t->ndim - 1 - off;
			int64_t sa = da >= 0 ? it->out_shape[da] : 1, sb = db >= 0 ? t->sizes[db] : 1;
			if (sa != sb && sa != 1 && sb != 1)
				return tn__error(TN_EINVAL,
						 "The size of tensor a (%lld) must match the size of "
						 "tensor b (%lld) at non-singleton dimension %d",
						 (long long)sa, (long long)sb, i);
			merged[i] = sa == 1 ? sb : sa;
		}
		it->out_ndim = n;
		memcpy(it->out_shape, merged, (size_t)n * sizeof(int64_t));
	}
	/* An operator without inputs (a fill, a nullary kernel) iterates over its output. */
	if (first) {
		for (int o = 0; o < it->noutputs; o++) {
			const tn_tensor *t = it->ops[o].tensor;
			if (t) {
				it->out_ndim = t->ndim;
				memcpy(it->out_shape, t->sizes, (size_t)t->ndim * sizeof(int64_t));
				break;
			}
		}
	}
	if (cfg->is_reduction)
		return check_reduction_outputs(it);
	/* Outputs that may not be resized must already have the broadcast shape. */
	for (int o = 0; o < it->noutputs; o++) {
		const tn_tensor *t = it->ops[o].tensor;
		if (!t)
			continue;
		bool same = t->ndim == it->out_ndim &&
			    memcmp(t->sizes, it->out_shape, (size_t)t->ndim * sizeof(int64_t)) == 0;
		if (same)
			continue;
		tn__format_shape(a, sizeof(a), t->ndim, t->sizes);
		tn__format_shape(b, sizeof(b), it->out_ndim, it->out_shape);
		/* ATen's mark_resize_outputs: an output that is also an input (in place) is never
		 * resized, and PyTorch fails with these words too. */
		if (!cfg->resize_outputs || it->ops[o].is_read_write)
			return tn__error(TN_EINVAL,
					 "output with shape %s doesn't match the broadcast shape %s", a,
					 b);
		/* PyTorch resizes an out= tensor of another shape (with a warning when it held
		 * elements); libtensor never changes the geometry of a tensor others may hold. */
		return tn__error(TN_EINVAL,
				 "output with shape %s doesn't match the broadcast shape %s (libtensor "
				 "does not resize out= tensors)",
				 a, b);
	}
	return 0;
}

static int compute_types(struct tn_iter *it, const struct tn_iter_config *cfg, const char *who)
{
	enum tn_dtype common = TN_UNDEFINED_DTYPE;

	if (cfg->has_static_dtype) {
		common = cfg->static_dtype;
	} else if (cfg->promote_inputs_to_common_dtype) {
		enum tn_dtype dtypes[TN_ITER_MAX_OPERANDS];
		enum tn__prio prio[TN_ITER_MAX_OPERANDS];
		int n = 0;
		for (int i = it->noutputs; i < it->ntensors; i++, n++) {
			const struct tn_iter_operand *op = &it->ops[i];
			dtypes[n] = op->dtype;
			prio[n] = op->wrapped		 ? TN_PRIO_WRAPPED
				  : op->tensor->ndim > 0 ? TN_PRIO_DIM
							 : TN_PRIO_ZERO;
		}
		common = n ? tn__result_type(n, dtypes, prio) : TN_UNDEFINED_DTYPE;
	} else {
		/* The first input's dtype (else the first output's). */
		for (int i = it->noutputs; i < it->ntensors && common == TN_UNDEFINED_DTYPE; i++)
			common = it->ops[i].dtype;
		for (int i = 0; i < it->noutputs && common == TN_UNDEFINED_DTYPE; i++)
			if (it->ops[i].tensor)
				common = it->ops[i].dtype;
	}
	if (common == TN_UNDEFINED_DTYPE)
		return tn__error(TN_EINVAL, "%s: cannot infer a dtype without inputs", who);
	if (cfg->promote_integer_inputs_to_float && !tn__is_floating(common))
		common = TN_FLOAT32;
	it->common_dtype = common;

	for (int k = 0; k < it->ntensors; k++) {
		struct tn_iter_operand *op = &it->ops[k];
		if (!op->tensor) {
			op->dtype = op->target_dtype = cfg->has_output_dtype ? cfg->output_dtype : common;
			continue;
		}
		op->target_dtype = op->dtype;
		if (op->is_output) {
			if (cfg->enforce_safe_casting_to_output && !tn__can_cast(common, op->dtype))
				return tn__error(TN_EINVAL,
						 "result type %s can't be cast to the desired output "
						 "type %s",
						 tn__scalar_type_name(common),
						 tn__scalar_type_name(op->dtype));
			if (cfg->cast_common_dtype_to_outputs)
				op->target_dtype = common;
		} else if (cfg->promote_inputs_to_common_dtype) {
			op->target_dtype = common;
		}
		if (cfg->check_all_same_dtype && op->target_dtype == op->dtype &&
		    op->dtype != common)
			return tn__error(TN_EINVAL, "Found dtype %s but expected %s",
					 tn__scalar_type_name(op->dtype), tn__scalar_type_name(common));
	}
	return 0;
}

/* ATen's should_swap for reorder_dimensions: 1 to swap, -1 to keep, 0 undecided. */
static int should_swap(const struct tn_iter *it, const int64_t (*strides)[TN_MAX_DIMS],
		       const int64_t *shape, int d0, int d1)
{
	for (int k = 0; k < it->ntensors; k++) {
		if (!it->ops[k].tensor || it->ops[k].will_resize)
			continue;
		int64_t s0 = strides[k][d0], s1 = strides[k][d1];
		if (it->is_reduction && it->ops[k].is_output && (s0 == 0) != (s1 == 0))
			return s1 == 0 ? 1 : -1;
		if (s0 == 0 || s1 == 0)
			continue;
		if (s0 < s1)
			return -1;
		if (s0 > s1)
			return 1;
		if (shape[d0] > shape[d1])
			return 1;
	}
	return 0;
}

int tn__iter_build(struct tn_iter *it, const struct tn_iter_config *cfg, const char *who)
{
	int64_t tstrides[TN_ITER_MAX_OPERANDS][TN_MAX_DIMS]; /* bytes, tensor dim order */
	int n, rc;

	/* Only the fields the build reads before writing (the stride arrays are large and
	 * written before use): a full memset would cost more than a small operator. */
	it->ndim = it->out_ndim = 0;
	it->ntensors = 0;
	it->numel = 0;
	it->common_dtype = TN_BOOL;
	if (cfg->noutputs < 0 || cfg->ninputs < 0 ||
	    cfg->noutputs + cfg->ninputs > TN_ITER_MAX_OPERANDS || cfg->noutputs + cfg->ninputs == 0)
		return tn__error(TN_EINVAL, "%s: %d outputs and %d inputs", who, cfg->noutputs,
				 cfg->ninputs);
	it->noutputs = cfg->noutputs;
	it->is_reduction = cfg->is_reduction;

	/* populate_operands */
	for (int k = 0; k < cfg->noutputs + cfg->ninputs; k++) {
		const tn_tensor *t = cfg->tensors[k];
		struct tn_iter_operand *op = &it->ops[k];
		op->tensor = NULL;
		op->owned = false;
		op->data = NULL;
		op->dtype = op->target_dtype = TN_BOOL;
		op->is_read_write = op->will_resize = false;
		op->is_output = k < cfg->noutputs;
		op->wrapped = cfg->wrapped[k];
		if (!t) {
			if (!op->is_output) {
				tn__iter_release(it);
				return tn__error(TN_EINVAL, "%s: input %d is NULL", who,
						 k - cfg->noutputs);
			}
			op->will_resize = true;
			it->ntensors = k + 1;
			continue;
		}
		if (!tn__handle_is(t, TN_MAGIC_TENSOR)) {
			tn__iter_release(it);
			return tn__bad_tensor(who);
		}
		/* Borrowed, as ATen's MaybeOwned: the caller holds the operands for the call. */
		op->tensor = (tn_tensor *)t;
		op->dtype = t->dtype;
		it->ntensors = k + 1;
	}
	/* mark_outputs: an output that is also an input is read and written. */
	for (int o = 0; o < it->noutputs; o++) {
		if (!it->ops[o].tensor)
			continue;
		for (int i = it->noutputs; i < it->ntensors; i++)
			if (same_tensor(it->ops[o].tensor, it->ops[i].tensor))
				it->ops[o].is_read_write = true;
	}
	/* Every operand on one device (ATen's compute_types): the first device that is not the
	 * CPU is the common one, and a 0-dim CPU input may join it (a CPU scalar, as PyTorch
	 * allows for element-wise operators); any other operand elsewhere is refused. */
	tn_device dev = { TN_DEVICE_CPU, 0 };
	for (int k = 0; k < it->ntensors; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		if (t && dev.type == TN_DEVICE_CPU && t->storage->device.type != TN_DEVICE_CPU)
			dev = t->storage->device;
	}
	for (int k = 0; k < it->ntensors; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		char want[32], got[32];
		if (!t || (t->storage->device.type == dev.type &&
			   t->storage->device.index == dev.index))
			continue;
		if (t->storage->device.type == TN_DEVICE_CPU && t->ndim == 0 && !it->ops[k].is_output)
			continue;
		tn__format_device(want, sizeof(want), dev);
		tn__format_device(got, sizeof(got), t->storage->device);
		rc = tn__error(TN_EINVAL,
			       "Expected all tensors to be on the same device, but found at least two "
			       "devices, %s and %s!",
			       want, got);
		goto fail;
	}
	if (cfg->check_mem_overlap && (rc = check_overlaps(it)) < 0)
		goto fail;
	if ((rc = compute_shape(it, cfg)) < 0)
		goto fail;
	if ((rc = compute_types(it, cfg, who)) < 0)
		goto fail;

	/* fast_set_up (ATen's): every operand already contiguous with the broadcast shape is a
	 * single run, with nothing to reorder or coalesce. */
	n = it->out_ndim;
	bool fast = !cfg->is_reduction;
	for (int k = 0; k < it->ntensors && fast; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		fast = !t || cfg->by_value[k] || (t->contiguous && t->ndim == n &&
			      memcmp(t->sizes, it->out_shape, (size_t)n * sizeof(int64_t)) == 0);
	}
	if (fast) {
		int64_t numel = 1;
		for (int d = 0; d < n; d++)
			numel *= it->out_shape[d];
		for (int k = 0; k < it->ntensors; k++) {
			struct tn_iter_operand *op = &it->ops[k];
			if (!op->tensor) {
				if ((rc = tn__empty_like_device(dev, op->dtype, n,
								 n ? it->out_shape : NULL, NULL,
								 &op->tensor, who)) < 0)
					goto fail;
				op->owned = true;
			}
			op->strides[0] = cfg->by_value[k] && n ? 0 : (int64_t)tn__itemsize(op->dtype);
			op->data = tn__data(op->tensor);
		}
		for (int i = 0; i < n; i++)
			it->perm[i] = n - 1 - i;
		it->ndim = n ? 1 : 0; /* a 0-dim result stays 0-dim */
		it->shape[0] = numel;
		it->numel = numel;
		return 0;
	}

	/* The layout each operand shows ATen's layout decisions. On the CPU, ATen's
	 * compute_types replaces an input it promotes by input.to(common_dtype) (our loops
	 * convert chunk by chunk instead), whose strides are the input's when it is
	 * non-overlapping and dense and otherwise infer_dense_strides of them: the outputs are
	 * laid out from those. */
	/* Inferred strides are written into the rows of lstrides, which reorder_dimensions'
	 * strides replace in place below (one buffer: the build's stack is large already). */
	int64_t lstrides_buf[TN_ITER_MAX_OPERANDS][TN_MAX_DIMS];
	const int64_t *lay[TN_ITER_MAX_OPERANDS]; /* elements, tensor dim order */
	bool any_inferred = false, is_inferred[TN_ITER_MAX_OPERANDS];
	for (int k = 0; k < it->ntensors; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		is_inferred[k] = false;
		if (!t)
			continue;
		lay[k] = t->strides;
		if (!it->ops[k].is_output && it->ops[k].target_dtype != t->dtype &&
		    dev.type == TN_DEVICE_CPU && !tn__is_non_overlapping_and_dense(t)) {
			tn__infer_dense_strides(t, lstrides_buf[k]);
			lay[k] = lstrides_buf[k];
			is_inferred[k] = any_inferred = true;
		}
	}

	/* ATen's fast setups (compute_fast_setup_type), when every operand has the broadcast
	 * shape: all contiguous gives contiguous outputs, all channels-last contiguous gives
	 * channels-last outputs, and all non-overlapping and dense with the same strides gives
	 * outputs with those strides (size-1 dimensions included, which the permutation below
	 * would not give). The outputs are allocated here; the loop runs through the general
	 * setup, over the operands' own strides. */
	bool same = !cfg->is_reduction;
	for (int k = 0; k < it->ntensors && same; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		same = !t || cfg->by_value[k] || (t->ndim == n &&
			      memcmp(t->sizes, it->out_shape, (size_t)n * sizeof(int64_t)) == 0);
	}
	if (same) {
		bool contig = true, cl = n == 4, nod = true;
		int last = -1;
		for (int k = 0; k < it->ntensors; k++) {
			const tn_tensor *t = it->ops[k].tensor;
			if (!t || cfg->by_value[k])
				continue;
			contig = contig && (is_inferred[k] ? tn__compute_contiguous(n, t->sizes, lay[k],
										 t->numel)
							   : t->contiguous);
			cl = cl && (is_inferred[k] ? (n == 4 && tn__compute_channels_last(n, t->sizes, lay[k]))
						   : t->channels_last);
		}
		/* Inputs first, from the last, as ATen compares them. */
		for (int k = it->ntensors - 1; k >= 0 && !contig && !cl && nod; k--) {
			const tn_tensor *t = it->ops[k].tensor;
			if (!t || cfg->by_value[k])
				continue;
			/* The cheap test first: strides that differ settle it. */
			if (last >= 0 && memcmp(lay[last], lay[k], (size_t)n * sizeof(int64_t)))
				nod = false;
			else
				nod = is_inferred[k] || t->contiguous || tn__is_non_overlapping_and_dense(t);
			last = k;
		}
		if (contig || cl || (nod && last >= 0)) {
			int64_t strides[TN_MAX_DIMS];
			rc = 0;
			if (contig)
				rc = tn__format_strides(n, it->out_shape, TN_CONTIGUOUS_FORMAT, strides, who);
			else if (cl)
				rc = tn__format_strides(n, it->out_shape, TN_CHANNELS_LAST, strides, who);
			else
				memcpy(strides, lay[last], (size_t)n * sizeof(int64_t));
			if (rc < 0)
				goto fail;
			for (int o = 0; o < it->noutputs; o++) {
				struct tn_iter_operand *op = &it->ops[o];
				if (op->tensor)
					continue;
				if ((rc = tn__empty_like_device(dev, op->dtype, n, n ? it->out_shape : NULL,
								 n ? strides : NULL, &op->tensor,
								 who)) < 0)
					goto fail;
				op->owned = true;
			}
		}
	}

	/* compute_strides: byte strides of each operand broadcast to the shape. */
	for (int k = 0; k < it->ntensors; k++) {
		const tn_tensor *t = it->ops[k].tensor;
		if (!t)
			continue;
		int64_t isz = (int64_t)tn__itemsize(t->dtype);
		int off = n - t->ndim;
		for (int d = 0; d < n; d++) {
			int td = d - off;
			tstrides[k][d] = (td < 0 || (t->sizes[td] == 1 && it->out_shape[d] != 1))
						 ? 0
						 : t->strides[td] * isz;
		}
	}

	/* The strides ATen's reorder_dimensions compares (bytes, broadcast): the operands' own,
	 * except those of inputs it would have converted (above). */
	int64_t(*lstrides)[TN_MAX_DIMS] = tstrides;
	if (any_inferred) {
		lstrides = lstrides_buf;
		for (int k = 0; k < it->ntensors; k++) {
			const tn_tensor *t = it->ops[k].tensor;
			if (!t || it->ops[k].will_resize) /* should_swap skips these */
				continue;
			int64_t isz = (int64_t)tn__itemsize(t->dtype);
			int off = n - t->ndim;
			/* Downwards: row k may hold lay[k], read at td <= d before d is written. */
			for (int d = n - 1; d >= 0; d--) {
				int td = d - off;
				lstrides[k][d] =
					(td < 0 || (t->sizes[td] == 1 && it->out_shape[d] != 1))
						? 0
						: lay[k][td] * isz;
			}
		}
	}

	/* reorder_dimensions: fastest first. */
	int perm[TN_MAX_DIMS];
	for (int i = 0; i < n; i++)
		perm[i] = n - 1 - i;
	for (int i = 1; i < n; i++) {
		int d1 = i;
		for (int d0 = i - 1; d0 >= 0; d0--) {
			int c = should_swap(it, (const int64_t(*)[TN_MAX_DIMS])lstrides, it->out_shape,
					    perm[d0], perm[d1]);
			if (c > 0) {
				int tmp = perm[d0];
				perm[d0] = perm[d1];
				perm[d1] = tmp;
				d1 = d0;
			} else if (c < 0) {
				break;
			}
		}
	}
	memcpy(it->perm, perm, sizeof(perm[0]) * (size_t)n);

	/* allocate_outputs: in the inputs' layout (perm order is contiguous). */
	for (int o = 0; o < it->noutputs; o++) {
		struct tn_iter_operand *op = &it->ops[o];
		if (op->tensor)
			continue;
		/* ATen's allocate_or_resize_outputs: where the permutation is the inverted order
		 * the output is contiguous (strides over max(size, 1)); otherwise its
		 * compatible_stride, the running product of the sizes in perm order, a size of 0
		 * included (the dimensions after it get stride 0, as in PyTorch). The two differ
		 * only when a size is 0. */
		int64_t strides[TN_MAX_DIMS], acc = 1;
		bool inverted = true;
		for (int i = 0; i < n; i++)
			inverted = inverted && perm[i] == n - 1 - i;
		if (inverted) {
			if ((rc = tn__contiguous_strides(n, it->out_shape, strides)) < 0)
				goto fail;
		} else {
			for (int i = 0; i < n; i++) {
				strides[perm[i]] = acc;
				acc *= it->out_shape[perm[i]];
			}
		}
		if ((rc = tn__empty_like_device(dev, op->dtype, n, n ? it->out_shape : NULL,
						 n ? strides : NULL, &op->tensor, who)) < 0)
			goto fail;
		op->owned = true;
		int64_t isz = (int64_t)tn__itemsize(op->dtype);
		for (int d = 0; d < n; d++)
			tstrides[o][d] = it->out_shape[d] == 1 ? 0 : strides[d] * isz;
	}

	/* Permute into iterator order and coalesce. */
	for (int i = 0; i < n; i++)
		it->shape[i] = it->out_shape[perm[i]];
	for (int k = 0; k < it->ntensors; k++) {
		struct tn_iter_operand *op = &it->ops[k];
		for (int i = 0; i < n; i++)
			op->strides[i] = tstrides[k][perm[i]];
		op->data = tn__data(op->tensor);
	}
	it->ndim = n;
	it->numel = 1;
	for (int i = 0; i < n; i++)
		it->numel *= it->shape[i];
	/* coalesce_dimensions. In a reduction the outputs' stride 0 along the reduced dims keeps
	 * those apart from the others (0 * size is no other dim's stride), and reordering has put
	 * them first: the reduced dims stay the fastest, merged among themselves. */
	if (n > 1) {
		int prev = 0;
		for (int d = 1; d < n; d++) {
			bool can = it->shape[prev] == 1 || it->shape[d] == 1;
			if (!can) {
				can = true;
				for (int k = 0; k < it->ntensors; k++)
					can &= it->shape[prev] * it->ops[k].strides[prev] ==
					       it->ops[k].strides[d];
			}
			if (can) {
				if (it->shape[prev] == 1)
					for (int k = 0; k < it->ntensors; k++)
						it->ops[k].strides[prev] = it->ops[k].strides[d];
				it->shape[prev] *= it->shape[d];
			} else {
				prev++;
				if (prev != d) {
					for (int k = 0; k < it->ntensors; k++)
						it->ops[k].strides[prev] = it->ops[k].strides[d];
					it->shape[prev] = it->shape[d];
				}
			}
		}
		it->ndim = prev + 1;
	}
	return 0;
fail:
	tn__iter_release(it);
	return rc;
}

/* ---- loops ---- */

void tn__iter_serial_for_each(const struct tn_iter *it, tn_loop2d_fn loop, void *ctx,
			      int64_t begin, int64_t end)
{
	char *ptrs[TN_ITER_MAX_OPERANDS];
	int64_t strides[2 * TN_ITER_MAX_OPERANDS];
	int nt = it->ntensors;

	if (begin >= end)
		return;
	if (it->ndim <= 1) { /* one run: no counter */
		for (int k = 0; k < nt; k++) {
			int64_t st = it->ndim ? it->ops[k].strides[0] : 0;
			ptrs[k] = it->ops[k].data + begin * st;
			strides[k] = st;
			strides[nt + k] = 0;
		}
		loop(ctx, ptrs, strides, end - begin, 1);
		return;
	}
	/* DimCounter: the position of @begin in each dimension. */
	int64_t values[TN_MAX_DIMS] = { 0 }, rem = begin, offset = begin;
	for (int d = 0; d < it->ndim; d++) {
		if (it->shape[d] > 0) {
			values[d] = rem % it->shape[d];
			rem /= it->shape[d];
		}
	}
	for (int k = 0; k < nt; k++) {
		strides[k] = it->ops[k].strides[0];
		strides[nt + k] = it->ndim > 1 ? it->ops[k].strides[1] : 0;
	}
	while (offset < end) {
		/* max_2d_step */
		int64_t step0 = it->shape[0] - values[0], step1 = 1;
		if (step0 > end - offset)
			step0 = end - offset;
		if (values[0] == 0 && it->ndim > 1 && step0 == it->shape[0]) {
			step1 = it->shape[1] - values[1];
			int64_t rows = (end - offset) / it->shape[0];
			if (step1 > rows)
				step1 = rows;
		}
		for (int k = 0; k < nt; k++) {
			char *p = it->ops[k].data;
			for (int d = 0; d < it->ndim; d++)
				p += values[d] * it->ops[k].strides[d];
			ptrs[k] = p;
		}
		loop(ctx, ptrs, strides, step0, step1);
		/* increment */
		offset += step0 * step1;
		int64_t overflow = step0;
		int d = 0;
		if (step1 != 1) {
			d = 1;
			overflow = step1;
		}
		for (; d < it->ndim && overflow > 0; d++) {
			int64_t v = values[d] + overflow;
			if (v >= it->shape[d]) {
				overflow = 1;
				v -= it->shape[d];
			} else {
				overflow = 0;
			}
			values[d] = v;
		}
	}
}

/* for_each's range of one thread. */
struct for_each_ctx {
	const struct tn_iter *it;
	tn_loop2d_fn loop;
	void *ctx;
};

static void for_each_range(void *arg, int64_t begin, int64_t end, int tid)
{
	const struct for_each_ctx *c = arg;
	(void)tid;
	tn__iter_serial_for_each(c->it, c->loop, c->ctx, begin, end);
}

void tn__iter_for_each(const struct tn_iter *it, tn_loop2d_fn loop, void *ctx, int64_t grain)
{
	int64_t numel = it->numel;
	int threads = numel > grain ? tn__num_threads() : 1;

	if (threads > 1) {
		int64_t chunks = (numel + grain - 1) / grain;
		if (chunks < threads)
			threads = (int)chunks;
		struct for_each_ctx c = { it, loop, ctx };
		tn__parallel_for(numel, threads, for_each_range, &c);
		return;
	}
	tn__iter_serial_for_each(it, loop, ctx, 0, numel);
}
