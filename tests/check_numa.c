/* SPDX-License-Identifier: MIT */
/*
 * NUMA: topology snapshots of hwloc synthetic machines (2 and 4 nodes: counts, CPUs per node,
 * the node of each CPU, caches and who shares them, the pinning plan), of an XML export with
 * PCI devices and a distance matrix (tests/data/topology-2node-pci.xml: a GPU near node 1, a
 * NIC near node 0, a SATA controller near both), malformed input of every kind, and this
 * machine for real (read directly and through hwloc's own XML export of it): memory bound to
 * node 0 with mbind and found there by move_pages, the OpenMP workers of libtensor's loops
 * pinned to node 0's CPUs and given their mask back.
 *
 * Worker pinning changes the process's threads, so those tests rely on Check's fork mode
 * (each test is its own process, which opens no parallel region before the test runs).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hwloc.h>

#include "testutil.h"
#include "internal.h"
#include "iter.h"

/* Two sockets of one node each: an L3 per socket over 4 cores of 2 hyperthreads, each core
 * with its own L2 and L1d. Sizes are explicit, not hwloc's defaults. */
#define TWO_NODES                                                                              \
	"pack:2 numa:1(memory=17179869184) l3:1(size=33554432) l2:4(size=1048576) "             \
	"l1d:1(size=49152) core:1 pu:2"
/* Two sockets of two nodes each, 3 cores of 2 hyperthreads per node, no caches. */
#define FOUR_NODES "pack:2 numa:2 core:3 pu:2"

static tn_topology *synthetic(const char *description)
{
	tn_topology *t = NULL;
	ck_assert_tn_ok(tn_topology_load_synthetic(description, &t));
	ck_assert_ptr_nonnull(t);
	return t;
}

static const char *xml_path(void)
{
	static char path[4096];
	const char *dir = getenv("top_srcdir");
	snprintf(path, sizeof(path), "%s/tests/data/topology-2node-pci.xml", dir ? dir : ".");
	return path;
}

static char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	ck_assert_int_gt(n, 0);
	rewind(f);
	char *buf = malloc((size_t)n);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

/* ---- synthetic topologies ---- */

START_TEST(test_two_nodes)
{
	tn_topology *t = synthetic(TWO_NODES);
	tn_numa_node_info info;
	uint64_t mask = 0;
	int cpus[32];

	ck_assert_int_eq(tn_topology_nodes(t, &mask), 2);
	ck_assert_uint_eq(mask, 3);
	ck_assert_int_eq(tn_topology_nodes(t, NULL), 2);
	for (int n = 0; n < 2; n++) {
		ck_assert_tn_ok(tn_topology_node_info(t, n, &info));
		ck_assert_int_eq(info.node, n);
		ck_assert_int_eq(info.cores, 4);
		ck_assert_int_eq(info.cpus, 8);
		ck_assert_uint_eq(info.memory, UINT64_C(16) << 30);
		ck_assert_int_eq(tn_topology_node_cpus(t, n, cpus, 32), 8);
		for (int i = 0; i < 8; i++)
			ck_assert_int_eq(cpus[i], 8 * n + i);
	}
	/* The count is returned even when the array is short, as snprintf does. */
	cpus[2] = -7;
	ck_assert_int_eq(tn_topology_node_cpus(t, 1, cpus, 2), 8);
	ck_assert_int_eq(cpus[0], 8);
	ck_assert_int_eq(cpus[1], 9);
	ck_assert_int_eq(cpus[2], -7);
	ck_assert_int_eq(tn_topology_node_cpus(t, 1, NULL, 0), 8);
	for (int c = 0; c < 16; c++)
		ck_assert_int_eq(tn_topology_cpu_node(t, c), c / 8);
	ck_assert_tn_error(tn_topology_cpu_node(t, 16), TN_ERANGE,
			   "tn_topology_cpu_node: no CPU 16 in the topology (CPUs 0 to 15, 16 of them)");
	ck_assert_tn_error(tn_topology_node_info(t, 2, &info), TN_ERANGE,
			   "tn_topology_node_info: no NUMA node 2 in the topology (its nodes: 0-1)");

	/* Caches: one L3 per socket over its 8 CPUs; an L2 and an L1d per core. */
	tn_cache_info c;
	ck_assert_int_eq(tn_topology_cache_count(t, 1), 8);
	ck_assert_int_eq(tn_topology_cache_count(t, 2), 8);
	ck_assert_int_eq(tn_topology_cache_count(t, 3), 2);
	ck_assert_int_eq(tn_topology_cache(t, 3, 1, &c, cpus, 32), 8);
	ck_assert_int_eq(c.level, 3);
	ck_assert_int_eq(c.index, 1);
	ck_assert_uint_eq(c.size, 32u << 20);
	ck_assert_int_eq(c.line_size, 64);
	ck_assert_int_eq(c.cpus, 8);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(cpus[i], 8 + i);
	ck_assert_tn_ok(tn_topology_cpu_cache(t, 5, 2, &c));
	ck_assert_int_eq(c.index, 2);
	ck_assert_uint_eq(c.size, 1u << 20);
	ck_assert_int_eq(c.cpus, 2);
	ck_assert_int_eq(tn_topology_cache(t, 2, c.index, NULL, cpus, 32), 2);
	ck_assert_int_eq(cpus[0], 4);
	ck_assert_int_eq(cpus[1], 5);
	ck_assert_tn_ok(tn_topology_cpu_cache(t, 13, 1, &c));
	ck_assert_int_eq(c.level, 1);
	ck_assert_int_eq(c.index, 6);
	ck_assert_uint_eq(c.size, 48u << 10);
	ck_assert_tn_ok(tn_topology_cpu_cache(t, 13, 3, &c));
	ck_assert_int_eq(c.index, 1);
	ck_assert_tn_error(tn_topology_cache(t, 3, 2, &c, NULL, 0), TN_ERANGE,
			   "tn_topology_cache: no L3 cache 2 (the topology has 2)");
	ck_assert_tn_error(tn_topology_cache_count(t, 4), TN_EINVAL,
			   "tn_topology_cache_count: cache level 4 (1, 2 or 3)");
	ck_assert_tn_error(tn_topology_cpu_cache(t, 0, 0, &c), TN_EINVAL,
			   "tn_topology_cpu_cache: cache level 0 (1, 2 or 3)");

	/* A synthetic machine has no PCI device and no distance matrix. */
	uint64_t d;
	ck_assert_tn_error(tn_topology_pci_node(t, "0000:41:00.0", NULL), TN_ENOENT,
			   "tn_topology_pci_node: no PCI device 0000:41:00.0 in the topology");
	ck_assert_tn_error(tn_topology_distance(t, 0, 1, &d), TN_ENOENT,
			   "tn_topology_distance: the topology has no node distance matrix");

	/* References: the topology lives until the last is dropped. */
	ck_assert_ptr_eq(tn_topology_ref(t), t);
	ck_assert_ptr_null(tn_topology_unref(t));
	ck_assert_int_eq(tn_topology_nodes(t, NULL), 2);
	ck_assert_ptr_null(tn_topology_unref(t));
}
END_TEST

