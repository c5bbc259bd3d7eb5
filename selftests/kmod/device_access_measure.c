// SPDX-License-Identifier: GPL-2.0
/*
 * Figures for Documentation/device-access.rst (not a test): cost of a
 * long-term pin and unpin, of a dma-buf export of a space, and of a guard
 * trip with and without a netlink events listener.  Medians of ROUNDS.
 *   tools/vm/run --kernel 6.1 -- build/bin/kmod-device-access-measure
 */
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include "device_access_test.h"

#define ROUNDS	5

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v[n / 2];
}

/* ns per page to pin (and to unpin) @size of populated anonymous memory */
static void measure_pin(int dev, size_t size)
{
	double pin[ROUNDS], unpin[ROUNDS];
	long ps = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = hmt_now_ns(), t1;
		int pfd = hmt_pin(dev, m, size, HMIRROR_PIN_WRITE, NULL);

		t1 = hmt_now_ns();
		if (pfd < 0) {
			printf("pin failed: %s\n", strerror(-pfd));
			return;
		}
		close(pfd);
		pin[r] = (double)(t1 - t0) / (size / ps);
		unpin[r] = (double)(hmt_now_ns() - t1) / (size / ps);
	}
	printf("pin %zu MiB: %.1f ns/page pin, %.1f ns/page unpin (close)\n",
	       size >> 20, median(pin, ROUNDS), median(unpin, ROUNDS));
	munmap(m, size);
}

static void measure_export(int dev, size_t size)
{
	double ex[ROUNDS];
	long ps = sysconf(_SC_PAGESIZE);
	int sfd = hmt_create(dev, size, 16, HMIRROR_CREATE_POPULATE);

	for (int r = 0; r < ROUNDS; r++) {
		uint64_t t0 = hmt_now_ns();
		int dfd = hmt_export(sfd, 0, 0, 0);

		ex[r] = (double)(hmt_now_ns() - t0) / (size / ps);
		close(dfd);
	}
	printf("dma-buf export of a %zu MiB space: %.1f ns/page\n",
	       size >> 20, median(ex, ROUNDS));
	close(sfd);
}

/* ns per guard trip over @nr chunks of one page */
static double trips(int dev, unsigned int nr)
{
	long ps = sysconf(_SC_PAGESIZE);
	int sfd = hmt_create(dev, nr * ps, __builtin_ctzl(ps), HMIRROR_CREATE_POPULATE);
	char *p = mmap(NULL, nr * ps, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, sfd, 0);
	uint64_t t0;
	double ns;

	hmt_arm(sfd, 0, nr);
	t0 = hmt_now_ns();
	for (unsigned int i = 0; i < nr; i++)
		p[i * ps] = 1;
	ns = (double)(hmt_now_ns() - t0) / nr;
	munmap(p, nr * ps);
	close(sfd);
	return ns;
}

/* rounds alternate between no listener and one, after a warm-up */
static void measure_trips(int dev)
{
	double quiet[ROUNDS], heard[ROUNDS];
	struct nl_sock *sk;
	int grp;

	trips(dev, 1024);
	for (int r = 0; r < ROUNDS; r++) {
		quiet[r] = trips(dev, 1024);
		sk = nl_socket_alloc();
		genl_connect(sk);
		grp = genl_ctrl_resolve_grp(sk, HMIRROR_GENL_NAME,
					    HMIRROR_GENL_MCGRP_EVENTS);
		nl_socket_add_membership(sk, grp);
		heard[r] = trips(dev, 1024);
		nl_socket_free(sk);
	}
	printf("guard trip: %.0f ns without an events listener, %.0f ns with one\n",
	       median(quiet, ROUNDS), median(heard, ROUNDS));
}

int main(void)
{
	int dev = hmt_open_dev();

	if (dev < 0) {
		printf("no /dev/hmirror: %s\n", strerror(-dev));
		return 1;
	}
	measure_pin(dev, 256 << 20);
	measure_export(dev, 64 << 20);
	measure_trips(dev);
	close(dev);
	return 0;
}
