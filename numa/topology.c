/* SPDX-License-Identifier: MIT */
/*
 * NUMA topology from hwloc: the node count the placement helpers validate against, and the
 * public topology snapshot (tn_topology) of this machine, of an hwloc synthetic description
 * or of an hwloc XML export, with the plan that spreads worker threads over its cores.
 *
 * hwloc's tree is walked once and flattened into arrays that live in the handle's one
 * allocation: CPUs (hwloc's PUs) in topology order, cores, nodes by OS number, the data
 * caches of each level, PCI devices with the nodes they are near, and the node distance
 * matrix. The hwloc topology is destroyed right after, so no query calls into hwloc, none
 * allocates, and a snapshot can be read by any number of threads without a lock.
 */
#include <fcntl.h>
#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdatomic.h>

#include "numa_internal.h"

/* ---- the node count of this machine, for the placement helpers ---- */

static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
static int node_count = 1;

static void topo_load(void)
{
	hwloc_topology_t topo;
	int saved = errno;

	if (hwloc_topology_init(&topo) == 0) {
		if (hwloc_topology_load(topo) == 0) {
			int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
			if (n > 0)
				node_count = n;
		}
		hwloc_topology_destroy(topo);
	}
	errno = saved;
}

int tn__numa_node_count(void)
{
	pthread_once(&topo_once, topo_load);
	return node_count;
}

/* ---- the snapshot ---- */

#define TN_MAGIC_TOPOLOGY 0x544f504fu /* "TOPO" */
#define CACHE_LEVELS 3
/* An XML export of a large machine with all its PCI devices is a few MiB. */
#define XML_MAX (64u << 20)

struct topo_cpu {
	int os;                  /* OS number */
	int core;                /* index in cores[] */
	uint64_t nodes;          /* nodes whose CPU set holds it (OS numbers) */
	int cache[CACHE_LEVELS]; /* index of its cache of level l + 1 in caches[l], or -1 */
};

struct topo_core {
	int first, count; /* its CPUs: cpus[first .. first + count) */
};

struct topo_node {
	int os, cores, cpus;
	uint64_t memory;
};

struct topo_cache {
	uint64_t size;
	int line_size, associativity, cpus;
};

struct topo_pci {
	unsigned domain, bus, dev, func;
	uint64_t nodes;
};

struct tn_topology {
	uint32_t magic;
	_Atomic int64_t refcount;
	int ncpus, ncores, nnodes, npci;
	int ncaches[CACHE_LEVELS];
	uint64_t node_mask;
	int8_t node_slot[TN_NUMA_MAX_NODES]; /* OS number -> index in nodes[], or -1 */
	struct topo_cpu *cpus;               /* topology order: a core's CPUs are adjacent */
	int *by_os;                          /* indexes into cpus[], by increasing OS number */
	struct topo_core *cores;             /* topology order */
	struct topo_node *nodes;             /* by increasing OS number */
	struct topo_cache *caches[CACHE_LEVELS];
	struct topo_pci *pci;
	uint64_t *distance; /* nnodes x nnodes in nodes[] order; NULL when hwloc has none */
};

static const hwloc_obj_type_t cache_type[CACHE_LEVELS] = { HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE,
							    HWLOC_OBJ_L3CACHE };

/* "0-3,6" for a node mask, in @buf. */
static const char *format_nodes(char *buf, size_t len, uint64_t mask)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (int n = 0; n < TN_NUMA_MAX_NODES && pos < len; n++) {
		if (!(mask >> n & 1))
			continue;
		int last = n;
		while (last + 1 < TN_NUMA_MAX_NODES && (mask >> (last + 1) & 1))
			last++;
		const char *sep = pos ? "," : "";
		int w = last == n ? snprintf(buf + pos, len - pos, "%s%d", sep, n)
				  : snprintf(buf + pos, len - pos, "%s%d-%d", sep, n, last);
		if (w < 0)
			break;
		pos += (size_t)w;
		n = last;
	}
	return buf;
}

/* The object of @type above @obj (or @obj itself), or NULL. */
static hwloc_obj_t ancestor(hwloc_obj_t obj, hwloc_obj_type_t type)
{
	for (; obj; obj = obj->parent)
		if (obj->type == type)
			return obj;
	return NULL;
}

static uint64_t nodes_of(hwloc_const_nodeset_t set, uint64_t all)
{
	uint64_t mask = 0;
	for (int n = 0; n < TN_NUMA_MAX_NODES; n++)
		if ((all >> n & 1) && hwloc_bitmap_isset(set, (unsigned)n))
			mask |= UINT64_C(1) << n;
	return mask;
}