START_TEST(test_four_nodes)
{
	tn_topology *t = synthetic(FOUR_NODES);
	tn_numa_node_info info;
	uint64_t mask;
	int cpus[8];

	ck_assert_int_eq(tn_topology_nodes(t, &mask), 4);
	ck_assert_uint_eq(mask, 0xf);
	for (int n = 0; n < 4; n++) {
		ck_assert_tn_ok(tn_topology_node_info(t, n, &info));
		ck_assert_int_eq(info.cores, 3);
		ck_assert_int_eq(info.cpus, 6);
		ck_assert_int_eq(tn_topology_node_cpus(t, n, cpus, 8), 6);
		ck_assert_int_eq(cpus[0], 6 * n);
		ck_assert_int_eq(cpus[5], 6 * n + 5);
	}
	for (int c = 0; c < 24; c++)
		ck_assert_int_eq(tn_topology_cpu_node(t, c), c / 6);
	/* No cache in the description: none in the topology. */
	tn_cache_info c;
	for (int l = 1; l <= 3; l++)
		ck_assert_int_eq(tn_topology_cache_count(t, l), 0);
	ck_assert_tn_error(tn_topology_cpu_cache(t, 3, 3, &c), TN_ENOENT,
			   "tn_topology_cpu_cache: CPU 3 has no L3 cache in the topology");
	tn_topology_unref(t);
}
END_TEST

static void check_plan(tn_topology *t, uint64_t nodes, int threads, const int *want)
{
	int got[64];
	ck_assert_int_le(threads, 64);
	ck_assert_tn_ok(tn_topology_pin_plan(t, nodes, threads, got));
	for (int i = 0; i < threads; i++)
		ck_assert_msg(got[i] == want[i], "nodes %#llx, %d threads: worker %d on CPU %d, not %d",
			      (unsigned long long)nodes, threads, i, got[i], want[i]);
}

START_TEST(test_plan_two_nodes)
{
	tn_topology *t = synthetic(TWO_NODES);

	/* One worker per node, then one per core, then every CPU. */
	check_plan(t, 3, 1, (int[]){ 0 });
	check_plan(t, 3, 2, (int[]){ 0, 8 });
	check_plan(t, 3, 4, (int[]){ 0, 4, 8, 12 });
	check_plan(t, 3, 8, (int[]){ 0, 2, 4, 6, 8, 10, 12, 14 });
	/* Two more workers than cores: cores 0 and 4 (one per node) take a second, on their
	 * other hyperthread. */
	check_plan(t, 3, 10, (int[]){ 0, 1, 2, 4, 6, 8, 9, 10, 12, 14 });
	int all[16];
	for (int i = 0; i < 16; i++)
		all[i] = i;
	check_plan(t, 3, 16, all);
	/* Past every CPU, a core's workers go round its CPUs again: 24 workers, 3 per core. */
	int thrice[24];
	for (int i = 0; i < 24; i++)
		thrice[i] = 2 * (i / 3) + (i % 3) % 2;
	check_plan(t, 3, 24, thrice);
	tn_topology_unref(t);
}
END_TEST

START_TEST(test_plan_wraps)
{
	tn_topology *t = synthetic(TWO_NODES);
	int got[40], uses[16] = { 0 };

	ck_assert_tn_ok(tn_topology_pin_plan(t, 3, 40, got));
	/* 40 workers on 8 cores: 5 per core, alternating its two CPUs. */
	for (int i = 0; i < 40; i++) {
		ck_assert_int_eq(got[i] / 2, i / 5);
		ck_assert_int_eq(got[i] % 2, (i % 5) % 2);
		uses[got[i]]++;
	}
	for (int c = 0; c < 16; c++)
		ck_assert_int_eq(uses[c], c % 2 ? 2 : 3);
	/* Node 1 alone. */
	check_plan(t, 2, 3, (int[]){ 8, 10, 12 });
	check_plan(t, 2, 6, (int[]){ 8, 9, 10, 12, 13, 14 });
	tn_topology_unref(t);
}
END_TEST

