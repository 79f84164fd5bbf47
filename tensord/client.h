/* SPDX-License-Identifier: MIT */
/*
 * The client library's internal calls for the CUDA sharing operations (proto.h, CUDA_*):
 * cuda/ipc.c builds the records, and the daemon tests drive the table with them directly.
 */
#ifndef TENSORD_CLIENT_H
#define TENSORD_CLIENT_H

#include <stdint.h>

#include "proto.h"
#include <tensor/tensord.h>

/* Another reference to @conn (tn_tensord_close drops it). */
tn_tensord *tn__tensord_ref(tn_tensord *conn);

/* Register @rec (checked first, TN_EINVAL); *ret is the daemon's record with its id. */
int tn__tensord_cuda_export(tn_tensord *conn, const struct tnd_cuda_export *rec,
			    struct tnd_cuda_info *ret);
/* Take a hold on the live export @name; *ret is its record. */
int tn__tensord_cuda_import(tn_tensord *conn, const char *name, struct tnd_cuda_info *ret);
/* Drop one hold of this process on export @id. */
int tn__tensord_cuda_release(tn_tensord *conn, const char *name, uint64_t id);
/* Withdraw export @id; *ret says who still holds it (the record is gone when nobody does). */
int tn__tensord_cuda_unexport(tn_tensord *conn, const char *name, uint64_t id,
			      struct tnd_cuda_info *ret);
/* The record of export @id (0: the one of that name); TN_ENOENT once it is gone. */
int tn__tensord_cuda_stat(tn_tensord *conn, const char *name, uint64_t id,
			  struct tnd_cuda_info *ret);

#endif /* TENSORD_CLIENT_H */
