/* SPDX-License-Identifier: GPL-2.0 */
/* Test helpers: run spirv-val on words; count instructions. */
#ifndef HM_TEST_SPV_CHECK_H
#define HM_TEST_SPV_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#ifndef HM_SPIRV_VAL
#define HM_SPIRV_VAL "spirv-val"
#endif

/* 1 if spirv-val can be run. */
static inline int spv_have_val(void)
{
	return system(HM_SPIRV_VAL " --version >/dev/null 2>&1") == 0;
}

/* Exit status of spirv-val --target-env env on words (0 = valid);
 * -1 when it cannot run.  Messages go to stderr (the TAP log). */
static inline int spv_validate(const uint32_t *w, size_t n, const char *env)
{
	char path[] = "/tmp/hm-spv-XXXXXX";
	char cmd[256];
	int fd = mkstemp(path), st;

	if (fd < 0)
		return -1;
	if (write(fd, w, n * 4) != (ssize_t)(n * 4)) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), HM_SPIRV_VAL " --target-env %s %s 1>&2", env, path);
	st = system(cmd);
	unlink(path);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Number of instructions with this opcode (and first operand words). */
static inline unsigned spv_count(const uint32_t *w, size_t n, uint16_t op,
				 const uint32_t *ops, size_t nops)
{
	unsigned c = 0;

	for (size_t i = 5; i < n;) {
		uint32_t len = w[i] >> 16;

		if (!len)
			break;
		if ((w[i] & 0xffff) == op && len - 1 >= nops &&
		    !memcmp(w + i + 1, ops, nops * 4))
			c++;
		i += len;
	}
	return c;
}
/* spirv-link --target-env vulkan1.2 of two modules; *ret_w malloc()ed.
 * 0, or -1 when it cannot run or fails. */
#ifndef HM_SPIRV_LINK
#define HM_SPIRV_LINK "spirv-link"
#endif
static inline int spv_write_tmp(char *path, const uint32_t *w, size_t n)
{
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	if (write(fd, w, n * 4) != (ssize_t)(n * 4)) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

static inline int spv_link(const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
			   uint32_t **ret_w, size_t *ret_n)
{
	char pa[] = "/tmp/hm-spl-XXXXXX", pb[] = "/tmp/hm-spl-XXXXXX", po[] = "/tmp/hm-spl-XXXXXX";
	char cmd[512];
	int st, fd, r = -1;
	FILE *f;
	long sz;

	*ret_w = NULL;
	*ret_n = 0;
	if (spv_write_tmp(pa, a, na))
		return -1;
	if (spv_write_tmp(pb, b, nb))
		goto out_a;
	fd = mkstemp(po);
	if (fd < 0)
		goto out_b;
	close(fd);
	snprintf(cmd, sizeof(cmd), HM_SPIRV_LINK " --target-env vulkan1.2 -o %s %s %s 1>&2",
		 po, pa, pb);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st))
		goto out_o;
	f = fopen(po, "rb");
	if (!f)
		goto out_o;
	if (!fseek(f, 0, SEEK_END) && (sz = ftell(f)) > 0 && sz % 4 == 0) {
		rewind(f);
		*ret_w = malloc((size_t)sz);
		if (*ret_w && fread(*ret_w, 4, (size_t)sz / 4, f) == (size_t)sz / 4) {
			*ret_n = (size_t)sz / 4;
			r = 0;
		} else {
			free(*ret_w);
			*ret_w = NULL;
		}
	}
	fclose(f);
out_o:
	unlink(po);
out_b:
	unlink(pb);
out_a:
	unlink(pa);
	return r;
}
#endif