START_TEST(test_plan_four_nodes)
{
	tn_topology *t = synthetic(FOUR_NODES);
	int got[64];

	check_plan(t, 0xf, 4, (int[]){ 0, 6, 12, 18 });
	check_plan(t, 0xf, 12, (int[]){ 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22 });
	/* Nodes 1 and 3: six cores, three workers on cores 0 and 2 of node 1 and 1 of node 3. */
	check_plan(t, 0xa, 2, (int[]){ 6, 18 });
	check_plan(t, 0xa, 3, (int[]){ 6, 10, 20 });
	check_plan(t, 0x4, 1, (int[]){ 12 });
	/* Every plan keeps node order (worker i's node never below worker i-1's), uses only the
	 * nodes asked for, and loads no core with two workers before each has one. */
	for (uint64_t nodes = 1; nodes < 16; nodes++) {
		int cores = 3 * __builtin_popcountll(nodes);
		for (int threads = 1; threads <= 60; threads++) {
			int per_core[12] = { 0 };
			ck_assert_tn_ok(tn_topology_pin_plan(t, nodes, threads, got));
			for (int i = 0; i < threads; i++) {
				int node = tn_topology_cpu_node(t, got[i]);
				ck_assert(nodes >> node & 1);
				if (i)
					ck_assert_int_ge(node, tn_topology_cpu_node(t, got[i - 1]));
				per_core[got[i] / 2]++;
			}
			for (int k = 0; k < 12; k++) {
				if (!(nodes >> (k / 3) & 1))
					continue;
				ck_assert_int_ge(per_core[k], threads / cores);
				ck_assert_int_le(per_core[k], (threads + cores - 1) / cores);
			}
		}
	}
	ck_assert_tn_error(tn_topology_pin_plan(t, 0, 2, got), TN_EINVAL,
			   "tn_topology_pin_plan: an empty node mask");
	ck_assert_tn_error(tn_topology_pin_plan(t, 0x31, 2, got), TN_ERANGE,
			   "tn_topology_pin_plan: no NUMA node 4-5 in the topology (its nodes: 0-3)");
	ck_assert_tn_error(tn_topology_pin_plan(t, 1, 0, got), TN_EINVAL,
			   "tn_topology_pin_plan: threads must be at least 1");
	ck_assert_tn_error(tn_topology_pin_plan(t, 1, 2, NULL), TN_EINVAL,
			   "tn_topology_pin_plan: NULL ret_cpus");
	tn_topology_unref(t);
}
END_TEST

/* ---- XML: PCI devices and distances ---- */

static void check_xml_topology(tn_topology *t)
{
	tn_numa_node_info info;
	tn_cache_info c;
	uint64_t nodes, d;
	int cpus[8];

	ck_assert_int_eq(tn_topology_nodes(t, &nodes), 2);
	ck_assert_uint_eq(nodes, 3);
	ck_assert_tn_ok(tn_topology_node_info(t, 1, &info));
	ck_assert_int_eq(info.cores, 2);
	ck_assert_int_eq(info.cpus, 4);
	ck_assert_uint_eq(info.memory, UINT64_C(8) << 30);
	ck_assert_int_eq(tn_topology_cpu_node(t, 6), 1);
	ck_assert_tn_ok(tn_topology_cpu_cache(t, 6, 3, &c));
	ck_assert_uint_eq(c.size, 32u << 20);
	ck_assert_int_eq(tn_topology_cache(t, 3, c.index, NULL, cpus, 8), 4);
	ck_assert_int_eq(cpus[0], 4);
	ck_assert_int_eq(cpus[3], 7);

	/* The GPU hangs off socket 1's host bridge, the NIC off socket 0's. */
	nodes = 0;
	ck_assert_int_eq(tn_topology_pci_node(t, "0000:41:00.0", &nodes), 1);
	ck_assert_uint_eq(nodes, 2);
	ck_assert_int_eq(tn_topology_pci_node(t, "41:00.0", NULL), 1);
	ck_assert_int_eq(tn_topology_pci_node(t, "00000000:41:00.0", NULL), 1); /* CUDA's form */
	ck_assert_int_eq(tn_topology_pci_node(t, "0000:01:00.0", &nodes), 0);
	ck_assert_uint_eq(nodes, 1);
	/* The SATA controller is attached to the machine as a whole: near both nodes. */
	ck_assert_int_eq(tn_topology_pci_node(t, "0000:00:1F.2", &nodes), 0);
	ck_assert_uint_eq(nodes, 3);
	ck_assert_tn_error(tn_topology_pci_node(t, "0000:42:00.0", &nodes), TN_ENOENT,
			   "tn_topology_pci_node: no PCI device 0000:42:00.0 in the topology");
	ck_assert_tn_error(tn_topology_pci_node(t, "0001:41:00.0", &nodes), TN_ENOENT,
			   "tn_topology_pci_node: no PCI device 0001:41:00.0 in the topology");
	static const char *const bad[] = {
		"",		"0000:41:00",	  "0000:41:00.8",   "0000:41:20.0", "zz:00.0",
		"0000:41:00.0x", "0000:041:00.0", "000:41:00.0",    "0000.41:00.0", "0000:41:00:0",
		"0000:41:0.0",	"41:00.00",	  "000000000:41:00.0", ":41:00.0",  "0000:41:00.",
	};
	for (size_t i = 0; i < TN_ARRAY_SIZE(bad); i++) {
		char msg[128];
		snprintf(msg, sizeof(msg),
			 "tn_topology_pci_node: '%s' is not a PCI bus id (dddd:bb:dd.f)", bad[i]);
		ck_assert_tn_error(tn_topology_pci_node(t, bad[i], &nodes), TN_EINVAL, msg);
	}
	ck_assert_tn_error(tn_topology_pci_node(t, NULL, &nodes), TN_EINVAL,
			   "tn_topology_pci_node: NULL busid");

	/* The SLIT-style latency matrix. */
	ck_assert_tn_ok(tn_topology_distance(t, 0, 0, &d));
	ck_assert_uint_eq(d, 10);
	ck_assert_tn_ok(tn_topology_distance(t, 0, 1, &d));
	ck_assert_uint_eq(d, 24);
	ck_assert_tn_ok(tn_topology_distance(t, 1, 0, &d));
	ck_assert_uint_eq(d, 24);
	ck_assert_tn_ok(tn_topology_distance(t, 1, 1, &d));
	ck_assert_uint_eq(d, 10);
	ck_assert_tn_error(tn_topology_distance(t, 0, 2, &d), TN_ERANGE,
			   "tn_topology_distance: no NUMA node 2 in the topology (its nodes: 0-1)");
	ck_assert_tn_error(tn_topology_distance(t, 0, 1, NULL), TN_EINVAL,
			   "tn_topology_distance: NULL ret_distance");
}

