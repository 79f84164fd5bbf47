/* SPDX-License-Identifier: MIT */
/*
 * ResNet-18 on libtensor (see resnet.h), as torchvision composes it:
 *     x = maxpool(relu(bn1(conv1(images))))               7x7 stride 2, 3x3 stride 2
 *     x = block(x) for the 8 BasicBlocks of layer1..layer4  widths 64, 128, 256, 512
 *     logits = fc(flatten(adaptive_avg_pool2d(x, 1)))
 * Every step is a libtensor operator (conv2d, batch_norm with the running statistics, relu_,
 * add_, max_pool2d, adaptive_avg_pool2d, reshape, linear). Each activation is unreferenced as
 * soon as the next one exists, and the ReLUs and the residual sums work in place on tensors
 * the forward pass made itself, so that no more than a block's few activations are alive at
 * a time. The operators keep a channels-last batch channels-last, so such images need nothing
 * of their own here.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "resnet.h"

const char *resnet18_last_error(void)
{
	return model_last_error();
}

/* One weight: looked up, checked to be float32 of shape @sizes. */
static int bind(tn_tensor **slot, resnet18_get_fn get, void *ctx, const char *name, int ndim,
		const int64_t *sizes)
{
	return model_bind(slot, get, ctx, "resnet18", name, ndim, sizes);
}

/* A convolution's weight, [out, in, k, k]. */
static int bind_conv(tn_tensor **slot, resnet18_get_fn get, void *ctx, const char *name,
		     int64_t out, int64_t in, int64_t k)
{
	return bind(slot, get, ctx, name, 4, (int64_t[]){ out, in, k, k });
}

/* The four tensors of batch norm @prefix ("bn1", "layer1.0.bn2", ...) of @c channels. */
static int bind_bn(struct resnet18_bn *bn, resnet18_get_fn get, void *ctx, const char *prefix,
		   int64_t c)
{
	static const struct {
		const char *suffix;
		size_t off;
	} p[] = {
		{ "weight", offsetof(struct resnet18_bn, weight) },
		{ "bias", offsetof(struct resnet18_bn, bias) },
		{ "running_mean", offsetof(struct resnet18_bn, mean) },
		{ "running_var", offsetof(struct resnet18_bn, var) },
	};
	char name[96];
	int rc;
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		snprintf(name, sizeof(name), "%s.%s", prefix, p[i].suffix);
		if ((rc = bind((tn_tensor **)((char *)bn + p[i].off), get, ctx, name, 1, &c)) < 0)
			return rc;
	}
	return 0;
}

int resnet18_load(struct resnet18 *m, int64_t num_classes, resnet18_get_fn get, void *ctx)
{
	static const int64_t width[4] = { 64, 128, 256, 512 };
	char name[96];
	int rc;

	model_clear_error();
	memset(m, 0, sizeof(*m));
	if (num_classes <= 0)
		return model_fail(TN_EINVAL,
				 "resnet18: the number of classes must be positive, not %lld",
				 (long long)num_classes);
	m->num_classes = num_classes;
	if ((rc = bind_conv(&m->conv1, get, ctx, "conv1.weight", 64, 3, 7)) < 0 ||
	    (rc = bind_bn(&m->bn1, get, ctx, "bn1", 64)) < 0)
		goto fail;
	int64_t in = 64;
	for (int i = 0; i < 8; i++) {
		struct resnet18_block *b = &m->blocks[i];
		const int layer = i / 2 + 1, idx = i % 2;
		const int64_t c = width[i / 2];
		b->stride = layer > 1 && idx == 0 ? 2 : 1;
		snprintf(name, sizeof(name), "layer%d.%d.conv1.weight", layer, idx);
		if ((rc = bind_conv(&b->conv1, get, ctx, name, c, in, 3)) < 0)
			goto fail;
		snprintf(name, sizeof(name), "layer%d.%d.bn1", layer, idx);
		if ((rc = bind_bn(&b->bn1, get, ctx, name, c)) < 0)
			goto fail;
		snprintf(name, sizeof(name), "layer%d.%d.conv2.weight", layer, idx);
		if ((rc = bind_conv(&b->conv2, get, ctx, name, c, c, 3)) < 0)
			goto fail;
		snprintf(name, sizeof(name), "layer%d.%d.bn2", layer, idx);
		if ((rc = bind_bn(&b->bn2, get, ctx, name, c)) < 0)
			goto fail;
		if (b->stride != 1 || in != c) {
			snprintf(name, sizeof(name), "layer%d.%d.downsample.0.weight", layer, idx);
			if ((rc = bind_conv(&b->down, get, ctx, name, c, in, 1)) < 0)
				goto fail;
			snprintf(name, sizeof(name), "layer%d.%d.downsample.1", layer, idx);
			if ((rc = bind_bn(&b->down_bn, get, ctx, name, c)) < 0)
				goto fail;
		}
		in = c;
	}
	if ((rc = bind(&m->fc_w, get, ctx, "fc.weight", 2, (int64_t[]){ num_classes, 512 })) < 0 ||
	    (rc = bind(&m->fc_b, get, ctx, "fc.bias", 1, &num_classes)) < 0)
		goto fail;
	return 0;
fail:
	resnet18_free(m);
	return rc;
}