/* The first NUMA distance matrix over every node (latency first), or NULL. */
static struct hwloc_distances_s *get_distances(hwloc_topology_t h, int nnodes)
{
	const unsigned long kinds[] = { HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0 };
	for (size_t k = 0; k < TN_ARRAY_SIZE(kinds); k++) {
		struct hwloc_distances_s *d = NULL;
		unsigned nr = 1;
		if (hwloc_distances_get_by_type(h, HWLOC_OBJ_NUMANODE, &nr, &d, kinds[k], 0) == 0 &&
		    nr >= 1 && d) {
			if (d->nbobjs == (unsigned)nnodes)
				return d;
			hwloc_distances_release(h, d);
		}
	}
	return NULL;
}

static int by_os_cmp(const void *a, const void *b, void *arg)
{
	const struct topo_cpu *cpus = arg;
	int x = cpus[*(const int *)a].os, y = cpus[*(const int *)b].os;
	return (x > y) - (x < y);
}

/* Round @n up for the next array carved out of the handle (8-byte members at most). */
static size_t carve(size_t *off, size_t bytes)
{
	size_t at = (*off + 7) & ~(size_t)7;
	*off = at + bytes;
	return at;
}

/* Flatten a loaded hwloc topology into a new handle. */
static int snapshot(hwloc_topology_t h, const char *fn, tn_topology **ret)
{
	int ncpus = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
	int nnodes = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
	int ncaches[CACHE_LEVELS], ncores = 0, npci = 0;
	uint64_t all = 0;
	hwloc_obj_t obj, prev_core = NULL;

	if (ncpus <= 0 || nnodes <= 0)
		return tn__error(TN_EINVAL, "%s: the topology has no CPU or no NUMA node", fn);
	if (nnodes > TN_NUMA_MAX_NODES)
		return tn__error(TN_ENOTSUP, "%s: %d NUMA nodes; libtensor handles at most %d", fn,
				 nnodes, TN_NUMA_MAX_NODES);
	for (obj = NULL; (obj = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, obj));) {
		if (obj->os_index >= TN_NUMA_MAX_NODES)
			return tn__error(TN_ENOTSUP,
					 "%s: NUMA node %u; libtensor handles nodes 0 to %d only",
					 fn, obj->os_index, TN_NUMA_MAX_NODES - 1);
		if (all >> obj->os_index & 1)
			return tn__error(TN_EINVAL, "%s: two NUMA nodes numbered %u", fn,
					 obj->os_index);
		all |= UINT64_C(1) << obj->os_index;
	}
	for (obj = NULL; (obj = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_PU, obj));) {
		/* A PU outside any core (some platforms have no cores) is a core of its own. */
		hwloc_obj_t core = ancestor(obj, HWLOC_OBJ_CORE);
		if (!core || core != prev_core)
			ncores++;
		prev_core = core;
	}
	for (int l = 0; l < CACHE_LEVELS; l++) {
		int n = hwloc_get_nbobjs_by_type(h, cache_type[l]);
		ncaches[l] = n > 0 ? n : 0;
	}
	for (obj = NULL; (obj = hwloc_get_next_pcidev(h, obj));)
		npci++;
	struct hwloc_distances_s *dist = get_distances(h, nnodes);

	size_t off = sizeof(struct tn_topology);
	size_t o_cpus = carve(&off, (size_t)ncpus * sizeof(struct topo_cpu));
	size_t o_byos = carve(&off, (size_t)ncpus * sizeof(int));
	size_t o_cores = carve(&off, (size_t)ncores * sizeof(struct topo_core));
	size_t o_nodes = carve(&off, (size_t)nnodes * sizeof(struct topo_node));
	size_t o_caches[CACHE_LEVELS];
	for (int l = 0; l < CACHE_LEVELS; l++)
		o_caches[l] = carve(&off, (size_t)ncaches[l] * sizeof(struct topo_cache));
	size_t o_pci = carve(&off, (size_t)npci * sizeof(struct topo_pci));
	size_t o_dist = carve(&off, dist ? (size_t)nnodes * (size_t)nnodes * sizeof(uint64_t) : 0);
	char *base = tn__handle_alloc(off, TN_MAGIC_TOPOLOGY);
	if (!base) {
		if (dist)
			hwloc_distances_release(h, dist);
		return tn__error(TN_ENOMEM, "%s: out of memory", fn);
	}
	tn_topology *t = (tn_topology *)base;
	atomic_init(&t->refcount, 1);
	t->ncpus = ncpus;
	t->ncores = ncores;
	t->nnodes = nnodes;
	t->npci = npci;
	t->node_mask = all;
	t->cpus = (struct topo_cpu *)(base + o_cpus);
	t->by_os = (int *)(base + o_byos);
	t->cores = (struct topo_core *)(base + o_cores);
	t->nodes = (struct topo_node *)(base + o_nodes);
	for (int l = 0; l < CACHE_LEVELS; l++) {
		t->ncaches[l] = ncaches[l];
		t->caches[l] = (struct topo_cache *)(base + o_caches[l]);
	}
	t->pci = (struct topo_pci *)(base + o_pci);
	t->distance = dist ? (uint64_t *)(base + o_dist) : NULL;

	memset(t->node_slot, -1, sizeof(t->node_slot));
	for (int n = 0, i = 0; n < TN_NUMA_MAX_NODES; n++) {
		if (!(all >> n & 1))
			continue;
		obj = hwloc_get_numanode_obj_by_os_index(h, (unsigned)n);
		t->node_slot[n] = (int8_t)i;
		t->nodes[i++] = (struct topo_node){ .os = n,
						    .memory = obj ? obj->attr->numanode.local_memory
								  : 0 };
	}
	for (int l = 0; l < CACHE_LEVELS; l++) {
		for (int i = 0; i < ncaches[l]; i++) {
			obj = hwloc_get_obj_by_type(h, cache_type[l], (unsigned)i);
			t->caches[l][i] = (struct topo_cache){
				.size = obj->attr->cache.size,
				.line_size = (int)obj->attr->cache.linesize,
				.associativity = obj->attr->cache.associativity,
			};
		}
	}
	int c = -1;
	prev_core = NULL;
	for (int i = 0; i < ncpus; i++) {
		obj = hwloc_get_obj_by_type(h, HWLOC_OBJ_PU, (unsigned)i);
		hwloc_obj_t core = ancestor(obj, HWLOC_OBJ_CORE);
		struct topo_cpu *cpu = &t->cpus[i];
		if (c < 0 || !core || core != prev_core)
			t->cores[++c] = (struct topo_core){ .first = i };
		prev_core = core;
		t->cores[c].count++;
		cpu->os = (int)obj->os_index;
		cpu->core = c;
		cpu->nodes = 0;
		for (int n = 0; n < nnodes; n++) {
			unsigned os = (unsigned)t->nodes[n].os;
			hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(h, os);
			if (node && hwloc_bitmap_isset(node->cpuset, obj->os_index))
				cpu->nodes |= UINT64_C(1) << os;
		}
		for (int l = 0; l < CACHE_LEVELS; l++) {
			hwloc_obj_t cache = ancestor(obj, cache_type[l]);
			cpu->cache[l] = cache ? (int)cache->logical_index : -1;
			if (cache && cpu->cache[l] < ncaches[l])
				t->caches[l][cpu->cache[l]].cpus++;
			else
				cpu->cache[l] = -1;
		}
		t->by_os[i] = i;
	}
	qsort_r(t->by_os, (size_t)ncpus, sizeof(int), by_os_cmp, t->cpus);
	for (int i = 1; i < ncpus; i++) {
		if (t->cpus[t->by_os[i]].os == t->cpus[t->by_os[i - 1]].os) {
			tn__handle_free(t);
			if (dist)
				hwloc_distances_release(h, dist);
			return tn__error(TN_EINVAL, "%s: two CPUs numbered %d", fn,
					 t->cpus[t->by_os[i]].os);
		}
	}
	/* Per node: its CPUs, and the cores with at least one of them. */
	for (int n = 0; n < nnodes; n++) {
		uint64_t bit = UINT64_C(1) << t->nodes[n].os;
		for (int k = 0; k < ncores; k++) {
			const struct topo_core *core = &t->cores[k];
			int in = 0;
			for (int i = core->first; i < core->first + core->count; i++)
				in += (t->cpus[i].nodes & bit) != 0;
			t->nodes[n].cpus += in;
			t->nodes[n].cores += in > 0;
		}
	}
	int p = 0;
	for (obj = NULL; (obj = hwloc_get_next_pcidev(h, obj)) && p < npci; p++) {
		hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(h, obj);
		uint64_t nodes = near && near->nodeset ? nodes_of(near->nodeset, all) : 0;
		t->pci[p] = (struct topo_pci){ .domain = obj->attr->pcidev.domain,
					       .bus = obj->attr->pcidev.bus,
					       .dev = obj->attr->pcidev.dev,
					       .func = obj->attr->pcidev.func,
					       /* Nowhere in particular: near every node. */
					       .nodes = nodes ? nodes : all };
	}
	if (dist) {
		/* The matrix covers NUMA nodes only, all of ours (nbobjs == nnodes). */
		unsigned m = dist->nbobjs;
		for (unsigned i = 0; i < m; i++) {
			for (unsigned j = 0; j < m; j++) {
				int a = t->node_slot[dist->objs[i]->os_index];
				int b = t->node_slot[dist->objs[j]->os_index];
				if (a >= 0 && b >= 0)
					t->distance[a * nnodes + b] = dist->values[i * m + j];
			}
		}
		hwloc_distances_release(h, dist);
	}
	*ret = t;
	return 0;
}

