// SPDX-License-Identifier: MIT
/*
 * tensord(8): the daemon that owns the arenas. This file starts and stops it: the command line
 * and the configuration file (re-read on SIGHUP), the socket and the lock beside it, the arena
 * and hugetlbfs directories, daemonising and systemd's notifications, and the order in which
 * the pieces start and stop. The pieces, which share the records and state of daemon.h:
 *
 *   loop.c       the io_uring loop: accept, each connection's receives and queued replies,
 *                signals, the workers' events and the reclamation timer;
 *   clients.c    connections, their credentials and the arena slots they hold;
 *   handlers.c   the requests, dispatched through one table built from the wire protocol's
 *                list of operations (proto.h, validated by proto.c);
 *   access.c     owner, mode bits, grants, create_users, and the per-user quotas;
 *   arenas.c     the arena records (NAME.meta beside NAME.arena) and recovery at start;
 *   reclaim.c    giving back the slots of processes that are gone;
 *   transfer.c   LOAD and SAVE on worker threads (loadsave.c moves the data);
 *   cudashare.c  the table of CUDA exports; guard.c  the SIGBUS guard over the arena mappings;
 *   config.c     tensord.conf; log.c  the log.
 *
 * Socket activation: started by systemd from tensord.socket, the daemon takes the listening
 * socket systemd passes (sd_listen_fds(3)'s protocol, LISTEN_PID and LISTEN_FDS, read here
 * without libsystemd) instead of binding one, and leaves it in place when it stops.
 *
 * Restarts: a stopped daemon leaves the arenas, their records and its clients' slots in place.
 * The next one reopens the arenas from their records and repairs them, and clients that are
 * still alive re-register their slots (REATTACH) when they reconnect.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../shm/arena_remote.h"
#include "../shm/shm.h"
#include "daemon.h"

struct tnd_daemon tnd_d;

static int lock_fd;
static char config_path[PATH_MAX];
static bool config_required, level_from_cli, socket_named;
/* The descriptors systemd passed (LISTEN_FDS, when LISTEN_PID is this process); -1: error. */
static int listen_fds;

#define SD_LISTEN_FDS_START 3

/* ---- the socket and the directories ---------------------------------------------------------- */