START_TEST(test_xml_file)
{
	tn_topology *t = NULL;
	ck_assert_tn_ok(tn_topology_load_xml(xml_path(), &t));
	check_xml_topology(t);
	tn_topology_unref(t);
}
END_TEST

START_TEST(test_xml_buffer)
{
	size_t len;
	char *xml = read_file(xml_path(), &len);
	tn_topology *t = NULL;

	ck_assert_tn_ok(tn_topology_load_xml_buffer(xml, len, &t));
	check_xml_topology(t);
	tn_topology_unref(t);
	/* A C string's terminating NUL may be counted or not. */
	char *z = malloc(len + 1);
	memcpy(z, xml, len);
	z[len] = '\0';
	ck_assert_tn_ok(tn_topology_load_xml_buffer(z, len + 1, &t));
	ck_assert_int_eq(tn_topology_pci_node(t, "0000:41:00.0", NULL), 1);
	tn_topology_unref(t);
	free(z);
	free(xml);
}
END_TEST

/* ---- malformed input ---- */

START_TEST(test_bad_synthetic)
{
	tn_topology *t = (tn_topology *)0x1;
	static const char *const bad[] = { "", "pack:2 garbage", "pack:0 pu:1", "pack:x pu:2",
					   "pack:2 numa:1 l3:1 core:4 pu:2 pu:2 foo", "numa:-1 pu:2" };
	for (size_t i = 0; i < TN_ARRAY_SIZE(bad); i++) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "tn_topology_load_synthetic: '%s' is not an hwloc synthetic description",
			 bad[i]);
		ck_assert_tn_error(tn_topology_load_synthetic(bad[i], &t), TN_EINVAL, msg);
		ck_assert_ptr_eq(t, (tn_topology *)0x1); /* untouched on failure */
	}
	ck_assert_tn_error(tn_topology_load_synthetic(NULL, &t), TN_EINVAL,
			   "tn_topology_load_synthetic: NULL description");
	ck_assert_tn_error(tn_topology_load_synthetic("pu:2", NULL), TN_EINVAL,
			   "tn_topology_load_synthetic: NULL ret");
	/* Nodes past the 64 that masks can name are refused, not truncated. */
	ck_assert_tn_error(tn_topology_load_synthetic("numa:65 pu:1", &t), TN_ENOTSUP,
			   "tn_topology_load_synthetic: 65 NUMA nodes; libtensor handles at most 64");
	tn_topology *ok = synthetic("numa:64 pu:1");
	ck_assert_int_eq(tn_topology_nodes(ok, NULL), 64);
	ck_assert_int_eq(tn_topology_cpu_node(ok, 63), 63);
	tn_topology_unref(ok);
}
END_TEST