/*
 * hwloc 2.9's XML import trusts its input further than it should: an object with a cpuset but
 * no complete_cpuset crashes the load (fixed upstream by hwloc pull request 783), and a
 * document cut inside an element leaks the objects read so far (pull request 781). Both are
 * caught before hwloc parses: elements must nest and close, and an object with a cpuset or a
 * nodeset must have the complete one too. Returns NULL when the text passes, else what is
 * wrong, with its byte offset in @ret_at.
 */
#define XML_MAX_DEPTH 256

static bool xml_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool xml_name_char(char c)
{
	return c && !xml_space(c) && !strchr("<>/=\"'?!", c);
}

static const char *xml_precheck(const char *x, size_t len, size_t *ret_at)
{
	const char *stack[XML_MAX_DEPTH];
	size_t names[XML_MAX_DEPTH];
	int depth = 0;
	size_t i = 0;

#define XML_FAIL(what)                 \
	do {                           \
		*ret_at = i;           \
		return what;           \
	} while (0)
	while (i < len) {
		if (x[i] != '<') {
			i++;
			continue;
		}
		size_t start = i++;
		if (i < len && (x[i] == '?' || x[i] == '!')) {
			/* A declaration, the DOCTYPE or a comment. */
			bool comment = len - i >= 3 && !memcmp(x + i, "!--", 3);
			const char *close = comment ? memmem(x + i, len - i, "-->", 3)
						    : memchr(x + i, '>', len - i);
			if (!close) {
				i = start;
				XML_FAIL("it ends inside a declaration or comment");
			}
			i = (size_t)(close - x) + 1;
			continue;
		}
		bool closing = i < len && x[i] == '/';
		i += closing;
		size_t name = i;
		while (i < len && xml_name_char(x[i]))
			i++;
		size_t name_len = i - name;
		if (!name_len)
			XML_FAIL("a tag without a name");
		bool object = name_len == 6 && !memcmp(x + name, "object", 6);
		bool cpuset = false, nodeset = false;
		bool complete_cpuset = false, complete_nodeset = false;
		/* Attributes, up to '>' or "/>". */
		for (;;) {
			while (i < len && xml_space(x[i]))
				i++;
			if (i >= len) {
				i = start;
				XML_FAIL("it ends inside a tag");
			}
			if (x[i] == '>' || (x[i] == '/' && i + 1 < len && x[i + 1] == '>'))
				break;
			if (closing)
				XML_FAIL("a closing tag with attributes");
			size_t attr = i;
			while (i < len && xml_name_char(x[i]))
				i++;
			size_t attr_len = i - attr;
			while (i < len && xml_space(x[i]))
				i++;
			if (!attr_len || i >= len || x[i] != '=')
				XML_FAIL("a malformed attribute");
			i++;
			while (i < len && xml_space(x[i]))
				i++;
			if (i >= len || (x[i] != '"' && x[i] != '\''))
				XML_FAIL("an attribute value without quotes");
			const char *q = memchr(x + i + 1, x[i], len - i - 1);
			if (!q)
				XML_FAIL("it ends inside an attribute value");
			i = (size_t)(q - x) + 1;
#define XML_IS(lit) (attr_len == sizeof(lit) - 1 && !memcmp(x + attr, lit, attr_len))
			cpuset |= XML_IS("cpuset");
			nodeset |= XML_IS("nodeset");
			complete_cpuset |= XML_IS("complete_cpuset");
			complete_nodeset |= XML_IS("complete_nodeset");
#undef XML_IS
		}
		bool empty = x[i] == '/';
		i += empty ? 2 : 1;
		if (object && ((cpuset && !complete_cpuset) || (nodeset && !complete_nodeset))) {
			i = start;
			XML_FAIL("an object with a cpuset or nodeset but not the complete one");
		}
		if (closing) {
			if (!depth || names[depth - 1] != name_len ||
			    memcmp(stack[depth - 1], x + name, name_len)) {
				i = start;
				XML_FAIL("a closing tag that closes no open element");
			}
			depth--;
		} else if (!empty) {
			if (depth == XML_MAX_DEPTH)
				XML_FAIL("elements nested too deeply");
			stack[depth] = x + name;
			names[depth++] = name_len;
		}
	}
	if (depth)
		XML_FAIL("it ends inside an element");
#undef XML_FAIL
	return NULL;
}

