/* SPDX-License-Identifier: MIT */
/* tensorctl top (top.c): frames of the daemon's metrics until interrupted or @argv's
 * --iterations; returns tensorctl's exit status. */
#ifndef TENSORD_TOP_H
#define TENSORD_TOP_H

#include <tensor/tensord.h>

int tnctl_top(tn_tensord *conn, int argc, char **argv);

#endif