START_TEST(test_bad_xml)
{
	tn_topology *t = (tn_topology *)0x1;
	size_t len;
	char *xml = read_file(xml_path(), &len);

	ck_assert_tn_error(tn_topology_load_xml("/nonexistent/topology.xml", &t), TN_ENOENT,
			   "tn_topology_load_xml: /nonexistent/topology.xml: No such file or directory");
	ck_assert_tn_error(tn_topology_load_xml("/", &t), TN_EINVAL,
			   "tn_topology_load_xml: /: not a regular file of 1 byte to 64 MiB");
	ck_assert_tn_error(tn_topology_load_xml(NULL, &t), TN_EINVAL,
			   "tn_topology_load_xml: NULL path");
	/* Cut anywhere, the XML is refused cleanly (and before hwloc 2.9's import, which would
	 * leak what it read of a document cut inside an element). */
	for (size_t cut = 1; cut < len - 1; cut++)
		ck_assert_tn_error_has(tn_topology_load_xml_buffer(xml, cut, &t), TN_EINVAL,
				       "tn_topology_load_xml_buffer: not a valid hwloc XML topology");
	ck_assert_tn_error(tn_topology_load_xml_buffer(xml, 100, &t), TN_EINVAL,
			   "tn_topology_load_xml_buffer: not a valid hwloc XML topology: it ends "
			   "inside an attribute value (byte 97)");
	/* Malformed structure, each named with where it is. */
	static const struct {
		const char *xml, *msg;
	} bad[] = {
		{ "<topology version=\"2.0\"><object type=\"Machine\"></topology>",
		  "a closing tag that closes no open element (byte 47)" },
		{ "<topology></topology></topology>",
		  "a closing tag that closes no open element (byte 21)" },
		{ "<topology><object type=Machine/></topology>",
		  "an attribute value without quotes (byte 23)" },
		{ "<topology><object type></topology>", "a malformed attribute (byte 22)" },
		{ "<topology><!-- unfinished </topology>",
		  "it ends inside a declaration or comment (byte 10)" },
		{ "<topology>< object/></topology>", "a tag without a name (byte 11)" },
		{ "<topology></topology x=\"1\">", "a closing tag with attributes (byte 21)" },
		{ "<topology><object type=\"Machine\" ", "it ends inside a tag (byte 10)" },
		{ "<topology><object type=\"Machine\" x=\"a>", "it ends inside an attribute value "
							   "(byte 35)" },
	};
	for (size_t i = 0; i < TN_ARRAY_SIZE(bad); i++) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "tn_topology_load_xml_buffer: not a valid hwloc XML topology: %s", bad[i].msg);
		ck_assert_tn_error(tn_topology_load_xml_buffer(bad[i].xml, strlen(bad[i].xml), &t),
				   TN_EINVAL, msg);
	}
	/* hwloc 2.9 crashes on an object with a cpuset and no complete_cpuset (fixed upstream
	 * after 2.9): refused before hwloc sees it. */
	char *crafted = malloc(len + 1);
	memcpy(crafted, xml, len);
	crafted[len] = '\0';
	char *attr = strstr(crafted, " complete_cpuset=\"0x0000000f\"");
	ck_assert_ptr_nonnull(attr);
	memmove(attr, attr + 29, strlen(attr + 29) + 1);
	ck_assert_tn_error_has(tn_topology_load_xml_buffer(crafted, strlen(crafted), &t), TN_EINVAL,
			       "an object with a cpuset or nodeset but not the complete one");
	free(crafted);
	ck_assert_tn_error(tn_topology_load_xml_buffer("garbage", 7, &t), TN_EINVAL,
			   "tn_topology_load_xml_buffer: not a valid hwloc XML topology");
	ck_assert_tn_error(tn_topology_load_xml_buffer("<a>\0</a>", 8, &t), TN_EINVAL,
			   "tn_topology_load_xml_buffer: a NUL byte inside the XML");
	ck_assert_tn_error(tn_topology_load_xml_buffer("", 0, &t), TN_EINVAL,
			   "tn_topology_load_xml_buffer: empty buffer");
	ck_assert_tn_error(tn_topology_load_xml_buffer(NULL, 4, &t), TN_EINVAL,
			   "tn_topology_load_xml_buffer: NULL xml");
	ck_assert_ptr_eq(t, (tn_topology *)0x1);

	/* A file that is not XML names itself in the message. */
	char path[] = "/tmp/tn-numa-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, xml, len / 2), (ssize_t)(len / 2));
	close(fd);
	char msg[128];
	snprintf(msg, sizeof(msg), "tn_topology_load_xml: %s: not a valid hwloc XML topology: ",
		 path);
	ck_assert_tn_error_has(tn_topology_load_xml(path, &t), TN_EINVAL, msg);
	unlink(path);
	free(xml);
}
END_TEST

START_TEST(test_bad_handles)
{
	tn_topology *t = synthetic(TWO_NODES);
	tn_numa_node_info info;
	tn_cache_info c;
	uint64_t d;
	int cpus[4], fake[16] = { 0 };
	tn_topology *bogus = (tn_topology *)fake;

	ck_assert_tn_error(tn_topology_nodes(bogus, NULL), TN_EBADF,
			   "tn_topology_nodes: not a topology handle");
	ck_assert_tn_error(tn_topology_node_info(NULL, 0, &info), TN_EBADF,
			   "tn_topology_node_info: not a topology handle");
	ck_assert_tn_error(tn_topology_cpu_node(bogus, 0), TN_EBADF,
			   "tn_topology_cpu_node: not a topology handle");
	ck_assert_tn_error(tn_topology_pin_plan(bogus, 1, 1, cpus), TN_EBADF,
			   "tn_topology_pin_plan: not a topology handle");
	ck_assert_tn_error(tn_topology_distance(bogus, 0, 0, &d), TN_EBADF,
			   "tn_topology_distance: not a topology handle");
	ck_assert_ptr_null(tn_topology_ref(bogus));
	ck_assert_ptr_null(tn_topology_unref(NULL));
	ck_assert_ptr_null(tn_topology_unref(bogus));

	ck_assert_tn_error(tn_topology_node_info(t, -1, &info), TN_ERANGE,
			   "tn_topology_node_info: no NUMA node -1 in the topology (its nodes: 0-1)");
	ck_assert_tn_error(tn_topology_node_info(t, 64, &info), TN_ERANGE,
			   "tn_topology_node_info: no NUMA node 64 in the topology (its nodes: 0-1)");
	ck_assert_tn_error(tn_topology_node_info(t, 0, NULL), TN_EINVAL,
			   "tn_topology_node_info: NULL ret");
	ck_assert_tn_error(tn_topology_node_cpus(t, 0, cpus, -1), TN_EINVAL,
			   "tn_topology_node_cpus: negative max");
	ck_assert_tn_error(tn_topology_node_cpus(t, 0, NULL, 4), TN_EINVAL,
			   "tn_topology_node_cpus: NULL ret_cpus");
	ck_assert_tn_error(tn_topology_cpu_node(t, -1), TN_ERANGE,
			   "tn_topology_cpu_node: no CPU -1 in the topology (CPUs 0 to 15, 16 of them)");
	ck_assert_tn_error(tn_topology_cpu_cache(t, 99, 1, &c), TN_ERANGE,
			   "tn_topology_cpu_cache: no CPU 99 in the topology (CPUs 0 to 15, 16 of them)");
	ck_assert_tn_error(tn_topology_cpu_cache(t, 0, 1, NULL), TN_EINVAL,
			   "tn_topology_cpu_cache: NULL ret");

	/* A freed topology is refused, not read. */
	tn_topology_unref(t);
	ck_assert_tn_error(tn_topology_nodes(t, NULL), TN_EBADF,
			   "tn_topology_nodes: not a topology handle");
}
END_TEST