enum source { MACHINE, SYNTHETIC, XML };

/* @fn starts every message: the function's name, and the file's for an XML file. */
static int load(enum source src, const char *text, size_t len, const char *fn, tn_topology **ret)
{
	hwloc_topology_t h;
	char *copy = NULL;
	size_t at;
	int r = 0;

	if (src == XML) {
		const char *bad = xml_precheck(text, len, &at);
		if (bad)
			return tn__error(TN_EINVAL,
					 "%s: not a valid hwloc XML topology: %s (byte %zu)", fn,
					 bad, at);
	}
	if (hwloc_topology_init(&h) < 0)
		return tn__error(TN_ENOMEM, "%s: hwloc could not start (out of memory)", fn);
	/* Every PCI device (any may be asked for), the bridges that lead to them, no OS device. */
	hwloc_topology_set_type_filter(h, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
	hwloc_topology_set_type_filter(h, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	hwloc_topology_set_type_filter(h, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
	if (src == SYNTHETIC) {
		if (hwloc_topology_set_synthetic(h, text) < 0)
			r = tn__error(TN_EINVAL,
				      "%s: '%.100s' is not an hwloc synthetic description", fn,
				      text);
	} else if (src == XML) {
		/* hwloc wants the terminating NUL inside the buffer; the caller's may lack it. */
		copy = tn__malloc(len + 1);
		if (!copy) {
			r = tn__error(TN_ENOMEM, "%s: out of memory", fn);
		} else {
			memcpy(copy, text, len);
			copy[len] = '\0';
			if (hwloc_topology_set_xmlbuffer(h, copy, (int)strlen(copy) + 1) < 0)
				r = tn__error(TN_EINVAL, "%s: not an hwloc XML topology", fn);
		}
	}
	if (!r && hwloc_topology_load(h) < 0) {
		if (src == MACHINE)
			r = tn__error(TN_EIO,
				      "%s: hwloc could not read this machine's topology (%s)", fn,
				      strerror(errno));
		else if (src == XML)
			r = tn__error(TN_EINVAL, "%s: not a valid hwloc XML topology", fn);
		else
			r = tn__error(TN_EINVAL, "%s: hwloc could not build '%.100s'", fn, text);
	}
	if (!r)
		r = snapshot(h, fn, ret);
	hwloc_topology_destroy(h);
	tn__free(copy);
	return r;
}

TN_EXPORT int tn_topology_load(tn_topology **ret)
{
	int saved = errno;
	if (!ret)
		return tn__error(TN_EINVAL, "tn_topology_load: NULL ret");
	int r = load(MACHINE, NULL, 0, "tn_topology_load", ret);
	errno = saved;
	return r;
}

TN_EXPORT int tn_topology_load_synthetic(const char *description, tn_topology **ret)
{
	int saved = errno;
	if (!description || !ret)
		return tn__error(TN_EINVAL, "tn_topology_load_synthetic: NULL %s",
				 description ? "ret" : "description");
	int r = load(SYNTHETIC, description, strlen(description), "tn_topology_load_synthetic",
		     ret);
	errno = saved;
	return r;
}

TN_EXPORT int tn_topology_load_xml_buffer(const char *xml, size_t len, tn_topology **ret)
{
	int saved = errno;
	if (!xml || !ret)
		return tn__error(TN_EINVAL, "tn_topology_load_xml_buffer: NULL %s",
				 xml ? "ret" : "xml");
	/* One NUL at the end is the C string's; hwloc would refuse anything after it. */
	if (len && !xml[len - 1])
		len--;
	if (!len || len > XML_MAX || memchr(xml, '\0', len))
		return tn__error(TN_EINVAL, "tn_topology_load_xml_buffer: %s",
				 !len ? "empty buffer"
				 : len > XML_MAX ? "more than 64 MiB"
						 : "a NUL byte inside the XML");
	int r = load(XML, xml, len, "tn_topology_load_xml_buffer", ret);
	errno = saved;
	return r;
}

TN_EXPORT int tn_topology_load_xml(const char *path, tn_topology **ret)
{
	const char *fn = "tn_topology_load_xml";
	int saved = errno, r;
	struct stat st;
	char *buf = NULL;

	if (!path || !ret)
		return tn__error(TN_EINVAL, "%s: NULL %s", fn, path ? "ret" : "path");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = tn__error(errno == ENOENT ? TN_ENOENT : TN_EIO, "%s: %s: %s", fn, path,
			      strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > XML_MAX) {
		r = tn__error(TN_EINVAL, "%s: %s: not a regular file of 1 byte to 64 MiB", fn,
			      path);
		goto out;
	}
	size_t len = (size_t)st.st_size, done = 0;
	if (!(buf = tn__malloc(len))) {
		r = tn__error(TN_ENOMEM, "%s: out of memory", fn);
		goto out;
	}
	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = tn__error(TN_EIO, "%s: %s: %s", fn, path,
				      n < 0 ? strerror(errno) : "shorter than its size");
			goto out;
		}
		done += (size_t)n;
	}
	if (memchr(buf, '\0', len)) {
		r = tn__error(TN_EINVAL, "%s: %s: not an hwloc XML topology (a NUL byte)", fn,
			      path);
		goto out;
	}
	char who[256];
	snprintf(who, sizeof(who), "%s: %.200s", fn, path);
	r = load(XML, buf, len, who, ret);
out:
	if (fd >= 0)
		close(fd);
	tn__free(buf);
	errno = saved;
	return r;
}

static bool topo_ok(const tn_topology *t)
{
	return tn__handle_is(t, TN_MAGIC_TOPOLOGY);
}

static int bad_topo(const char *fn)
{
	return tn__error(TN_EBADF, "%s: not a topology handle", fn);
}

TN_EXPORT tn_topology *tn_topology_ref(tn_topology *topo)
{
	if (!topo_ok(topo))
		return NULL;
	/* Relaxed: the caller already holds a reference, so the object cannot go meanwhile. */
	atomic_fetch_add_explicit(&topo->refcount, 1, memory_order_relaxed);
	return topo;
}

TN_EXPORT tn_topology *tn_topology_unref(tn_topology *topo)
{
	if (!topo_ok(topo))
		return NULL;
	/* acq_rel: the last owner must see every other owner's reads finished before freeing. */
	if (atomic_fetch_sub_explicit(&topo->refcount, 1, memory_order_acq_rel) == 1)
		tn__handle_free(topo);
	return NULL;
}

/* The index in nodes[] of node @node, or TN_ERANGE. */
static int node_slot(const tn_topology *t, int node, const char *fn)
{
	char buf[64];
	if (node < 0 || node >= TN_NUMA_MAX_NODES || t->node_slot[node] < 0)
		return tn__error(TN_ERANGE, "%s: no NUMA node %d in the topology (its nodes: %s)",
				 fn, node, format_nodes(buf, sizeof(buf), t->node_mask));
	return t->node_slot[node];
}

/* The index in cpus[] of CPU @cpu, or TN_ERANGE. */
static int cpu_slot(const tn_topology *t, int cpu, const char *fn)
{
	int lo = 0, hi = t->ncpus;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int os = t->cpus[t->by_os[mid]].os;
		if (os == cpu)
			return t->by_os[mid];
		if (os < cpu)
			lo = mid + 1;
		else
			hi = mid;
	}
	return tn__error(TN_ERANGE, "%s: no CPU %d in the topology (CPUs %d to %d, %d of them)", fn,
			 cpu, t->cpus[t->by_os[0]].os, t->cpus[t->by_os[t->ncpus - 1]].os,
			 t->ncpus);
}

