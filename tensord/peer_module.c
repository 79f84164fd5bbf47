// SPDX-License-Identifier: MIT
/* The loader of tensord's peers module (peer_module.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_module.h"

static const struct tnd_ucx_ops *ops;
static char failure[4096 + 256]; /* a path and a reason */

const struct tnd_ucx_ops *tnd_ucx_load(const char *dir, char *err, size_t nerr)
{
	if (ops)
		return ops;
	if (failure[0]) {
		snprintf(err, nerr, "%s", failure);
		return NULL;
	}
	char path[4096];
	const char *env = getenv("TND_UCX_MODULE");
	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/tensord-ucx.so", dir);
	/* Before UCX loads: its memory events are read once, by its libraries' constructors. */
	setenv("UCX_MEM_EVENTS", "n", 0);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(failure, sizeof(failure), "peers module %s: %s", path,
			 why ? why : "cannot be loaded");
	} else {
		const struct tnd_ucx_ops *t = dlsym(h, TND_UCX_ENTRY);
		if (!t)
			snprintf(failure, sizeof(failure), "peers module %s: no %s", path,
				 TND_UCX_ENTRY);
		else if (t->abi != TND_UCX_ABI)
			snprintf(failure, sizeof(failure),
				 "peers module %s: interface %u, this tensord needs %u", path,
				 (unsigned)t->abi, (unsigned)TND_UCX_ABI);
		else
			ops = t;
		if (!ops)
			dlclose(h);
	}
	if (!ops)
		snprintf(err, nerr, "%s", failure);
	return ops;
}
