// SPDX-License-Identifier: GPL-2.0
/*
 * hmirrord: hosts the hmirror engine for client processes.
 *
 *   hmirrord [--socket PATH] [--device WANT] [--list-devices]
 *            [--socket-mode OCTAL] [--allow-uid UID] [--allow-any]
 *            [--no-netlink] [-v]
 *
 * Sources on the one io_uring loop: the listening socket (or the one
 * systemd passed, socket activation), each client, a signalfd (SIGTERM,
 * SIGINT: clean shutdown; SIGHUP ignored), the device thread's completion
 * eventfd, the module's netlink events and a shutdown timerfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "client.h"
#include "device.h"
#include "engine_host.h"
#include "loop.h"
#include "netlink.h"
#include "protocol.h"
#include "state.h"
#include "validate.h"
#include "worker.h"

static struct hmd_netlink *nl;
static const char *sock_path;
static bool sock_ours;			/* we created (and unlink) it */
static int timer_fd = -1;
static uint64_t shutdown_deadline;

static void on_listen(struct hm_loop_source *src, uint32_t revents, void *data)
{
	for (int i = 0; i < 8; i++) {
		int r = hmd_client_accept(hm_loop_source_fd(src),
					  hmd_client_readable);

		if (r == -EAGAIN || r == -EWOULDBLOCK)
			break;
	}
}

static void maybe_finish(void)
{
	if (!hmd.shutting_down)
		return;
	if (hmd.clients || !hmd_worker_idle()) {
		if (hmd_now_ns() < shutdown_deadline)
			return;
		hmd_log(LOG_WARN_, "shutdown: the device thread did not finish "
			"within 10 s; exiting anyway");
	}
	hm_loop_quit(hmd.loop, 0);
}

static void begin_shutdown(const char *why)
{
	struct itimerspec it = {
		.it_interval = { .tv_nsec = 50 * 1000 * 1000 },
		.it_value = { .tv_nsec = 50 * 1000 * 1000 },
	};

	if (hmd.shutting_down)
		return;
	hmd_log(LOG_INFO_, "shutting down (%s)", why);
	sd_notify(0, "STOPPING=1");
	hmd.shutting_down = true;
	shutdown_deadline = hmd_now_ns() + 10ull * 1000000000ull;
	if (hmd.listen_src) {
		hm_loop_remove(hmd.listen_src);
		hmd.listen_src = NULL;
	}
	/* queued dispatches fail with -ESHUTDOWN (their replies are sent);
	 * the running one finishes and is answered; then clients go */
	hmd_worker_cancel(NULL, -ESHUTDOWN);
	timerfd_settime(timer_fd, 0, &it, NULL);
}

static void on_timer(struct hm_loop_source *src, uint32_t revents, void *data)
{
	uint64_t v;

	if (read(timer_fd, &v, sizeof(v)) < 0)
		return;
	/* once nothing runs on the device, drop the clients and leave */
	if (hmd_worker_idle())
		hmd_clients_shutdown();
	maybe_finish();
}