static int check_level(int level, const char *fn)
{
	if (level < 1 || level > CACHE_LEVELS)
		return tn__error(TN_EINVAL, "%s: cache level %d (1, 2 or 3)", fn, level);
	return 0;
}

static int check_buffer(const int *buf, int max, const char *fn)
{
	if (max < 0 || (max > 0 && !buf))
		return tn__error(TN_EINVAL, "%s: %s", fn,
				 max < 0 ? "negative max" : "NULL ret_cpus");
	return 0;
}

/* Write the OS numbers of the CPUs @want accepts, in increasing order, up to @max of them;
 * return how many there are. */
static int list_cpus(const tn_topology *t, bool (*want)(const struct topo_cpu *, const void *),
		     const void *arg, int *ret_cpus, int max)
{
	int n = 0;
	for (int i = 0; i < t->ncpus; i++) {
		const struct topo_cpu *cpu = &t->cpus[t->by_os[i]];
		if (!want(cpu, arg))
			continue;
		if (n < max)
			ret_cpus[n] = cpu->os;
		n++;
	}
	return n;
}

TN_EXPORT int tn_topology_nodes(const tn_topology *topo, uint64_t *ret_nodes)
{
	if (!topo_ok(topo))
		return bad_topo("tn_topology_nodes");
	if (ret_nodes)
		*ret_nodes = topo->node_mask;
	return topo->nnodes;
}

