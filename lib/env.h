/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Measurement knobs: environment variables read once a process.  Not an
 * interface (Documentation/engine.rst lists them, with what each
 * measured).  Internal, not installed.
 */
#ifndef HMIRROR_ENV_H
#define HMIRROR_ENV_H
#include <stdlib.h>

/*
 * The environment variable name read once a process (*cache, -1 until
 * then): a decimal 0..max; def when it is unset or anything else.
 */
static inline unsigned hm_env_knob(const char *name, unsigned def, unsigned max, int *cache)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *s = getenv(name);
		char *end;
		unsigned long n;

		v = (int)def;
		if (s && *s) {
			n = strtoul(s, &end, 10);
			if (!*end && n <= max)
				v = (int)n;
		}
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return (unsigned)v;
}

#endif /* HMIRROR_ENV_H */