static void bn_free(struct resnet18_bn *bn)
{
	tn_tensor_unref(bn->weight);
	tn_tensor_unref(bn->bias);
	tn_tensor_unref(bn->mean);
	tn_tensor_unref(bn->var);
}

void resnet18_free(struct resnet18 *m)
{
	tn_tensor_unref(m->conv1);
	bn_free(&m->bn1);
	for (int i = 0; i < 8; i++) {
		struct resnet18_block *b = &m->blocks[i];
		tn_tensor_unref(b->conv1);
		tn_tensor_unref(b->conv2);
		tn_tensor_unref(b->down);
		bn_free(&b->bn1);
		bn_free(&b->bn2);
		bn_free(&b->down_bn);
	}
	tn_tensor_unref(m->fc_w);
	tn_tensor_unref(m->fc_b);
	memset(m, 0, sizeof(*m));
}

/* bn(conv(x)) (square kernel, no bias, @stride and @pad on both dims), then a ReLU in place
 * when @relu. */
static int conv_bn(const tn_tensor *x, const tn_tensor *w, const struct resnet18_bn *bn,
		   int64_t stride, int64_t pad, bool relu, tn_tensor **ret)
{
	const int64_t s[2] = { stride, stride }, p[2] = { pad, pad }, d[2] = { 1, 1 };
	tn_tensor *c = NULL, *y = NULL;
	int rc;
	if ((rc = tn_conv2d(x, w, NULL, 2, s, 2, p, 2, d, 1, &c)) < 0)
		return rc;
	rc = tn_batch_norm(c, bn->weight, bn->bias, bn->mean, bn->var, false, 0.1, 1e-5, false, &y);
	tn_tensor_unref(c);
	if (rc < 0)
		return rc;
	if (relu && (rc = tn_relu_(y)) < 0) {
		tn_tensor_unref(y);
		return rc;
	}
	*ret = y;
	return 0;
}

/* BasicBlock @b on @x. */
static int block(const struct resnet18_block *b, const tn_tensor *x, tn_tensor **ret)
{
	tn_tensor *h = NULL, *y = NULL, *shortcut = NULL;
	int rc;
	if ((rc = conv_bn(x, b->conv1, &b->bn1, b->stride, 1, true, &h)) < 0 ||
	    (rc = conv_bn(h, b->conv2, &b->bn2, 1, 1, false, &y)) < 0)
		goto out;
	if (b->down && (rc = conv_bn(x, b->down, &b->down_bn, b->stride, 0, false, &shortcut)) < 0)
		goto out;
	if ((rc = tn_add_(y, shortcut ? shortcut : x, tn_scalar_int(1))) < 0 ||
	    (rc = tn_relu_(y)) < 0)
		goto out;
	*ret = y;
	y = NULL;
out:
	tn_tensor_unref(h);
	tn_tensor_unref(y);
	tn_tensor_unref(shortcut);
	return rc;
}

int resnet18_forward(const struct resnet18 *m, const tn_tensor *images, tn_tensor **ret_logits)
{
	tn_tensor *x = NULL, *y = NULL;
	char buf[96];
	int rc;

	model_clear_error();
	if (!images || !ret_logits)
		return model_fail(TN_EINVAL, "resnet18: NULL %s", images ? "ret_logits" : "images");
	if (tn_tensor_dtype(images) != TN_FLOAT32) {
		const char *dt = tn_dtype_name(tn_tensor_dtype(images));
		return model_fail(TN_EINVAL, "resnet18: images are %s, not float32", dt ? dt : "?");
	}
	if (tn_tensor_ndim(images) != 4 || tn_tensor_sizes(images)[1] != 3)
		return model_fail(TN_EINVAL, "resnet18: images of shape %s are not [N, 3, H, W]",
				 model_shape_str(buf, sizeof(buf), tn_tensor_ndim(images),
					   tn_tensor_sizes(images)));
	if ((rc = conv_bn(images, m->conv1, &m->bn1, 2, 3, true, &y)) < 0 ||
	    (rc = tn_max_pool2d(y, 2, (int64_t[]){ 3, 3 }, 2, (int64_t[]){ 2, 2 }, 2,
				(int64_t[]){ 1, 1 }, 2, (int64_t[]){ 1, 1 }, false, &x)) < 0)
		goto out;
	tn_tensor_unref(y);
	y = NULL;
	for (int i = 0; i < 8; i++) {
		if ((rc = block(&m->blocks[i], x, &y)) < 0)
			goto out;
		tn_tensor_unref(x);
		x = y;
		y = NULL;
	}
	/* [N, 512, 1, 1] as [N, 512]: a view in either layout. */
	if ((rc = tn_adaptive_avg_pool2d(x, 2, (int64_t[]){ 1, 1 }, &y)) < 0)
		goto out;
	tn_tensor_unref(x);
	x = NULL;
	if ((rc = tn_reshape(y, 2, (int64_t[]){ tn_tensor_sizes(y)[0], 512 }, &x)) < 0)
		goto out;
	rc = tn_linear(x, m->fc_w, m->fc_b, ret_logits);
out:
	tn_tensor_unref(x);
	tn_tensor_unref(y);
	return rc;
}