TN_EXPORT int tn_topology_node_info(const tn_topology *topo, int node, tn_numa_node_info *ret)
{
	const char *fn = "tn_topology_node_info";
	if (!topo_ok(topo))
		return bad_topo(fn);
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret", fn);
	int s = node_slot(topo, node, fn);
	if (s < 0)
		return s;
	const struct topo_node *n = &topo->nodes[s];
	*ret = (tn_numa_node_info){ .node = n->os, .cores = n->cores, .cpus = n->cpus,
				    .memory = n->memory };
	return 0;
}

static bool on_nodes(const struct topo_cpu *cpu, const void *mask)
{
	return (cpu->nodes & *(const uint64_t *)mask) != 0;
}

TN_EXPORT int tn_topology_node_cpus(const tn_topology *topo, int node, int *ret_cpus, int max)
{
	const char *fn = "tn_topology_node_cpus";
	if (!topo_ok(topo))
		return bad_topo(fn);
	int r = check_buffer(ret_cpus, max, fn);
	if (r < 0)
		return r;
	if ((r = node_slot(topo, node, fn)) < 0)
		return r;
	uint64_t bit = UINT64_C(1) << node;
	return list_cpus(topo, on_nodes, &bit, ret_cpus, max);
}

TN_EXPORT int tn_topology_cpu_node(const tn_topology *topo, int cpu)
{
	if (!topo_ok(topo))
		return bad_topo("tn_topology_cpu_node");
	int s = cpu_slot(topo, cpu, "tn_topology_cpu_node");
	if (s < 0)
		return s;
	uint64_t nodes = topo->cpus[s].nodes;
	if (!nodes)
		return tn__error(TN_ENOENT, "tn_topology_cpu_node: CPU %d is on no NUMA node", cpu);
	return __builtin_ctzll(nodes);
}

