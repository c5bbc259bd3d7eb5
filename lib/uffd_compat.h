/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Definitions of the userfaultfd async write-protect and PAGEMAP_SCAN ABI
 * (Linux 6.7+) that older distribution headers (Debian 12's linux-libc-dev
 * 6.1) lack.  Values are the kernel ABI; each is defined only where the
 * system header did not.  The two structs are declared under private names
 * (same layout) so that they never collide with <linux/fs.h>.
 */
#ifndef HMIRROR_UFFD_COMPAT_H
#define HMIRROR_UFFD_COMPAT_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFDIO_WRITEPROTECT_MODE_WP
#define UFFDIO_WRITEPROTECT_MODE_WP ((uint64_t)1 << 0)
#endif
#ifndef UFFDIO_WRITEPROTECT_MODE_DONTWAKE
#define UFFDIO_WRITEPROTECT_MODE_DONTWAKE ((uint64_t)1 << 1)
#endif
#ifndef UFFDIO_REGISTER_MODE_WP
#define UFFDIO_REGISTER_MODE_WP ((uint64_t)1 << 1)
#endif

#ifndef PROCFS_IOCTL_MAGIC
#define PROCFS_IOCTL_MAGIC 'f'
#endif

#ifndef PAGE_IS_WPALLOWED
#define PAGE_IS_WPALLOWED	(1 << 0)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGE_IS_FILE		(1 << 2)
#define PAGE_IS_PRESENT		(1 << 3)
#define PAGE_IS_SWAPPED		(1 << 4)
#define PAGE_IS_PFNZERO		(1 << 5)
#define PAGE_IS_HUGE		(1 << 6)
#define PAGE_IS_SOFT_DIRTY	(1 << 7)
#endif

#ifndef PM_SCAN_WP_MATCHING
#define PM_SCAN_WP_MATCHING	(1 << 0)
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)
#endif

/* struct page_region */
struct hm_page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

/* struct pm_scan_arg */
struct hm_pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end;
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};

/* PAGEMAP_SCAN, spelled over the private struct (same number) */
#define HM_PAGEMAP_SCAN _IOWR(PROCFS_IOCTL_MAGIC, 16, struct hm_pm_scan_arg)

#endif /* HMIRROR_UFFD_COMPAT_H */
