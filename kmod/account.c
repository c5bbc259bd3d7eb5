// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror accounting: what each user may hold.  Documentation/admin-guide.rst,
 * "Limits", gives the memory model and the reasons for it.
 *
 * Memory the module allocates for a user and that no reclaim can take back
 * (space pages, per-chunk metadata, the page arrays of pins and dma-bufs)
 * is charged to that user's hmirror_user, against max_user_bytes, and to
 * the memory cgroup of the allocating task (__GFP_ACCOUNT).  Pages of
 * ordinary process memory that a pin holds are charged to the user's
 * user_struct->locked_vm against RLIMIT_MEMLOCK, as io_uring does, so
 * neither forking nor passing a pin fd on gives a second budget.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/refcount.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/user_namespace.h>

#include "hmirror.h"

static unsigned long hmirror_max_user_bytes;
module_param_named(max_user_bytes, hmirror_max_user_bytes, ulong, 0644);
MODULE_PARM_DESC(max_user_bytes,
		 "Memory charged to one user: space pages, metadata, page arrays, bytes (default 0: half of RAM at load)");

/* protects hmirror_users and every entry's node */
static DEFINE_SPINLOCK(hmirror_users_lock);
static LIST_HEAD(hmirror_users);

/* the calling task's (real uid's) entry, with a reference; NULL on -ENOMEM */
struct hmirror_user *hmirror_user_get(void)
{
	kuid_t uid = current_uid();
	struct hmirror_user *u, *new;

	new = kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
	spin_lock(&hmirror_users_lock);
	list_for_each_entry(u, &hmirror_users, node) {
		/* a dying entry (no reference left) holds nothing: pass it */
		if (uid_eq(u->uid, uid) && refcount_inc_not_zero(&u->ref)) {
			spin_unlock(&hmirror_users_lock);
			kfree(new);
			return u;
		}
	}
	if (new) {
		new->uid = uid;
		refcount_set(&new->ref, 1);
		atomic_long_set(&new->bytes, 0);
		list_add(&new->node, &hmirror_users);
	}
	spin_unlock(&hmirror_users_lock);
	return new;
}

void hmirror_user_hold(struct hmirror_user *u)
{
	refcount_inc(&u->ref);
}

void hmirror_user_put(struct hmirror_user *u)
{
	if (!u || !refcount_dec_and_test(&u->ref))
		return;
	spin_lock(&hmirror_users_lock);
	list_del(&u->node);
	spin_unlock(&hmirror_users_lock);
	WARN_ON_ONCE(atomic_long_read(&u->bytes));
	kfree(u);
}

/* charge @bytes to @u; -ENOMEM past max_user_bytes */
int hmirror_user_charge(struct hmirror_user *u, unsigned long bytes)
{
	unsigned long limit = READ_ONCE(hmirror_max_user_bytes);
	long cur = atomic_long_read(&u->bytes);
	unsigned long next;

	do {
		if (check_add_overflow((unsigned long)cur, bytes, &next) ||
		    next > limit)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&u->bytes, &cur, next));
	return 0;
}

void hmirror_user_uncharge(struct hmirror_user *u, unsigned long bytes)
{
	atomic_long_sub(bytes, &u->bytes);
}

/* one more of a per-user count (spaces, pins) below @max; -EMFILE past it */
int hmirror_user_count_inc(atomic_t *count, unsigned int max)
{
	int cur = atomic_read(count);

	do {
		if ((unsigned int)cur >= max)
			return -EMFILE;
	} while (!atomic_try_cmpxchg(count, &cur, cur + 1));
	return 0;
}

/*
 * Charge @nr_pages pinned pages to the caller's user against
 * RLIMIT_MEMLOCK (CAP_IPC_LOCK exempts, as for mlock).  Returns the
 * credentials whose user_struct was charged (with a reference), NULL where
 * none was, or an ERR_PTR(-ENOMEM) past the limit.  The reference is held
 * on the cred, not the user_struct: free_uid() is not exported by every
 * kernel the module builds for, __put_cred() is.
 */
const struct cred *hmirror_memlock_charge(unsigned long nr_pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	const struct cred *cred;
	struct user_struct *user;
	unsigned long cur, next;

	if (capable(CAP_IPC_LOCK))
		return NULL;
	cred = get_current_cred();
	user = cred->user;
	cur = atomic_long_read(&user->locked_vm);
	do {
		if (check_add_overflow(cur, nr_pages, &next) || next > limit) {
			put_cred(cred);
			return ERR_PTR(-ENOMEM);
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	return cred;
}

/* undo hmirror_memlock_charge(); @cred may be NULL */
void hmirror_memlock_uncharge(const struct cred *cred, unsigned long nr_pages)
{
	if (!cred)
		return;
	atomic_long_sub(nr_pages, &cred->user->locked_vm);
	put_cred(cred);
}

/* <debugfs>/hmirror/users (debugfs.c) */
int hmirror_users_show(struct seq_file *m, void *unused)
{
	struct hmirror_user *u;

	seq_printf(m, "max_user_bytes %lu\n", READ_ONCE(hmirror_max_user_bytes));
	spin_lock(&hmirror_users_lock);
	list_for_each_entry(u, &hmirror_users, node)
		seq_printf(m, "uid %u bytes %ld spaces %d pins %d\n",
			   from_kuid_munged(&init_user_ns, u->uid),
			   atomic_long_read(&u->bytes),
			   atomic_read(&u->nr_spaces), atomic_read(&u->nr_pins));
	spin_unlock(&hmirror_users_lock);
	return 0;
}

void hmirror_account_init(void)
{
	/* like tmpfs's default size: half of RAM */
	if (!hmirror_max_user_bytes)
		hmirror_max_user_bytes = (totalram_pages() / 2) << PAGE_SHIFT;
}