TN_EXPORT int tn_topology_cache_count(const tn_topology *topo, int level)
{
	if (!topo_ok(topo))
		return bad_topo("tn_topology_cache_count");
	int r = check_level(level, "tn_topology_cache_count");
	return r < 0 ? r : topo->ncaches[level - 1];
}

static void cache_info(const tn_topology *t, int level, int index, tn_cache_info *ret)
{
	const struct topo_cache *c = &t->caches[level - 1][index];
	*ret = (tn_cache_info){ .level = level,
				.index = index,
				.size = c->size,
				.line_size = c->line_size,
				.associativity = c->associativity,
				.cpus = c->cpus };
}

struct cache_ref {
	int level, index;
};

static bool under_cache(const struct topo_cpu *cpu, const void *arg)
{
	const struct cache_ref *c = arg;
	return cpu->cache[c->level - 1] == c->index;
}

TN_EXPORT int tn_topology_cache(const tn_topology *topo, int level, int index, tn_cache_info *ret,
				int *ret_cpus, int max)
{
	const char *fn = "tn_topology_cache";
	if (!topo_ok(topo))
		return bad_topo(fn);
	int r = check_level(level, fn);
	if (r < 0 || (r = check_buffer(ret_cpus, max, fn)) < 0)
		return r;
	if (index < 0 || index >= topo->ncaches[level - 1])
		return tn__error(TN_ERANGE, "%s: no L%d cache %d (the topology has %d)", fn, level,
				 index, topo->ncaches[level - 1]);
	if (ret)
		cache_info(topo, level, index, ret);
	return list_cpus(topo, under_cache, &(struct cache_ref){ level, index }, ret_cpus, max);
}

TN_EXPORT int tn_topology_cpu_cache(const tn_topology *topo, int cpu, int level,
				    tn_cache_info *ret)
{
	const char *fn = "tn_topology_cpu_cache";
	if (!topo_ok(topo))
		return bad_topo(fn);
	int r = check_level(level, fn);
	if (r < 0)
		return r;
	if (!ret)
		return tn__error(TN_EINVAL, "%s: NULL ret", fn);
	int s = cpu_slot(topo, cpu, fn);
	if (s < 0)
		return s;
	int index = topo->cpus[s].cache[level - 1];
	if (index < 0)
		return tn__error(TN_ENOENT, "%s: CPU %d has no L%d cache in the topology", fn, cpu,
				 level);
	cache_info(topo, level, index, ret);
	return 0;
}

/* Parse "dddd:bb:dd.f" or "bb:dd.f" (hex); false when malformed. */
static bool parse_busid(const char *s, unsigned *domain, unsigned *bus, unsigned *dev,
			unsigned *func)
{
	unsigned v[4] = { 0 }, n = 0;
	int digits[4] = { 0 };
	const char *p = s;
	char seps[3] = { 0 };

	for (;;) {
		int d = 0;
		unsigned x = 0;
		for (; d < 9; d++, p++) {
			int h = *p >= '0' && *p <= '9'   ? *p - '0'
				: *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
				: *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
							 : -1;
			if (h < 0)
				break;
			x = x << 4 | (unsigned)h;
		}
		if (!d || d > 8 || n == 4)
			return false;
		digits[n] = d;
		v[n++] = x;
		if (!*p)
			break;
		if (n > 3 || (*p != ':' && *p != '.'))
			return false;
		seps[n - 1] = *p++;
	}
	if (n == 3) { /* no domain */
		v[3] = v[2];
		v[2] = v[1];
		v[1] = v[0];
		v[0] = 0;
		digits[3] = digits[2];
		digits[2] = digits[1];
		digits[1] = digits[0];
		digits[0] = 4;
		seps[2] = seps[1];
		seps[1] = seps[0];
		seps[0] = ':';
	} else if (n != 4) {
		return false;
	}
	if (seps[0] != ':' || seps[1] != ':' || seps[2] != '.' || digits[0] < 4 ||
	    digits[1] != 2 || digits[2] != 2 || digits[3] != 1 || v[2] > 0x1f || v[3] > 7)
		return false;
	*domain = v[0];
	*bus = v[1];
	*dev = v[2];
	*func = v[3];
	return true;
}

