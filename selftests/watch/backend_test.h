/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The watch tests' backend probe: hm_backend_probe(), and for the module
 * (in the VM, as root) a modprobe first, waiting for devtmpfs to create
 * /dev/hmirror.  Natively the modprobe fails and the variant SKIPs.
 */
#ifndef HMIRROR_BACKEND_TEST_H
#define HMIRROR_BACKEND_TEST_H
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <hmirror/watch.h>

static inline int hm_test_backend_probe(enum hm_backend b, const char **why)
{
	int err = hm_backend_probe(b, why);

	if (err == -ENODEV && b == HM_BACKEND_KMOD && !getuid() &&
	    !system("modprobe -q hmirror 2>/dev/null")) {
		/* devtmpfs creates the node right after the module registers it */
		for (int i = 0; i < 200 && access("/dev/hmirror", F_OK); i++)
			usleep(10000);
		err = hm_backend_probe(b, why);
	}
	return err;
}
#endif
