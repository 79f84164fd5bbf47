/* SPDX-License-Identifier: MIT */
/*
 * A ResNet-18 classifier in evaluation mode on libtensor's operators (models/resnet.c).
 *
 * The weights are tensors found by name, torchvision's names and layouts ("conv1.weight"
 * [64, 3, 7, 7], "bn1.running_var" [64], "layer2.0.downsample.0.weight" [128, 64, 1, 1],
 * "fc.weight" [classes, 512], ...), typically mapped zero-copy and read-only from a sealed
 * arena that tensord loaded: the model never copies or writes them. The batch norms use their
 * running statistics (eps 1e-5), as torchvision's model after .eval().
 */
#ifndef TN_MODELS_RESNET_H
#define TN_MODELS_RESNET_H

#include <stdint.h>

#include <tensor.h>

#include "common.h"

/* A batch norm's affine weights and running statistics, each [channels]. */
struct resnet18_bn {
	tn_tensor *weight, *bias, *mean, *var;
};

/* A BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the shortcut being
 * downsample (a strided 1x1 convolution and its batch norm) where the block changes the
 * width, else x. */
struct resnet18_block {
	int64_t stride;
	tn_tensor *conv1, *conv2, *down; /* down: NULL without a downsample */
	struct resnet18_bn bn1, bn2, down_bn;
};

struct resnet18 {
	int64_t num_classes;
	tn_tensor *conv1;
	struct resnet18_bn bn1;
	struct resnet18_block blocks[8]; /* layer1.0, layer1.1, ..., layer4.1 */
	tn_tensor *fc_w, *fc_b;
};

/* Find the weight called @name (a new reference in *ret); 0 or a TN_E* code with
 * tn_last_error saying why. */
typedef model_get_fn resnet18_get_fn;

/*
 * Bind every weight of a ResNet-18 with @num_classes outputs through @get, checking each
 * one's dtype (float32) and shape. 0, or a TN_E* code with the message naming the weight
 * (get's own code when it fails; TN_EINVAL for a weight of another dtype or shape), and *m
 * left empty.
 */
int resnet18_load(struct resnet18 *m, int64_t num_classes, resnet18_get_fn get, void *ctx);

/* Drop the references to the weights; *m is left empty (freeing it again does nothing). */
void resnet18_free(struct resnet18 *m);

/*
 * The logits [N, num_classes] (a new float32 tensor, contiguous) of @images, float32
 * [N, 3, H, W] in any layout: NCHW (contiguous) and channels-last images both give torch's
 * logits; a channels-last batch is computed channels-last throughout, as torch does. 0 or a
 * TN_E* code (TN_EINVAL for images of another dtype or shape, or libtensor's code where an
 * operator fails), *ret_logits untouched on failure; every intermediate tensor is freed
 * either way.
 */
int resnet18_forward(const struct resnet18 *m, const tn_tensor *images, tn_tensor **ret_logits);

/* The message of the last failure of a resnet18_* call in this thread (the model's own, or
 * libtensor's tn_last_error). */
const char *resnet18_last_error(void);

#endif /* TN_MODELS_RESNET_H */