TN_EXPORT int tn_topology_pci_node(const tn_topology *topo, const char *busid,
				   uint64_t *ret_nodes)
{
	const char *fn = "tn_topology_pci_node";
	unsigned domain, bus, dev, func;
	if (!topo_ok(topo))
		return bad_topo(fn);
	if (!busid)
		return tn__error(TN_EINVAL, "%s: NULL busid", fn);
	if (!parse_busid(busid, &domain, &bus, &dev, &func))
		return tn__error(TN_EINVAL, "%s: '%.40s' is not a PCI bus id (dddd:bb:dd.f)", fn,
				 busid);
	for (int i = 0; i < topo->npci; i++) {
		const struct topo_pci *p = &topo->pci[i];
		if (p->domain == domain && p->bus == bus && p->dev == dev && p->func == func) {
			if (ret_nodes)
				*ret_nodes = p->nodes;
			return __builtin_ctzll(p->nodes);
		}
	}
	return tn__error(TN_ENOENT, "%s: no PCI device %04x:%02x:%02x.%x in the topology", fn,
			 domain, bus, dev, func);
}

TN_EXPORT int tn_topology_distance(const tn_topology *topo, int from, int to,
				   uint64_t *ret_distance)
{
	const char *fn = "tn_topology_distance";
	if (!topo_ok(topo))
		return bad_topo(fn);
	if (!ret_distance)
		return tn__error(TN_EINVAL, "%s: NULL ret_distance", fn);
	int a = node_slot(topo, from, fn), b = a < 0 ? a : node_slot(topo, to, fn);
	if (b < 0)
		return b;
	if (!topo->distance)
		return tn__error(TN_ENOENT, "%s: the topology has no node distance matrix", fn);
	*ret_distance = topo->distance[a * topo->nnodes + b];
	return 0;
}

/* ---- the pinning plan ---- */

TN_EXPORT int tn_topology_pin_plan(const tn_topology *topo, uint64_t nodes, int threads,
				   int *ret_cpus)
{
	const char *fn = "tn_topology_pin_plan";
	char buf[64], have[64];

	if (!topo_ok(topo))
		return bad_topo(fn);
	if (threads < 1 || !ret_cpus)
		return tn__error(TN_EINVAL, "%s: %s", fn,
				 threads < 1 ? "threads must be at least 1" : "NULL ret_cpus");
	if (!nodes)
		return tn__error(TN_EINVAL, "%s: an empty node mask", fn);
	if (nodes & ~topo->node_mask)
		return tn__error(TN_ERANGE, "%s: no NUMA node %s in the topology (its nodes: %s)",
				 fn, format_nodes(buf, sizeof(buf), nodes & ~topo->node_mask),
				 format_nodes(have, sizeof(have), topo->node_mask));
	/* The places, as OMP_PLACES=cores: every core with a CPU on the nodes, in topology
	 * order (so node by node on the usual machine). */
	int64_t places = 0;
	for (int k = 0; k < topo->ncores; k++) {
		const struct topo_core *c = &topo->cores[k];
		for (int i = c->first; i < c->first + c->count; i++) {
			if (topo->cpus[i].nodes & nodes) {
				places++;
				break;
			}
		}
	}
	if (!places)
		return tn__error(TN_EINVAL, "%s: NUMA node %s has no CPU", fn,
				 format_nodes(buf, sizeof(buf), nodes));
	/* OMP_PROC_BIND=spread: worker i goes to place i * places / threads. Place p thus gets
	 * workers [ceil(p * threads / places), ceil((p + 1) * threads / places)): one each
	 * while threads <= places, and the j-th of several takes the place's j-th CPU. */
	int64_t p = 0;
	for (int k = 0; k < topo->ncores; k++) {
		const struct topo_core *c = &topo->cores[k];
		int on = 0;
		for (int i = c->first; i < c->first + c->count; i++)
			on += (topo->cpus[i].nodes & nodes) != 0;
		if (!on)
			continue;
		int64_t first = (p * threads + places - 1) / places;
		int64_t end = ((p + 1) * threads + places - 1) / places;
		for (int64_t w = first; w < end; w++) {
			int j = (int)((w - first) % on);
			for (int i = c->first;; i++) {
				if ((topo->cpus[i].nodes & nodes) && j-- == 0) {
					ret_cpus[w] = topo->cpus[i].os;
					break;
				}
			}
		}
		p++;
	}
	return 0;
}
