// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon's state: one struct hmd_state (main.c fills it from the
 * options), the estats lock, the logger (stderr with a syslog priority
 * prefix, which journald reads) and the monotonic clock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "state.h"

struct hmd_state hmd = {
	.listen_fd = -1, .allow_uid = (uid_t)-1,
	/* long enough for lavapipe under QEMU TCG; a GPU hang still ends */
	.dispatch_timeout_ns = 60ull * 1000000000ull,
	.spin_ns = 50000,
};
pthread_mutex_t hmd_estats_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t hmd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hmd_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level >= LOG_DEBUG_ && hmd.verbose < 2)
		return;
	if (level >= LOG_INFO_ && !hmd.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "<%d>hmirrord: ", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