/* Every allocation of a load fails in turn: a clean ENOMEM each time, nothing left behind. */
START_TEST(test_out_of_memory)
{
	size_t len;
	char *xml = read_file(xml_path(), &len);
	struct tn_baseline base = tn_test_baseline();

	for (int kind = 0; kind < 2; kind++) {
		for (uint64_t n = 1;; n++) {
			tn_topology *t = NULL;
			tn_alloc_fail_nth(n);
			int r = kind ? tn_topology_load_xml_buffer(xml, len, &t)
				     : tn_topology_load_synthetic(TWO_NODES, &t);
			uint64_t attempts = tn_alloc_fail_nth(0);
			if (r == 0) {
				ck_assert_uint_lt(attempts, n);
				ck_assert_int_eq(tn_topology_nodes(t, NULL), 2);
				tn_topology_unref(t);
				break;
			}
			ck_assert_int_eq(r, TN_ENOMEM);
			ck_assert_ptr_null(t);
			ck_assert_no_leak(base);
			ck_assert_uint_lt(n, 10);
		}
	}
	ck_assert_no_leak(base);
	free(xml);
}
END_TEST

/* ---- this machine ---- */

START_TEST(test_machine)
{
	tn_topology *t = NULL;
	cpu_set_t mask;
	uint64_t nodes;

	ck_assert_tn_ok(tn_topology_load(&t));
	int n = tn_topology_nodes(t, &nodes);
	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(__builtin_popcountll(nodes), n);
	ck_assert_int_eq(n, tn__numa_node_count());
	/* Every CPU this process may run on is in the topology, on one of its nodes, and the
	 * nodes' CPUs add up to at least as many. */
	ck_assert_int_eq(sched_getaffinity(0, sizeof(mask), &mask), 0);
	int total = 0;
	for (int node = 0; node < TN_NUMA_MAX_NODES; node++) {
		tn_numa_node_info info;
		if (!(nodes >> node & 1))
			continue;
		ck_assert_tn_ok(tn_topology_node_info(t, node, &info));
		ck_assert_int_le(info.cores, info.cpus);
		total += info.cpus;
	}
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &mask))
			continue;
		int node = tn_topology_cpu_node(t, c);
		ck_assert_msg(node >= 0 && (nodes >> node & 1), "CPU %d: node %d (%s)", c, node,
			      tn_last_error());
	}
	ck_assert_int_ge(total, CPU_COUNT(&mask));
	/* Whatever PCI devices the machine has, a bus id that cannot exist is not among them. */
	ck_assert_tn_error(tn_topology_pci_node(t, "ffff:ff:1f.7", NULL), TN_ENOENT,
			   "tn_topology_pci_node: no PCI device ffff:ff:1f.7 in the topology");
	tn_topology_unref(t);
}
END_TEST

/* Two snapshots describe the same machine. */
static void check_same(tn_topology *a, tn_topology *b)
{
	uint64_t na, nb;
	ck_assert_int_eq(tn_topology_nodes(a, &na), tn_topology_nodes(b, &nb));
	ck_assert_uint_eq(na, nb);
	for (int n = 0; n < TN_NUMA_MAX_NODES; n++) {
		tn_numa_node_info ia, ib;
		if (!(na >> n & 1))
			continue;
		ck_assert_tn_ok(tn_topology_node_info(a, n, &ia));
		ck_assert_tn_ok(tn_topology_node_info(b, n, &ib));
		ck_assert_int_eq(ia.cpus, ib.cpus);
		ck_assert_int_eq(ia.cores, ib.cores);
		ck_assert_uint_eq(ia.memory, ib.memory);
	}
	for (int l = 1; l <= 3; l++)
		ck_assert_int_eq(tn_topology_cache_count(a, l), tn_topology_cache_count(b, l));
}

/* hwloc's own export of a topology, read back: what lstopo --of xml would write. */
static char *export_xml(const char *synthetic_or_null, int *ret_len, int *ret_pci)
{
	hwloc_topology_t h;
	char *xml;
	ck_assert_int_eq(hwloc_topology_init(&h), 0);
	hwloc_topology_set_type_filter(h, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
	if (synthetic_or_null)
		ck_assert_int_eq(hwloc_topology_set_synthetic(h, synthetic_or_null), 0);
	ck_assert_int_eq(hwloc_topology_load(h), 0);
	*ret_pci = 0;
	for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(h, o));)
		(*ret_pci)++;
	ck_assert_int_eq(hwloc_topology_export_xmlbuffer(h, &xml, ret_len, 0), 0);
	char *copy = malloc((size_t)*ret_len);
	memcpy(copy, xml, (size_t)*ret_len);
	hwloc_free_xmlbuffer(h, xml);
	hwloc_topology_destroy(h);
	return copy;
}

START_TEST(test_xml_round_trip)
{
	tn_topology *direct, *read;
	int len, npci;

	/* The synthetic machine, and this one with its PCI devices (their node must agree). */
	char *xml = export_xml(TWO_NODES, &len, &npci);
	direct = synthetic(TWO_NODES);
	ck_assert_tn_ok(tn_topology_load_xml_buffer(xml, (size_t)len, &read));
	check_same(direct, read);
	tn_topology_unref(direct);
	tn_topology_unref(read);
	free(xml);

	xml = export_xml(NULL, &len, &npci);
	ck_assert_tn_ok(tn_topology_load(&direct));
	ck_assert_tn_ok(tn_topology_load_xml_buffer(xml, (size_t)len, &read));
	check_same(direct, read);
	/* Each device exported is found in both, near the same nodes. */
	int found = 0;
	for (const char *p = xml; (p = strstr(p, "pci_busid=\"")); p++) {
		char busid[16];
		uint64_t ma = 0, mb = 0;
		ck_assert_int_eq(sscanf(p, "pci_busid=\"%12[0-9a-f:.]\"", busid), 1);
		ck_assert_int_eq(tn_topology_pci_node(direct, busid, &ma),
				 tn_topology_pci_node(read, busid, &mb));
		ck_assert_uint_eq(ma, mb);
		ck_assert_uint_ne(ma, 0);
		found++;
	}
	ck_assert_int_eq(found, npci);
	tn_topology_unref(direct);
	tn_topology_unref(read);
	free(xml);
}
END_TEST

