#include "../libtensor/internal.h"
#include "loadsave.h"
int tnd_load(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret) { return tn__error(TN_ENOTSUP, "load: not yet"); }
int tnd_save(tn_arena *a, int fd, unsigned format, const char *prefix, unsigned flags,
	     tnd_progress_fn progress, void *ctx, const _Atomic bool *cancel,
	     struct tnd_xfer_result *ret) { return tn__error(TN_ENOTSUP, "save: not yet"); }
