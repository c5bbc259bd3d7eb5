// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-link [-o OUT] [--variant NAME] [--no-validate] IN.spv
 *
 * Link a translated compute module against hmirror's lookup helper
 * (hm_spirv_link_lookup(): its Import of hm_lookup, or the GLSL stand-in
 * of hmirror/lookup.glsl), then validate the result with SPIRV-Tools for
 * the Vulkan version its SPIR-V version goes with.  IN or OUT "-":
 * standard input or output.  Exit 0 linked and valid, 1 an error, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spirv-tools/libspirv.h>

#include "hmirror/lookup.h"

static int read_all(const char *path, uint32_t **ret, size_t *ret_nr)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t n = 0, cap = 1 << 16, got;
	unsigned char *buf;

	if (!f)
		return -errno;
	buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			unsigned char *nb = n >= (size_t)HM_SPV_MAX_WORDS * 4 ? NULL :
					    realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (f != stdin)
		fclose(f);
	if (!buf)
		return -E2BIG;
	if (n % 4) {
		free(buf);
		return -EBADMSG;
	}
	*ret = (uint32_t *)buf;
	*ret_nr = n / 4;
	return 0;
}

static const char *link_error(int r)
{
	switch (r) {
	case -EBADMSG: return "not a well-formed SPIR-V module";
	case -ENOTSUP: return "SPIR-V version (1.3 to 1.6) or addressing model the helper cannot join";
	case -ENOENT: return "the module neither imports hm_lookup nor holds hm_lookup_stub "
			     "or a load stand-in hm_loadN_stub (hmirror/lookup.glsl; were its "
			     "names stripped?)";
	case -EINVAL: return "hm_lookup's import or a stand-in does not have its signature: "
			     "hm_lookup (u64 guest, u64 table, u32 nr_home, u32 chunk_shift, "
			     "u64 marks) -> struct { u32 dev_lo, dev_hi, mark_lo, mark_hi }; "
			     "hm_loadN the same and u64 wdelta, wfirst, wlast -> u32, uvecN or "
			     "a struct of N u32";
	default: return strerror(-r);
	}
}

static spv_target_env env_of(uint32_t version)
{
	if (version >= 0x00010600)
		return SPV_ENV_VULKAN_1_3;
	if (version >= 0x00010500)
		return SPV_ENV_VULKAN_1_2;
	if (version >= 0x00010400)
		return SPV_ENV_VULKAN_1_1_SPIRV_1_4;
	return SPV_ENV_VULKAN_1_1;
}

static int validate(const uint32_t *w, size_t n)
{
	spv_context ctx = spvContextCreate(env_of(w[1]));
	spv_diagnostic diag = NULL;
	spv_result_t r;

	if (!ctx)
		return -ENOMEM;
	r = spvValidateBinary(ctx, w, n, &diag);
	if (r != SPV_SUCCESS)
		fprintf(stderr, "hmirror-link: the linked module is not valid: %s\n",
			diag && diag->error ? diag->error : "(no message)");
	spvDiagnosticDestroy(diag);
	spvContextDestroy(ctx);
	return r == SPV_SUCCESS ? 0 : -EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirror-link [-o OUT] [--variant NAME] [--no-validate] IN.spv\n"
		   "  -o OUT          write the linked module here (default: standard output)\n"
		   "  --variant NAME  the helper's emitted form (default: %s)\n"
		   "  --no-validate   skip SPIRV-Tools validation of the result\n",
		hm_lookup_variants[0].name);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "variant", required_argument, NULL, 'V' },
		{ "no-validate", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = "-";
	uint32_t variant = HM_LOOKUP_DEFAULT_VARIANT, *in = NULL, *res = NULL;
	size_t nr_in = 0, nr_res = 0;
	bool check = true;
	FILE *f;
	int c, r;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'V': {
			const struct hm_lookup_variant *v = hm_lookup_variant_by_name(optarg);

			if (!v) {
				fprintf(stderr, "hmirror-link: no variant %s for real modules\n", optarg);
				return 2;
			}
			variant = v->flags;
			break;
		}
		case 'n':
			check = false;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	r = read_all(argv[optind], &in, &nr_in);
	if (r) {
		fprintf(stderr, "hmirror-link: %s: %s\n", argv[optind],
			r == -EBADMSG ? "not a whole number of 32-bit words" : strerror(-r));
		return 1;
	}
	r = hm_spirv_link_lookup(in, nr_in, variant, &res, &nr_res);
	free(in);
	if (r) {
		fprintf(stderr, "hmirror-link: %s: %s\n", argv[optind], link_error(r));
		return 1;
	}
	if (check && validate(res, nr_res)) {
		free(res);
		return 1;
	}
	f = strcmp(out, "-") ? fopen(out, "wb") : stdout;
	if (!f || fwrite(res, 4, nr_res, f) != nr_res || (f != stdout && fclose(f))) {
		fprintf(stderr, "hmirror-link: %s: %s\n", out, strerror(errno));
		free(res);
		return 1;
	}
	free(res);
	return 0;
}
