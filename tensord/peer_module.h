/* SPDX-License-Identifier: MIT */
/*
 * tensord's peers module (tensord-ucx.so, peer_ucx.c): its table of entry points and the
 * daemon's loader (peer_module.c). The daemon loads it on first use, when peers are
 * configured, so that a tensord without peers never loads UCX (which hooks the memory calls
 * of the process that loads it), and a machine without UCX runs everything else.
 */
#ifndef TENSORD_PEER_MODULE_H
#define TENSORD_PEER_MODULE_H

#include "peer_ucx.h"

/* Bumped whenever struct tnd_ucx_ops changes; the loader refuses another number. */
#define TND_UCX_ABI 4
#define TND_UCX_ENTRY "tnd_ucx_module"

struct tnd_ucx_ops {
	uint32_t abi;
	int (*open)(struct tnd_ucx **u, char *err, size_t nerr);
	void (*close)(struct tnd_ucx *u);
	void (*address)(const struct tnd_ucx *u, const void **addr, size_t *len);
	bool (*shared_memory)(const struct tnd_ucx *u);
	uint64_t (*dropped)(const struct tnd_ucx *u);
	int (*efd)(const struct tnd_ucx *u);
	int (*arm)(struct tnd_ucx *u);
	unsigned (*progress)(struct tnd_ucx *u);
	int (*mem_map)(struct tnd_ucx *u, void *base, size_t len, struct tnd_ucx_mem **m,
		       char *err, size_t nerr);
	void (*mem_rkey)(const struct tnd_ucx_mem *m, const void **rkey, size_t *len);
	void (*mem_unmap)(struct tnd_ucx_mem *m);
	int (*connect)(struct tnd_ucx *u, const void *addr, size_t len, bool peer_errors,
		       struct tnd_ucx_ep **ep, char *err, size_t nerr);
	void (*disconnect)(struct tnd_ucx_ep *ep, bool force);
	int (*lanes)(struct tnd_ucx_ep *ep, char *buf, size_t n);
	int (*get)(struct tnd_ucx_ep *ep, void *dst, const struct tnd_ucx_mem *local,
		   uint64_t raddr, const void *rkey, size_t rkey_len, size_t len, char *err,
		   size_t nerr);
	int (*get_start)(struct tnd_ucx_ep *ep, void *dst, const struct tnd_ucx_mem *local,
			 uint64_t raddr, const void *rkey, size_t rkey_len, size_t len,
			 struct tnd_ucx_op **op, char *err, size_t nerr);
	int (*send_start)(struct tnd_ucx_ep *ep, uint64_t key, uint32_t index, const void *src,
			  size_t len, struct tnd_ucx_op **op, char *err, size_t nerr);
	int (*recv_start)(struct tnd_ucx *u, uint64_t key, uint32_t index, void *dst, size_t len,
			  struct tnd_ucx_op **op, char *err, size_t nerr);
	int (*op_test)(struct tnd_ucx_op *op, char *err, size_t nerr);
	void (*op_free)(struct tnd_ucx_op *op);
	void (*op_cancel)(struct tnd_ucx_op *op);
};

/*
 * The module's table, loaded once: from $TND_UCX_MODULE when set (the tests' build tree),
 * else from @dir (the installation's pkglibdir). UCX_MEM_EVENTS is set to "n" before the
 * module loads, unless the environment sets it (peer_ucx.c says why). Returns the table, or
 * NULL with a message in @err naming the file and the loader's reason; a failed load is
 * remembered and reported again without another attempt.
 */
const struct tnd_ucx_ops *tnd_ucx_load(const char *dir, char *err, size_t nerr);

#endif /* TENSORD_PEER_MODULE_H */