static void on_signal(struct hm_loop_source *src, uint32_t revents, void *data)
{
	struct signalfd_siginfo si;

	while (read(hm_loop_source_fd(src), &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			begin_shutdown(si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
	}
}

static void nl_event(uint32_t cmd, uint64_t space, uint64_t chunk, void *data)
{
	hmd.stats[HM_DSTAT_NL_EVENTS]++;
	hmd_eng_guard_event(space, chunk);
}

static void on_netlink(struct hm_loop_source *src, uint32_t revents, void *data)
{
	if (hmd_netlink_process(nl) < 0 && (revents & (POLLERR | POLLHUP))) {
		hmd_log(LOG_WARN_, "netlink: socket error; events off");
		hm_loop_remove(src);
		hmd.netlink = false;
	}
}

static void close_fd(void *data)
{
	close((int)(intptr_t)data);
}

static int open_listener(const char *path, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = sd_listen_fds(1), fd, r;
	char dir[sizeof(sa.sun_path)];
	char *slash;

	if (n > 0) {
		fd = SD_LISTEN_FDS_START;
		if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
			hmd_log(LOG_ERR_, "socket activation: fd %d is not a "
				"listening SOCK_SEQPACKET unix socket", fd);
			return -EINVAL;
		}
		/* systemd passes it blocking; on_listen() accepts until
		 * EAGAIN and would block the loop in accept4() instead */
		r = fcntl(fd, F_GETFL);
		if (r < 0 || fcntl(fd, F_SETFL, r | O_NONBLOCK) < 0) {
			r = -errno;
			hmd_log(LOG_ERR_, "socket activation: fd %d: %s", fd, strerror(-r));
			return r;
		}
		hmd_log(LOG_INFO_, "socket activation: listening on fd %d", fd);
		return fd;
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		mkdir(dir, 0755);
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a stale socket of a dead daemon is replaced; a live one is not */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	unlink(path);
	mode_t old = umask(0777 & ~mode);

	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	chmod(path, mode);
	sock_ours = true;
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hmirrord [options]\n"
		"  --socket PATH        listen here (default $%s or %s)\n"
		"  --socket-mode OCTAL  permissions of the socket (default 0660)\n"
		"  --allow-uid UID      also accept this uid (root and ours always)\n"
		"  --allow-any          accept any peer the socket mode lets in\n"
		"  --isolate-all        refuse modules that fail the isolation check\n"
		"                       to root and our own uid too\n"
		"  --device WANT        index, /dev/dri/renderD*, PCI address or name\n"
		"  --list-devices       print devices and exit\n"
		"  --no-netlink         do not subscribe to the module's events\n"
		"  --timeout SECONDS    per device submission (default 60)\n"
		"  --spin-us US         after a job, look for the next one this long\n"
		"                       before sleeping (default 50)\n"
		"  -v, --verbose        log connections (twice: debug)\n",
		HM_PROTO_SOCKET_ENV, HM_PROTO_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-mode", required_argument, NULL, 'm' },
		{ "allow-uid", required_argument, NULL, 'u' },
		{ "allow-any", no_argument, NULL, 'a' },
		{ "isolate-all", no_argument, NULL, 'I' },
		{ "device", required_argument, NULL, 'd' },
		{ "list-devices", no_argument, NULL, 'l' },
		{ "no-netlink", no_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ "spin-us", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *want = getenv("HMIRROR_DEVICE");
	bool use_netlink = true;
	mode_t mode = 0660;
	char why[256];
	sigset_t ss;
	int c, r, sfd;

	sock_path = getenv(HM_PROTO_SOCKET_ENV);
	if (!sock_path || !*sock_path)
		sock_path = HM_PROTO_SOCKET;
	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock_path = optarg; break;
		case 'm': mode = (mode_t)strtoul(optarg, NULL, 8) & 0777; break;
		case 'u': hmd.allow_uid = (uid_t)strtoul(optarg, NULL, 10); break;
		case 'a': hmd.allow_any = true; break;
		case 'I': hmd.isolate_all = true; break;
		case 'd': want = optarg; break;
		case 'l': return hmd_device_list() < 0 ? 1 : 0;
		case 'n': use_netlink = false; break;
		case 't': hmd.dispatch_timeout_ns = (uint64_t)(atof(optarg) * 1e9); break;
		case 'S': hmd.spin_ns = (uint64_t)(atof(optarg) * 1e3); break;
		case 'v': hmd.verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	hmd.t_start = hmd_now_ns();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	/* before any thread starts, so the device thread inherits the mask */
	pthread_sigmask(SIG_BLOCK, &ss, NULL);

	r = hm_loop_new(512, &hmd.loop);
	if (r < 0) {
		fprintf(stderr, "hmirrord: io_uring: %s\n", strerror(-r));
		return 1;
	}
	r = hmd_validate_init();
	if (r < 0) {
		fprintf(stderr, "hmirrord: SPIRV-Tools: %s\n", strerror(-r));
		return 1;
	}
	r = hmd_device_pick(want, &hmd.dev, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "hmirrord: device: %s\n", why);
		if (want)
			return 1;
		snprintf(hmd.dev.name, sizeof(hmd.dev.name), "none");
	} else {
		fprintf(stderr, "hmirrord: device %s\n", why);
		r = hmd_engine_host_init(&hmd.dev, why, sizeof(why));
		if (r < 0)
			fprintf(stderr, "hmirrord: no engine (%s): dispatches "
				"answer -ENOSYS\n", why);
	}
	r = hmd_worker_start(hmd.loop);
	if (r < 0) {
		fprintf(stderr, "hmirrord: device thread: %s\n", strerror(-r));
		return 1;
	}
	sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0 || hm_loop_add(hmd.loop, sfd, POLLIN, on_signal, NULL,
				   close_fd, NULL) < 0) {
		fprintf(stderr, "hmirrord: signalfd: %s\n", strerror(errno));
		return 1;
	}
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (timer_fd < 0 || hm_loop_add(hmd.loop, timer_fd, POLLIN, on_timer,
					NULL, NULL, NULL) < 0) {
		fprintf(stderr, "hmirrord: timerfd: %s\n", strerror(errno));
		return 1;
	}
	if (use_netlink) {
		r = hmd_netlink_new(nl_event, NULL, &nl);
		if (r == 0 && hm_loop_add(hmd.loop, hmd_netlink_fd(nl), POLLIN,
					  on_netlink, NULL, NULL, NULL) == 0) {
			hmd.netlink = true;
		} else {
			fprintf(stderr, "hmirrord: no \"hmirror\" netlink family "
				"(%s): mirrors are dropped at the next dispatch's "
				"harvest\n", strerror(r < 0 ? -r : EIO));
		}
	}
	hmd.listen_fd = open_listener(sock_path, mode);
	if (hmd.listen_fd < 0) {
		fprintf(stderr, "hmirrord: %s: %s\n", sock_path,
			strerror(-hmd.listen_fd));
		return 1;
	}
	r = hm_loop_add(hmd.loop, hmd.listen_fd, POLLIN, on_listen, NULL, NULL,
			&hmd.listen_src);
	if (r < 0)
		return 1;
	fprintf(stderr, "hmirrord: listening on %s (pid %d)\n", sock_path,
		(int)getpid());
	sd_notifyf(0, "READY=1\nSTATUS=serving on %s, device %s\nMAINPID=%d",
		   sock_path, hmd.dev.name, (int)getpid());

	r = hm_loop_run(hmd.loop);

	if (sock_ours)
		unlink(sock_path);
	close(hmd.listen_fd);
	if (!hmd_worker_idle()) {
		/* the 10 s deadline passed with a job on the device: joining
		 * the device thread could hang, and freeing what it uses
		 * would be worse; leave now (clients see a reset) */
		fprintf(stderr, "hmirrord: stopped (device thread still busy)\n");
		_exit(r < 0 ? 1 : 0);
	}
	hmd_worker_stop();
	hm_loop_free(hmd.loop);	/* the sources left: signalfd, timer, eventfd, netlink */
	hmd.loop = NULL;
	hmd_netlink_free(nl);
	hmd_engine_host_finish();
	hmd_validate_finish();
	fprintf(stderr, "hmirrord: stopped\n");
	return r < 0 ? 1 : 0;
}
