/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror mirror advice: what a client tells the engine about a guest
 * range, in-process (hm_engine_advise(), engine.h) and over the daemon
 * protocol (HM_MSG_ADVISE, client.h).  The values are the wire values;
 * this header needs nothing else, so a daemon-only client does not pull
 * in vulkan.h for them.
 */
#ifndef HMIRROR_ADVICE_H
#define HMIRROR_ADVICE_H

enum hm_advice {
	HM_ADVICE_DEFAULT = 0,          /* mirror when measured hot */
	HM_ADVICE_READ_MOSTLY,          /* read duplicate: mirror, drop on CPU write, re-upload */
	HM_ADVICE_PREFER_DEVICE,        /* mirror, evicted last */
	HM_ADVICE_NEVER_MIRROR,         /* always home */
};

#endif /* HMIRROR_ADVICE_H */