/* mbind to node 0 before the first touch, then ask move_pages where the pages are. */
START_TEST(test_machine_bind_node0)
{
	const size_t len = 4 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t pages[4] = { 0 };

	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(tn__numa_bind(p, len, 0), 0);
	/* Before the first touch no page exists. */
	ck_assert_int_eq(tn__numa_residency(p, len, page, pages, 4), 0);
	memset(p, 1, len);
	ck_assert_int_eq(tn__numa_residency(p, len, page, pages, 4), (int64_t)(len / page));
	ck_assert_uint_eq(pages[0], len / page);
	ck_assert_uint_eq(pages[1] + pages[2] + pages[3], 0);
	ck_assert_int_eq(tn__numa_bind(p, len, -1), -EINVAL);
	munmap(p, len);
}
END_TEST

/* What each worker of a parallel region finds as its mask: the CPU when it is exactly one,
 * -2 for several, -1 when the region had no such worker. Written by the workers, read after
 * the region: atomics, so that ThreadSanitizer has nothing to misread. */
static _Atomic int seen_cpu[TN_WORKERS_MAX];
static _Atomic int seen_team;
static _Atomic int seen_full[TN_WORKERS_MAX]; /* mask equal to the saved one */
static cpu_set_t saved_mask;

static int only_cpu(const cpu_set_t *m)
{
	if (CPU_COUNT(m) != 1)
		return -2;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, m))
			return c;
	return -2;
}

static void record_self(int t)
{
	cpu_set_t m;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(m), &m), 0);
	atomic_store(&seen_cpu[t], only_cpu(&m));
	atomic_store(&seen_full[t], CPU_EQUAL(&m, &saved_mask));
}

static void clear_seen(void)
{
	for (int i = 0; i < TN_WORKERS_MAX; i++) {
		atomic_store(&seen_cpu[i], -1);
		atomic_store(&seen_full[i], 0);
	}
	atomic_store(&seen_team, 0);
}

/* The test's own region of @threads threads: OpenMP hands out the same pool threads. */
static int omp_region(int threads)
{
	clear_seen();
#pragma omp parallel num_threads(threads)
	{
		record_self(omp_get_thread_num());
		if (omp_get_thread_num() == 0)
			atomic_store(&seen_team, omp_get_num_threads());
	}
	return atomic_load(&seen_team);
}

static void record_range(void *ctx, int64_t begin, int64_t end, int tid)
{
	(void)ctx;
	(void)begin;
	(void)end;
	record_self(tid);
}

/* libtensor's own loop driver, as the reductions use it. */
static int lib_region(void)
{
	clear_seen();
	return tn__parallel_for(1 << 20, tn__num_threads(), record_range, NULL);
}

START_TEST(test_machine_pin_node0)
{
	tn_topology *t = NULL;
	tn_numa_node_info info;
	int plan[8], got[8];

	ck_assert_int_eq(sched_getaffinity(0, sizeof(saved_mask), &saved_mask), 0);
	ck_assert_tn_ok(tn_topology_load(&t));
	ck_assert_tn_ok(tn_topology_node_info(t, 0, &info));
	ck_assert_int_eq(tn_workers_pinned(got, 8), 0);
	int before = tn__num_threads();

	/* As many workers as node 0 has CPUs (at least two, wrapping if it has one), then one
	 * more than that: the extra worker shares a core. */
	for (int extra = 0; extra < 2; extra++) {
		int threads = (info.cpus < 2 ? 2 : info.cpus) + extra;
		if (threads > 8)
			threads = 8;
		ck_assert_tn_ok(tn_topology_pin_plan(t, 1, threads, plan));
		ck_assert_int_eq(tn_workers_pin(plan, threads), threads);
		ck_assert_int_eq(tn_workers_pinned(got, 8), threads);
		for (int i = 0; i < threads; i++)
			ck_assert_int_eq(got[i], plan[i]);
		ck_assert_int_eq(tn__num_threads(), threads);

		/* The calling thread is worker 0. */
		cpu_set_t m;
		ck_assert_int_eq(sched_getaffinity(0, sizeof(m), &m), 0);
		ck_assert_int_eq(only_cpu(&m), plan[0]);
		/* Every worker of a region of that many threads sits on its planned CPU... */
		ck_assert_int_eq(omp_region(threads), threads);
		for (int i = 0; i < threads; i++)
			ck_assert_msg(atomic_load(&seen_cpu[i]) == plan[i],
				      "worker %d of an OpenMP region on %d, planned %d", i,
				      atomic_load(&seen_cpu[i]), plan[i]);
		/* ... and so does every worker of libtensor's own loops. */
		ck_assert_int_eq(lib_region(), threads);
		for (int i = 0; i < threads; i++)
			ck_assert_msg(atomic_load(&seen_cpu[i]) == plan[i],
				      "worker %d of tn__parallel_for on %d, planned %d", i,
				      atomic_load(&seen_cpu[i]), plan[i]);
	}

	/* Unpinned, every worker and the caller have the process's mask again. */
	ck_assert_tn_ok(tn_workers_unpin());
	ck_assert_int_eq(tn_workers_pinned(got, 8), 0);
	ck_assert_int_eq(tn__num_threads(), before);
	cpu_set_t m;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(m), &m), 0);
	ck_assert(CPU_EQUAL(&m, &saved_mask));
	int team = omp_region(8);
	for (int i = 0; i < team; i++)
		ck_assert_msg(atomic_load(&seen_full[i]), "worker %d kept a pinned mask", i);
	ck_assert_tn_ok(tn_workers_unpin()); /* nothing pinned: nothing to do */
	tn_topology_unref(t);
}
END_TEST