static int mkdir_private(const char *dir)
{
	if (mkdir(dir, 0700) && errno != EEXIST) {
		tnd_error("cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode)) {
		tnd_error("%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != tnd_d.uid) {
		tnd_error("%s belongs to uid %u, not to tensord's uid %u", dir, (unsigned)st.st_uid,
			  (unsigned)tnd_d.uid);
		return -1;
	}
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700)) {
		tnd_error("chmod 0700 %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

static int sd_notify_msg(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !path[0] || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return 0;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	ssize_t n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	close(fd);
	return n < 0 ? -1 : 0;
}

/* The socket's directory: another user who may write in it could make the lock file or the
 * socket's name first, and keep tensord from starting or stand in for it. It must belong to
 * tensord's user or root, and be writable by nobody else, unless its sticky bit is set (as
 * /tmp's), which keeps others from removing or renaming what tensord makes there (the lock
 * file's owner is checked after). */
static int check_socket_dir(const char *dir)
{
	struct stat st;
	if (stat(dir, &st)) {
		tnd_error("socket directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (st.st_uid != 0 && st.st_uid != tnd_d.uid) {
		tnd_error("socket directory %s belongs to uid %u: tensord (uid %u) refuses a socket "
			  "in a directory another user owns; use one of its own (--socket, "
			  "TENSORD_SOCKET)", dir, (unsigned)st.st_uid, (unsigned)tnd_d.uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		tnd_error("socket directory %s is writable by %s (mode %04o) and not sticky: another "
			  "user could take the socket's name or its lock; make it 0755 (chmod go-w) "
			  "or use another directory (--socket, TENSORD_SOCKET)", dir,
			  st.st_mode & S_IWOTH ? "others" : "its group",
			  (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* sd_listen_fds(3) without libsystemd: the count of sockets passed from SD_LISTEN_FDS_START on,
 * when LISTEN_PID names this process; the variables are removed so children never see them. */
static int take_listen_fds(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	int n = 0;
	if (pid && fds) {
		char *end;
		errno = 0;
		unsigned long long p = strtoull(pid, &end, 10);
		if (!errno && !*end && end != pid && p == (unsigned long long)getpid()) {
			unsigned long long f = strtoull(fds, &end, 10);
			n = !errno && !*end && end != fds && f < 1024 ? (int)f : -1;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return n;
}

/* Take the socket systemd passed: one listening AF_UNIX SOCK_SEQPACKET socket bound to a path,
 * the configured one when the command line, TENSORD_SOCKET or the configuration file names it. */
static int adopt_socket(void)
{
	if (listen_fds != 1) {
		tnd_error("systemd passed %d sockets (LISTEN_FDS); tensord takes exactly one: "
			  "check tensord.socket", listen_fds);
		return -1;
	}
	int fd = SD_LISTEN_FDS_START, v;
	socklen_t vl = sizeof(v);
	struct stat st;
	if (fstat(fd, &st) || !S_ISSOCK(st.st_mode)) {
		tnd_error("descriptor %d from systemd is not a socket: check tensord.socket", fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl) || v != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &(socklen_t){ sizeof(v) }) ||
	    v != SOCK_SEQPACKET ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &(socklen_t){ sizeof(v) }) || !v) {
		tnd_error("the socket from systemd is not a listening AF_UNIX SOCK_SEQPACKET "
			  "socket: tensord.socket must use ListenSequentialPacket=");
		return -1;
	}
	struct sockaddr_un sa;
	socklen_t sl = sizeof(sa);
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) || sl <= offsetof(struct sockaddr_un,
									     sun_path) ||
	    sa.sun_path[0] != '/') {
		tnd_error("the socket from systemd is not bound to a path: tensord.socket must "
			  "listen on a file system path");
		return -1;
	}
	char bound[sizeof(sa.sun_path) + 1];
	size_t bl = sl - offsetof(struct sockaddr_un, sun_path);
	memcpy(bound, sa.sun_path, bl);
	bound[bl] = 0;
	if (socket_named && strcmp(bound, tnd_d.cfg.socket)) {
		tnd_error("systemd passed the socket %s but tensord is configured for %s: make "
			  "tensord.socket and the configuration agree", bound, tnd_d.cfg.socket);
		return -1;
	}
	if (strlen(bound) >= sizeof(tnd_d.cfg.socket)) {
		tnd_error("the socket from systemd is bound to a path of %zu bytes", strlen(bound));
		return -1;
	}
	memcpy(tnd_d.cfg.socket, bound, strlen(bound) + 1);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	tnd_d.listen_fd = fd;
	return 0;
}

/* Bind the socket, refusing when another tensord serves it; or take systemd's. */
static int open_socket(void)
{
	if (listen_fds && adopt_socket())
		return -1;
	const char *path = tnd_d.cfg.socket;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		tnd_error("socket path %s is %zu bytes; a UNIX socket address holds %zu", path,
			  strlen(path), sizeof(sa.sun_path) - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	/* The directory (for /run/tensord and similar). */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) && errno != EEXIST) {
			tnd_error("cannot create %s: %s", dir, strerror(errno));
			return -1;
		}
	}
	if (check_socket_dir(slash && slash != dir ? dir : slash ? "/" : "."))
		return -1;
	/* A lock beside the socket serialises daemons starting at the same time. */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s.lock", path);
	lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock_fd < 0) {
		tnd_error("cannot open %s: %s", lock, strerror(errno));
		return -1;
	}
	struct stat lst;
	if (fstat(lock_fd, &lst) || lst.st_uid != tnd_d.uid) {
		/* Someone else made it (in a sticky directory others may write): they could hold
		 * its lock and keep every tensord from starting. */
		tnd_error("%s belongs to uid %u, not to tensord's uid %u: remove it, or give tensord "
			  "a socket in a directory only it may write (--socket, TENSORD_SOCKET)",
			  lock, (unsigned)lst.st_uid, (unsigned)tnd_d.uid);
		return -1;
	}
	if (flock(lock_fd, LOCK_EX | LOCK_NB)) {
		tnd_error("another tensord holds %s: it is serving or starting on %s", lock, path);
		return -1;
	}
	if (listen_fds)
		return 0; /* systemd's socket: nothing to probe or bind */
	/* A daemon killed a moment ago may still have its socket listening: its io_uring is
	 * torn down after the process, by the kernel's workers, and holds the socket until
	 * then. A listener whose process is gone is given up to 2 s to disappear. */
	int probe, pe;
	for (int tries = 0;; tries++) {
		probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (probe < 0 || connect(probe, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			break;
		struct ucred cr = { 0 };
		socklen_t cl = sizeof(cr);
		getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cr, &cl);
		close(probe);
		if (cr.pid > 0 && kill(cr.pid, 0) && errno == ESRCH && tries < 200) {
			usleep(10000);
			continue;
		}
		tnd_error("another tensord (pid %d) is serving %s", (int)cr.pid, path);
		return -1;
	}
	pe = errno;
	if (probe >= 0)
		close(probe);
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			tnd_error("%s exists and is not a socket: not touching it", path);
			return -1;
		}
		/* Nothing listens (ECONNREFUSED): a stale socket of a daemon that died. */
		if (pe != ECONNREFUSED) {
			tnd_error("cannot probe %s: %s", path, strerror(pe));
			return -1;
		}
		tnd_info("removing the stale socket %s", path);
		unlink(path);
	}
	/* Access control is by credentials, not by the socket's mode: bind it 0666 (through the
	 * umask, never a chmod by path that a symlink could redirect). */
	tnd_d.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	mode_t old_mask = umask(0111);
	int br = tnd_d.listen_fd < 0 ? -1
				     : bind(tnd_d.listen_fd, (struct sockaddr *)&sa, sizeof(sa));
	int be = errno;
	umask(old_mask);
	if (br) {
		tnd_error("cannot bind %s: %s", path, strerror(be));
		return -1;
	}
	if (listen(tnd_d.listen_fd, 4096)) {
		tnd_error("listen: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void find_hugedir(void)
{
	const char *base = tnd_d.cfg.hugepage_dir;
	char mnt[PATH_MAX] = "";
	if (!base[0]) {
		FILE *f = fopen("/proc/mounts", "re");
		char dev[256], mp[PATH_MAX], type[64];
		while (f && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, mp, type) == 3)
			if (!strcmp(type, "hugetlbfs")) {
				snprintf(mnt, sizeof(mnt), "%s", mp);
				break;
			}
		if (f)
			fclose(f);
		base = mnt;
	}
	if (!base[0])
		return;
	if (tnd_d.uid)
		snprintf(tnd_d.hugedir, sizeof(tnd_d.hugedir), "%.3900s/tensord-%u", base,
			 (unsigned)tnd_d.uid);
	else
		snprintf(tnd_d.hugedir, sizeof(tnd_d.hugedir), "%.3900s/tensord", base);
	if (mkdir_private(tnd_d.hugedir))
		tnd_d.hugedir[0] = 0;
}

/* ---- options and configuration --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: tensord [--socket PATH] [--config FILE] [--foreground]\n"
		   "               [--log-level error|warn|info|debug] [--log-target stderr|syslog]\n"
		   "               [--arena-dir DIR] [--version] [--help]\n"
		   "The daemon that owns libtensor's shared-memory arenas; see tensord(8).\n");
}

static int parse_args(int argc, char **argv, bool *foreground, char *cfg_err, size_t errlen)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-target", required_argument, NULL, 't' },
		{ "arena-dir", required_argument, NULL, 'd' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *sock = NULL, *level = NULL, *target = NULL, *dir = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "s:c:fl:t:d:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'c': config = optarg; break;
		case 'f': *foreground = true; break;
		case 'l': level = optarg; break;
		case 't': target = optarg; break;
		case 'd': dir = optarg; break;
		case 'V': printf("tensord %s\n", tn_version()); exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tensord: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
	tnd_config_defaults(&tnd_d.cfg);
	char *path = config_path;
	level_from_cli = level != NULL;
	if (config) {
		snprintf(config_path, sizeof(config_path), "%s", config);
		config_required = true;
		if (tnd_config_load(&tnd_d.cfg, config, true, cfg_err, errlen))
			return -1;
	} else {
		const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
		if (tnd_d.uid == 0)
			snprintf(path, PATH_MAX, "/etc/tensord.conf");
		else if (xdg && xdg[0])
			snprintf(path, PATH_MAX, "%.4000s/tensord.conf", xdg);
		else
			snprintf(path, PATH_MAX, "%.4000s/.config/tensord.conf", home ? home : "/");
		if (tnd_config_load(&tnd_d.cfg, path, false, cfg_err, errlen))
			return -1;
	}
	char line[PATH_MAX + 32];
	if (level) {
		snprintf(line, sizeof(line), "log_level = %s", level);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--log-level", cfg_err,
				     errlen))
			return -1;
	}
	if (target) {
		snprintf(line, sizeof(line), "log_target = %s", target);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--log-target", cfg_err,
				     errlen))
			return -1;
	} else if (!tnd_d.cfg.set_log_target) {
		tnd_d.cfg.log_target = *foreground ? TND_LOG_STDERR : TND_LOG_SYSLOG;
	}
	if (dir) {
		snprintf(line, sizeof(line), "arena_dir = %s", dir);
		if (tnd_config_parse(&tnd_d.cfg, line, strlen(line), "--arena-dir", cfg_err,
				     errlen))
			return -1;
	}
	socket_named = sock || (getenv("TENSORD_SOCKET") && getenv("TENSORD_SOCKET")[0]) ||
		       tnd_d.cfg.set_socket;
	if (sock) {
		if (strlen(sock) >= sizeof(tnd_d.cfg.socket)) {
			snprintf(cfg_err, errlen, "socket path %s is %zu bytes; a UNIX socket "
				 "address holds %zu", sock, strlen(sock),
				 sizeof(tnd_d.cfg.socket) - 1);
			return -1;
		}
		strcpy(tnd_d.cfg.socket, sock);
	} else if (getenv("TENSORD_SOCKET") && getenv("TENSORD_SOCKET")[0]) {
		const char *env = getenv("TENSORD_SOCKET");
		if (strlen(env) >= sizeof(tnd_d.cfg.socket)) {
			snprintf(cfg_err, errlen, "TENSORD_SOCKET is %zu bytes; a UNIX socket "
				 "address holds %zu", strlen(env), sizeof(tnd_d.cfg.socket) - 1);
			return -1;
		}
		strcpy(tnd_d.cfg.socket, env);
	} else if (!tnd_d.cfg.set_socket && listen_fds) {
		tnd_d.cfg.socket[0] = 0; /* the path systemd's socket is bound to */
	} else if (!tnd_d.cfg.set_socket) {
		/* Its own path, never the system daemon's that a client of this user falls
		 * back to (tn_tensord_socket_path). */
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		if (geteuid() == 0) {
			snprintf(tnd_d.cfg.socket, sizeof(tnd_d.cfg.socket), "%s",
				 TN_TENSORD_SYSTEM_SOCKET);
		} else if (!xdg || !xdg[0]) {
			snprintf(cfg_err, errlen, "TENSORD_SOCKET and XDG_RUNTIME_DIR are unset: "
				 "no default socket for uid %u (give --socket)",
				 (unsigned)geteuid());
			return -1;
		} else if (strlen(xdg) + sizeof("/tensord.sock") > sizeof(tnd_d.cfg.socket)) {
			snprintf(cfg_err, errlen, "XDG_RUNTIME_DIR is %zu bytes; with "
				 "/tensord.sock a UNIX socket address cannot hold it", strlen(xdg));
			return -1;
		} else {
			snprintf(tnd_d.cfg.socket, sizeof(tnd_d.cfg.socket), "%s/tensord.sock", xdg);
		}
	}
	if (!tnd_d.cfg.arena_dir[0]) {
		if (tnd_d.uid == 0)
			snprintf(tnd_d.cfg.arena_dir, sizeof(tnd_d.cfg.arena_dir),
				 "/dev/shm/tensord");
		else
			snprintf(tnd_d.cfg.arena_dir, sizeof(tnd_d.cfg.arena_dir),
				 "/dev/shm/tensord-%u", (unsigned)tnd_d.uid);
	}
	return 0;
}

void tnd_reload_config(void)
{
	/* Re-read the config file: the log level (unless --log-level set it), the limits
	 * and who may create arenas change; the socket, the directories, the log target
	 * and the defaults of new arenas stay as they were at start. */
	struct tnd_config n;
	char err[600];
	tnd_config_defaults(&n);
	if (tnd_config_load(&n, config_path, config_required, err, sizeof(err))) {
		tnd_error("SIGHUP: %s: keeping the current configuration", err);
		return;
	}
	if (!level_from_cli)
		tnd_d.cfg.log_level = n.log_level;
	tnd_d.cfg.max_arena_size = n.max_arena_size;
	tnd_d.cfg.max_arenas = n.max_arenas;
	tnd_d.cfg.max_clients = n.max_clients;
	tnd_d.cfg.max_clients_per_user = n.max_clients_per_user;
	tnd_d.cfg.hello_timeout_ms = n.hello_timeout_ms;
	tnd_d.cfg.max_hello_pending = n.max_hello_pending;
	tnd_d.cfg.max_slots_per_user = n.max_slots_per_user;
	tnd_d.cfg.reserved_slots = n.reserved_slots;
	tnd_d.cfg.max_arenas_per_user = n.max_arenas_per_user;
	tnd_d.cfg.max_bytes_per_user = n.max_bytes_per_user;
	tnd_d.cfg.max_names_per_user = n.max_names_per_user;
	tnd_d.cfg.max_spill_bytes_per_user = n.max_spill_bytes_per_user;
	tnd_d.cfg.reclaim_interval_ms = n.reclaim_interval_ms;
	tnd_d.cfg.evict_interval_ms = n.evict_interval_ms;
	tnd_d.cfg.create_all = n.create_all;
	tnd_d.cfg.ncreate_uids = n.ncreate_uids;
	tnd_d.cfg.ncreate_gids = n.ncreate_gids;
	memcpy(tnd_d.cfg.create_uids, n.create_uids, sizeof(n.create_uids));
	memcpy(tnd_d.cfg.create_gids, n.create_gids, sizeof(n.create_gids));
	tnd_log_setup(tnd_d.cfg.log_target, tnd_d.cfg.log_level);
	tnd_info("SIGHUP: re-read %s (log level, limits, quotas, create_users)",
		 config_path);
}

/* ---- start and stop -------------------------------------------------------------------------- */

static void shutdown_daemon(void)
{
	sd_notify_msg("STOPPING=1");
	/* Transfers see the cancel flag and end; wait for them (they use the arenas). */
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		atomic_store(&c->cancel, true);
	tnd_transfer_wait();
	/* The spill jobs too: a write stops at its next chunk, leaving a .tmp file. */
	tnd_spill_cancel();
	for (int i = 0; i < 3000 && tnd_spill_running(); i++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		tnd_spill_events();
	}
	tnd_spill_fini();
	tnd_http_stop();
	tnd_peers_stop();
	close(tnd_d.listen_fd);
	if (!listen_fds) /* systemd's socket stays, for the next start */
		unlink(tnd_d.cfg.socket);
	/* The lock file stays: removing it would let a daemon that opened it before and one
	 * that creates it afresh both win the lock. */
	close(lock_fd);
	/* Connections close without reclaiming: live clients keep their slots, and their
	 * library re-registers them with the next tensord. */
	for (struct tnd_client *c = tnd_d.clients; c; c = c->next)
		close(c->fd);
	for (struct tnd_arena *ar = tnd_d.arenas; ar; ar = ar->next)
		if (tnd_arena_intact(ar))
			tn_arena_unref(ar->a);
	tnd_cuda_fini(); /* its file stays for the next daemon */
	tnd_loop_fini();
	tnd_info("stopped");
}

int main(int argc, char **argv)
{
	bool foreground = false;
	char err[600];
	tnd_d.uid = geteuid();
	tnd_d.listen_fd = -1;
	listen_fds = take_listen_fds();
	if (parse_args(argc, argv, &foreground, err, sizeof(err))) {
		fprintf(stderr, "tensord: %s\n", err);
		return 1;
	}
	tnd_log_setup(tnd_d.cfg.log_target, tnd_d.cfg.log_level);
	signal(SIGPIPE, SIG_IGN);
	/* A descriptor per client: take all the kernel allows. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int ready[2] = { -1, -1 };
	if (!foreground) {
		if (pipe2(ready, O_CLOEXEC)) {
			perror("tensord: pipe");
			return 1;
		}
		pid_t p = fork();
		if (p < 0) {
			perror("tensord: fork");
			return 1;
		}
		if (p > 0) {
			/* The parent exits when the child listens (0) or fails (1). */
			close(ready[1]);
			char ok = 1;
			ssize_t n = read(ready[0], &ok, 1);
			if (n == 1 && ok == 0)
				return 0;
			/* The child's standard error may be /dev/null by now: say it here. */
			fprintf(stderr, "tensord: failed to start (see the log)\n");
			return 1;
		}
		close(ready[0]);
		setsid();
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			if (tnd_d.cfg.log_target == TND_LOG_SYSLOG)
				dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	tnd_d.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	tnd_d.event_fd = eventfd(0, EFD_CLOEXEC);
	int r;
	if ((r = tnd_guard_init())) {
		tnd_error("cannot install the SIGBUS guard: %s", strerror(-r));
		goto fail;
	}
	if (tnd_d.signal_fd < 0 || tnd_d.event_fd < 0 || mkdir_private(tnd_d.cfg.arena_dir) ||
	    open_socket())
		goto fail;
	if (tnd_loop_init())
		goto fail;
	find_hugedir();
	int rnd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rnd < 0 || read(rnd, &tnd_d.instance, sizeof(tnd_d.instance)) != sizeof(tnd_d.instance))
		tnd_d.instance = tnd_now_ns() ^ (uint64_t)getpid() << 32;
	if (rnd >= 0)
		close(rnd);
	tnd_d.started = tnd_wall_s();
	tnd_d.started_ns = tnd_now_ns();
	/* Recovery waits a while for a lock a client keeps (then leaves that arena's repair for
	 * later); from the loop on, this thread waits at most TND_LOCK_WAIT_MS for any arena's
	 * lock, so that a client that keeps one delays no request about another. */
	tn__arena_lock_timeout_ms = 250;
	/* The daemon's own lookups never wait for a restore: its spill jobs make them. */
	tn__arena_restore_wait_ns = 0;
	tnd_arenas_recover();
	tnd_cuda_init(tnd_d.cfg.arena_dir, tnd_process_connected);
	tn__arena_lock_timeout_ms = TND_LOCK_WAIT_MS;
	if (tnd_d.cfg.spill_dir[0] && mkdir_private(tnd_d.cfg.spill_dir))
		goto fail;
	if (tnd_spill_init() || tnd_http_start() || tnd_peers_start())
		goto fail;
	tnd_info("listening on %s (arenas in %s, %u recovered, pid %d)", tnd_d.cfg.socket,
		 tnd_d.cfg.arena_dir, tnd_d.narenas, (int)getpid());
	sd_notify_msg("READY=1");
	if (ready[1] >= 0) {
		char ok = 0;
		ssize_t n = write(ready[1], &ok, 1);
		(void)n;
		close(ready[1]);
	}
	tnd_loop_run();
	shutdown_daemon();
	return 0;
fail:
	if (ready[1] >= 0) {
		char ok = 1;
		ssize_t n = write(ready[1], &ok, 1);
		(void)n;
	}
	if (foreground && tnd_d.cfg.log_target == TND_LOG_SYSLOG)
		fprintf(stderr, "tensord: failed to start (see the log)\n");
	return 1;
}