START_TEST(test_pin_errors)
{
	int cpus[2] = { 0, 0 };

	ck_assert_int_eq(sched_getaffinity(0, sizeof(saved_mask), &saved_mask), 0);
	ck_assert_tn_error(tn_workers_pin(NULL, 1), TN_EINVAL, "tn_workers_pin: NULL cpus");
	ck_assert_tn_error(tn_workers_pin(cpus, 0), TN_EINVAL,
			   "tn_workers_pin: threads must be between 1 and 1024");
	ck_assert_tn_error(tn_workers_pin(cpus, TN_WORKERS_MAX + 1), TN_EINVAL,
			   "tn_workers_pin: threads must be between 1 and 1024");
	cpus[1] = 8000; /* in the masks' range, but no machine here has it */
	ck_assert_tn_error(tn_workers_pin(cpus, 2), TN_EINVAL,
			   "tn_workers_pin: CPU 8000 (worker 1) is not in this process's CPU mask");
	cpus[1] = -1;
	ck_assert_tn_error(tn_workers_pin(cpus, 2), TN_EINVAL,
			   "tn_workers_pin: CPU -1 (worker 1) is not in this process's CPU mask");
	/* Nothing was bound by the failures. */
	ck_assert_int_eq(tn_workers_pinned(NULL, 0), 0);
	cpu_set_t m;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(m), &m), 0);
	ck_assert(CPU_EQUAL(&m, &saved_mask));
	ck_assert_tn_error(tn_workers_pinned(NULL, 3), TN_EINVAL,
			   "tn_workers_pinned: NULL ret_cpus");

	/* Not from inside a parallel region (where the workers are busy). */
	static _Atomic int inner_pin, inner_unpin;
	atomic_store(&inner_pin, 1);
	atomic_store(&inner_unpin, 1);
#pragma omp parallel num_threads(2)
	{
		if (omp_get_thread_num() == 0 && omp_get_num_threads() == 2) {
			static const int zero[1] = { 0 };
			atomic_store(&inner_pin, tn_workers_pin(zero, 1));
			atomic_store(&inner_unpin, tn_workers_unpin());
		}
	}
	ck_assert_int_eq(atomic_load(&inner_pin), TN_EBUSY);
	ck_assert_int_eq(atomic_load(&inner_unpin), TN_EBUSY);
}
END_TEST

/* TN_PIN_NODE pins at the first parallel loop, as the plan would, without a trace in the
 * thread's last error. */
START_TEST(test_pin_env)
{
	tn_topology *t = NULL;
	tn_numa_node_info info;
	int plan[TN_WORKERS_MAX], got[TN_WORKERS_MAX];

	ck_assert_tn_ok(tn_topology_load(&t));
	ck_assert_tn_ok(tn_topology_node_info(t, 0, &info));
	setenv("TN_PIN_NODE", "0", 1);
	tn__error(TN_EIO, "left by an earlier call");
	int threads = tn__num_threads();
	ck_assert_str_eq(tn_last_error(), "left by an earlier call");
	int want = info.cpus < tn__default_threads() ? info.cpus : tn__default_threads();
	ck_assert_int_eq(threads, want);
	ck_assert_int_eq(tn_workers_pinned(got, TN_WORKERS_MAX), want);
	ck_assert_tn_ok(tn_topology_pin_plan(t, 1, want, plan));
	for (int i = 0; i < want; i++)
		ck_assert_int_eq(got[i], plan[i]);
	ck_assert_int_eq(lib_region(), want);
	for (int i = 0; i < want; i++) {
		int cpu = atomic_load(&seen_cpu[i]);
		ck_assert_msg(cpu == plan[i], "worker %d on %d, planned %d", i, cpu, plan[i]);
	}
	ck_assert_tn_ok(tn_workers_unpin());
	tn_topology_unref(t);
}
END_TEST

START_TEST(test_pin_env_bad)
{
	/* A node the machine lacks, or not a node list: nothing is pinned. */
	setenv("TN_PIN_NODE", _i ? "0-x" : "63", 1);
	int threads = tn__num_threads();
	ck_assert_int_eq(threads, tn__default_threads());
	ck_assert_int_eq(tn_workers_pinned(NULL, 0), 0);
}
END_TEST

static Suite *numa_suite(void)
{
	Suite *s = suite_create("numa");
	TCase *tc = tcase_create("topology");
	tcase_add_test(tc, test_two_nodes);
	tcase_add_test(tc, test_four_nodes);
	tcase_add_test(tc, test_plan_two_nodes);
	tcase_add_test(tc, test_plan_wraps);
	tcase_add_test(tc, test_plan_four_nodes);
	tcase_add_test(tc, test_xml_file);
	tcase_add_test(tc, test_xml_buffer);
	tcase_add_test(tc, test_bad_synthetic);
	tcase_add_test(tc, test_bad_xml);
	tcase_add_test(tc, test_bad_handles);
	tcase_add_test(tc, test_out_of_memory);
	suite_add_tcase(s, tc);
	tc = tcase_create("machine");
	tcase_add_test(tc, test_machine);
	tcase_add_test(tc, test_xml_round_trip);
	tcase_add_test(tc, test_machine_bind_node0);
	tcase_add_test(tc, test_machine_pin_node0);
	tcase_add_test(tc, test_pin_errors);
	tcase_add_test(tc, test_pin_env);
	tcase_add_loop_test(tc, test_pin_env_bad, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

TN_TEST_MAIN(numa_suite)
