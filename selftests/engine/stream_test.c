// SPDX-License-Identifier: GPL-2.0
/*
 * The emulator's command stream (engine.h: hm_engine_record(),
 * hm_engine_submit(), hm_engine_complete()) on lavapipe with the
 * validation layers on (no message allowed).
 *
 * Two engines over two spaces of the same bytes run the same random
 * dispatches of rw.spvasm's program, every chunk advised to be mirrored:
 * one through hm_engine_dispatch(), the other recorded into a command
 * buffer of the test's own (or submitted on a timeline semaphore of the
 * test's).  The CPU writes both spaces alike between dispatches, and
 * while the recorded one runs writes bytes the device neither reads nor
 * writes (some in words the device stores one byte of).  After every
 * dispatch the two spaces must be equal byte for byte, and equal to a
 * model with every access home.  A submitted dispatch's writes must be
 * home as soon as its timeline value is signalled, before
 * hm_engine_complete().  Then the error paths.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "hmirror/engine.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"

extern const uint32_t hm_test_rw_spv[];
extern const size_t hm_test_rw_spv_words;

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#define CHUNK_SHIFT	16
#define CHUNK		(1u << CHUNK_SHIFT)
#define NR_CHUNKS	8
#define SPACE_BYTES	(NR_CHUNKS * CHUNK)
#define GUEST_BASE	0x100000000ull
#define MAX_LANES	256
#define RW_USER_WORDS	5
#define NR_ROUNDS	16
#define WAIT_NS		(60ull * 1000000000)

enum { OP_NONE = 0, OP_STORE32 = 1, OP_STORE8 = 2 };
enum { R_READ = 1, R_W32 = 2, R_W8 = 3, R_CPU = 4 };

struct plan_entry { uint32_t roff, woff, op, x; };

struct side {
	struct hm_engine *e;
	struct hm_space *s;
	uint8_t *mem;
	uint32_t pipe;
};

FIXTURE(stream) {
	struct hm_vk *vk;
	struct side ref, rec;           /* hm_engine_dispatch(); record / submit */
	uint8_t *model;
	uint8_t *role;                  /* per word, this round */
	uint32_t *cpu_bytes;            /* bytes the CPU writes during the dispatch */
	size_t nr_cpu;
	struct hm_vk_buffer plan;
	uint32_t nr_lanes;
	VkCommandPool pool;             /* the "emulator's" own */
	VkCommandBuffer cb;
	VkFence fence;
	VkSemaphore timeline;
	uint64_t value;
	uint64_t rng;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int side_new(struct hm_vk *vk, struct side *sd, const uint8_t *init)
{
	/* the gather shader copies only the units a refresh wants (a GPU's
	 * default; lavapipe's, vkCmdCopyBuffer, copies whole chunks) */
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = WAIT_NS,
				       .twin_mode = HM_TWIN_GATHER };
	/* watch units of 4 KiB, 16 a chunk: a read-mostly refresh copies only
	 * the units the CPU wrote */
	struct hm_space_params sp = { .size = SPACE_BYTES, .chunk_shift = 12,
				      .flags = HM_SPACE_POPULATE };
	int err;

	err = hm_space_new(&sp, &sd->s);
	if (err)
		return err;
	sd->mem = hm_space_addr(sd->s);
	memcpy(sd->mem, init, SPACE_BYTES);
	err = hm_engine_new(vk, &ep, &sd->e);
	if (!err)
		err = hm_engine_add_space(sd->e, sd->s, GUEST_BASE, NULL);
	/* half dropped on a CPU write and uploaded again, half read-mostly:
	 * refreshed in place, only the units the CPU wrote copied again, the
	 * rest kept from the pool copy (which the copy-back must keep exact) */
	if (!err)
		err = hm_engine_advise(sd->e, GUEST_BASE, SPACE_BYTES / 2, HM_ADVICE_PREFER_DEVICE);
	if (!err)
		err = hm_engine_advise(sd->e, GUEST_BASE + SPACE_BYTES / 2, SPACE_BYTES / 2,
				       HM_ADVICE_READ_MOSTLY);
	if (!err)
		err = hm_engine_pipeline_new(sd->e, hm_test_rw_spv, hm_test_rw_spv_words, "main",
					     RW_USER_WORDS, &sd->pipe);
	return err;
}

static void side_free(struct side *sd)
{
	hm_engine_free(sd->e);
	hm_space_free(sd->s);
	memset(sd, 0, sizeof(*sd));
}

FIXTURE_SETUP(stream)
{
	struct hm_vk_params vp = { .validation = 1 };
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
	};
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	VkSemaphoreTypeCreateInfo ti = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
	int err;

	self->rng = 0x9e3779b97f4a7c15ull;
	err = hm_vk_new(&vp, &self->vk);
	if (err)
		SKIP(return, "no Vulkan device with validation layers (%d)", err);
	self->model = malloc(SPACE_BYTES);
	self->role = malloc(SPACE_BYTES / 4);
	self->cpu_bytes = malloc(SPACE_BYTES * sizeof(*self->cpu_bytes));
	ASSERT_TRUE(self->model && self->role && self->cpu_bytes);
	for (uint32_t i = 0; i < SPACE_BYTES; i++)
		self->model[i] = (uint8_t)(i * 7 + (i >> 9));
	ASSERT_EQ(0, side_new(self->vk, &self->ref, self->model));
	ASSERT_EQ(0, side_new(self->vk, &self->rec, self->model));
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, MAX_LANES * sizeof(struct plan_entry),
				      HM_VK_MEM_HOST, &self->plan));
	pci.queueFamilyIndex = self->vk->queue_family;
	ASSERT_EQ(VK_SUCCESS, vkCreateCommandPool(self->vk->dev, &pci, NULL, &self->pool));
	ai.commandPool = self->pool;
	ASSERT_EQ(VK_SUCCESS, vkAllocateCommandBuffers(self->vk->dev, &ai, &self->cb));
	ASSERT_EQ(VK_SUCCESS, vkCreateFence(self->vk->dev, &fci, NULL, &self->fence));
	ASSERT_EQ(VK_SUCCESS, vkCreateSemaphore(self->vk->dev, &si, NULL, &self->timeline));
}

FIXTURE_TEARDOWN(stream)
{
	if (!self->vk)
		return;
	side_free(&self->ref);
	side_free(&self->rec);
	hm_vk_buffer_free(self->vk, &self->plan);
	if (self->timeline)
		vkDestroySemaphore(self->vk->dev, self->timeline, NULL);
	if (self->fence)
		vkDestroyFence(self->vk->dev, self->fence, NULL);
	if (self->pool)
		vkDestroyCommandPool(self->vk->dev, self->pool, NULL);
	if (hm_vk_validation_count(self->vk))
		TH_LOG("validation: %s", self->vk->last_message);
	EXPECT_EQ(0, hm_vk_validation_count(self->vk));
	hm_vk_free(self->vk);
	free(self->model);
	free(self->role);
	free(self->cpu_bytes);
}

static uint32_t pick_word(FIXTURE_DATA(stream) *self, uint8_t ok, uint8_t as)
{
	for (;;) {
		uint32_t w = rnd(&self->rng) % (SPACE_BYTES / 4);

		if (self->role[w] == 0 || (ok && self->role[w] == ok)) {
			self->role[w] = as;
			return w;
		}
	}
}

/*
 * This round's plan: n lanes, each reads a word no lane writes and stores
 * a word (or one byte of it) no other lane touches; the CPU's bytes during
 * the dispatch are the other bytes of byte-stored words and words of
 * their own.  The model is advanced by the device's part.
 */
static void make_plan(FIXTURE_DATA(stream) *self, uint32_t n)
{
	struct plan_entry *pl = self->plan.map;

	memset(self->role, 0, SPACE_BYTES / 4);
	self->nr_cpu = 0;
	self->nr_lanes = n;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = pick_word(self, R_READ, R_READ), w, op;

		op = rnd(&self->rng) % 8 == 0 ? OP_NONE :
		     (rnd(&self->rng) & 1 ? OP_STORE32 : OP_STORE8);
		pl[i] = (struct plan_entry){ .roff = 4 * r, .op = op, .x = (uint32_t)rnd(&self->rng) };
		if (op == OP_STORE32) {
			w = pick_word(self, 0, R_W32);
			pl[i].woff = 4 * w;
		} else if (op == OP_STORE8) {
			uint32_t k = rnd(&self->rng) % 4;

			w = pick_word(self, 0, R_W8);
			pl[i].woff = 4 * w + k;
			for (uint32_t j = 0; j < 4; j++)
				if (j != k)
					self->cpu_bytes[self->nr_cpu++] = 4 * w + j;
		}
	}
	for (uint32_t i = 0; i < 32; i++) {
		uint32_t w = pick_word(self, 0, R_CPU);

		for (uint32_t j = 0; j < 4; j++)
			self->cpu_bytes[self->nr_cpu++] = 4 * w + j;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t val;

		memcpy(&val, self->model + pl[i].roff, 4);
		val ^= pl[i].x;
		if (pl[i].op == OP_STORE32)
			memcpy(self->model + pl[i].woff, &val, 4);
		else if (pl[i].op == OP_STORE8)
			self->model[pl[i].woff] = (uint8_t)val;
	}
}

static struct hm_engine_dispatch make_dispatch(FIXTURE_DATA(stream) *self, const struct side *sd,
					       uint32_t *push)
{
	push[0] = (uint32_t)GUEST_BASE;
	push[1] = (uint32_t)(GUEST_BASE >> 32);
	push[2] = (uint32_t)self->plan.addr;
	push[3] = (uint32_t)(self->plan.addr >> 32);
	push[4] = self->nr_lanes;
	return (struct hm_engine_dispatch){ .pipeline = sd->pipe,
					    .groups = { (self->nr_lanes + 63) / 64, 1, 1 },
					    .push = push, .nr_push = RW_USER_WORDS };
}

/* The CPU between dispatches: the same bytes into both spaces and the model. */
static void cpu_between(FIXTURE_DATA(stream) *self)
{
	for (int i = 0; i < 24; i++) {
		uint32_t off = rnd(&self->rng) % SPACE_BYTES;
		uint8_t val = (uint8_t)rnd(&self->rng);

		self->ref.mem[off] = self->rec.mem[off] = self->model[off] = val;
	}
}

/* The CPU during a dispatch: bytes the device does not touch. */
static void cpu_during(FIXTURE_DATA(stream) *self, uint8_t *mem, uint64_t seed)
{
	for (size_t i = 0; i < self->nr_cpu; i += 3) {
		uint32_t off = self->cpu_bytes[i];

		mem[off] = self->model[off] = (uint8_t)(seed + i);
	}
}

static long first_diff(const uint8_t *a, const uint8_t *b)
{
	for (uint32_t i = 0; i < SPACE_BYTES; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

/* The reference: hm_engine_dispatch(), the CPU's bytes after it returns. */
static int run_ref(FIXTURE_DATA(stream) *self, uint64_t seed)
{
	uint32_t push[RW_USER_WORDS];
	struct hm_engine_dispatch d = make_dispatch(self, &self->ref, push);
	int err;

	err = hm_engine_dispatch(self->ref.e, d.pipeline, d.groups[0], 1, 1, d.push, d.nr_push, 0);
	cpu_during(self, self->ref.mem, seed);
	return err;
}

/* Recorded into the test's own command buffer, submitted by the test
 * under the queue lock; the CPU writes while it runs. */
static int run_recorded(FIXTURE_DATA(stream) *self, uint64_t seed)
{
	VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
					.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
	VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
			    .pCommandBuffers = &self->cb };
	uint32_t push[RW_USER_WORDS];
	struct hm_engine_dispatch d = make_dispatch(self, &self->rec, push);
	struct hm_engine_work *w;
	VkResult r;
	int err;

	if (vkResetCommandBuffer(self->cb, 0) || vkBeginCommandBuffer(self->cb, &bi))
		return -EIO;
	err = hm_engine_record(self->rec.e, self->cb, &d, &w);
	if (err)
		return err;
	if (vkEndCommandBuffer(self->cb))
		return -EIO;
	hm_vk_queue_lock(self->vk);
	r = vkQueueSubmit(self->vk->queue, 1, &si, self->fence);
	hm_vk_queue_unlock(self->vk);
	if (r)
		return -EIO;
	cpu_during(self, self->rec.mem, seed);
	if (vkWaitForFences(self->vk->dev, 1, &self->fence, VK_TRUE, WAIT_NS) ||
	    vkResetFences(self->vk->dev, 1, &self->fence))
		return -EIO;
	return hm_engine_complete(w, 0);
}

TEST_F(stream, record_matches_dispatch)
{
	struct hm_engine_stats st;

	for (int k = 0; k < NR_ROUNDS; k++) {
		long at;

		cpu_between(self);
		make_plan(self, 1 + rnd(&self->rng) % MAX_LANES);
		ASSERT_EQ(0, run_ref(self, k));
		ASSERT_EQ(0, run_recorded(self, k));
		at = first_diff(self->ref.mem, self->rec.mem);
		if (at >= 0)
			TH_LOG("round %d: byte %ld: dispatch %u, recorded %u, model %u", k, at,
			       self->ref.mem[at], self->rec.mem[at], self->model[at]);
		ASSERT_EQ(-1, at);
		ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
	}
	ASSERT_EQ(0, hm_engine_stats(self->rec.e, &st));
	/* the mirrors served the dispatches and their writes came home */
	EXPECT_EQ(NR_ROUNDS, st.dispatches_recorded);
	EXPECT_EQ(NR_ROUNDS, st.dispatches);
	EXPECT_GT(st.chunks_mirrored, 0);
	EXPECT_GT(st.bytes_copied_home, 0);
	EXPECT_GT(st.mirrors_refreshed, 0);
}

/*
 * A read-mostly mirror the device wrote in a recorded dispatch, then the
 * CPU wrote another watch unit of: it is refreshed in place (only that
 * unit copied again) and named again in the window from its pool copy.
 * The recorded copy-back must have put the device's bytes into the pool
 * copy too (hm_window_after_dispatch() does it for hm_engine_dispatch()),
 * or the next dispatch reads what the chunk held before.
 */
TEST_F(stream, refresh_after_a_recorded_write)
{
	struct plan_entry *pl = self->plan.map;
	const uint32_t c = 5 * CHUNK, w = c + 16, z = 2 * CHUNK + 64, r = 3 * CHUNK;
	struct hm_engine_stats st0, st1;
	uint32_t v;

	self->nr_lanes = 1;
	/* chunk 5 mirrored, then refreshed once (every unit's generation known) */
	pl[0] = (struct plan_entry){ .roff = r, .woff = z + 4, .op = OP_STORE32, .x = 1 };
	for (int k = 0; k < 2; k++) {
		self->rec.mem[c + 9 * 4096 + k] = self->model[c + 9 * 4096 + k] = 0x66;
		ASSERT_EQ(0, run_recorded(self, 0));
	}
	memcpy(&v, self->model + r, 4);
	v ^= 1;
	memcpy(self->model + z + 4, &v, 4);
	/* W (chunk 5, read-mostly) = R ^ x, through the mirror */
	pl[0] = (struct plan_entry){ .roff = r, .woff = w, .op = OP_STORE32, .x = 0x5a5a1234 };
	ASSERT_EQ(0, run_recorded(self, 0));
	memcpy(&v, self->model + r, 4);
	v ^= 0x5a5a1234;
	memcpy(self->model + w, &v, 4);
	ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
	ASSERT_EQ(0, hm_engine_stats(self->rec.e, &st0));
	/* the CPU writes another 4 KiB unit of chunk 5 */
	self->rec.mem[c + 5 * 4096] = self->model[c + 5 * 4096] = 0x77;
	/* Z = W: the device must read W as it wrote it */
	pl[0] = (struct plan_entry){ .roff = w, .woff = z, .op = OP_STORE32, .x = 0 };
	self->nr_cpu = 0;
	ASSERT_EQ(0, run_recorded(self, 0));
	memcpy(self->model + z, &v, 4);
	ASSERT_EQ(0, hm_engine_stats(self->rec.e, &st1));
	ASSERT_LT(st0.mirrors_refreshed, st1.mirrors_refreshed);       /* the path taken */
	memcpy(&v, self->rec.mem + z, 4);
	TH_LOG("Z = %#x, W = %#x, refresh copied %llu bytes", v, *(uint32_t *)(self->model + w),
	       (unsigned long long)(st1.upload_bytes - st0.upload_bytes));
	ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
}

/* Submitted on the test's timeline: home once the value is signalled. */
TEST_F(stream, submit_writes_home_before_the_value)
{
	for (int k = 0; k < NR_ROUNDS; k++) {
		uint32_t push[RW_USER_WORDS];
		struct hm_engine_dispatch d;
		struct hm_engine_work *w;
		VkSemaphore sem;
		uint64_t value;
		VkSemaphoreWaitInfo wi = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
					   .semaphoreCount = 1, .pSemaphores = &sem,
					   .pValues = &value };

		cpu_between(self);
		make_plan(self, 1 + rnd(&self->rng) % MAX_LANES);
		d = make_dispatch(self, &self->rec, push);
		if (k & 1) {                    /* the caller's timeline, else the engine's */
			d.signal_sem = self->timeline;
			d.signal_value = ++self->value;
		}
		ASSERT_EQ(0, hm_engine_submit(self->rec.e, &d, &w));
		ASSERT_EQ(0, hm_engine_work_timeline(w, &sem, &value));
		if (k & 1) {
			ASSERT_EQ(self->timeline, sem);
			ASSERT_EQ(self->value, value);
		}
		cpu_during(self, self->rec.mem, k);
		ASSERT_EQ(VK_SUCCESS, vkWaitSemaphores(self->vk->dev, &wi, WAIT_NS));
		/* before hm_engine_complete(): every device write is home */
		ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
		ASSERT_EQ(0, hm_engine_complete(w, WAIT_NS));
	}
}

/* A submission waits for the caller's value; complete says -EAGAIN until. */
TEST_F(stream, submit_waits_for_the_callers_value)
{
	uint32_t push[RW_USER_WORDS];
	struct hm_engine_dispatch d;
	struct hm_engine_work *w;
	VkSemaphoreSignalInfo sig = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
				      .semaphore = self->timeline };

	make_plan(self, 64);
	d = make_dispatch(self, &self->rec, push);
	d.wait_sem = self->timeline;
	d.wait_value = 1;
	ASSERT_EQ(0, hm_engine_submit(self->rec.e, &d, &w));
	usleep(20000);
	ASSERT_EQ(-EAGAIN, hm_engine_complete(w, 0));
	ASSERT_NE(-1, first_diff(self->model, self->rec.mem));  /* not run */
	sig.value = 1;
	ASSERT_EQ(VK_SUCCESS, vkSignalSemaphore(self->vk->dev, &sig));
	ASSERT_EQ(0, hm_engine_complete(w, WAIT_NS));
	ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
}

/*
 * The queue shared: a thread of the "emulator" submits its own work to
 * the engine's queue, under hm_vk_queue_lock(), while the engine runs
 * dispatches and submissions of its own on another thread.  The
 * validation layers' thread-safety checks must say nothing, and every
 * dispatch stays exact.
 */
struct own_submitter {
	FIXTURE_DATA(stream) *self;
	atomic_bool stop;
	unsigned submits;
	int err;
};

static void *own_submits(void *arg)
{
	struct own_submitter *o = arg;
	struct hm_vk *vk = o->self->vk;
	VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
	VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
			    .pCommandBuffers = &o->self->cb };

	if (vkBeginCommandBuffer(o->self->cb, &bi) || vkEndCommandBuffer(o->self->cb)) {
		o->err = -EIO;
		return NULL;
	}
	while (!atomic_load(&o->stop) && !o->err) {
		hm_vk_queue_lock(vk);
		if (vkQueueSubmit(vk->queue, 1, &si, o->self->fence))
			o->err = -EIO;
		hm_vk_queue_unlock(vk);
		if (!o->err && (vkWaitForFences(vk->dev, 1, &o->self->fence, VK_TRUE, WAIT_NS) ||
				vkResetFences(vk->dev, 1, &o->self->fence)))
			o->err = -EIO;
		o->submits++;
	}
	return NULL;
}

TEST_F(stream, queue_shared_under_the_lock)
{
	struct own_submitter o = { .self = self };
	long at = -1;
	int err = 0, k;
	pthread_t thr;

	ASSERT_EQ(0, pthread_create(&thr, NULL, own_submits, &o));
	for (k = 0; k < NR_ROUNDS && !err && at < 0; k++) {
		uint32_t push[RW_USER_WORDS];
		struct hm_engine_dispatch d;
		struct hm_engine_work *w;

		cpu_between(self);
		make_plan(self, 1 + rnd(&self->rng) % MAX_LANES);
		d = make_dispatch(self, &self->rec, push);
		if (k & 1) {
			err = hm_engine_submit(self->rec.e, &d, &w);
			if (!err)
				err = hm_engine_complete(w, WAIT_NS);
		} else {
			err = hm_engine_dispatch(self->rec.e, d.pipeline, d.groups[0], 1, 1, d.push,
						 d.nr_push, 0);
		}
		cpu_during(self, self->rec.mem, k);
		at = first_diff(self->model, self->rec.mem);
	}
	/* the thread is gone before anything it uses is */
	atomic_store(&o.stop, true);
	pthread_join(thr, NULL);
	ASSERT_EQ(0, err) TH_LOG("round %d", k - 1);
	ASSERT_EQ(-1, at) TH_LOG("round %d", k - 1);
	ASSERT_EQ(0, o.err);
	TH_LOG("%u submissions of the test's beside the engine's", o.submits);
	EXPECT_GT(o.submits, 0);
}

TEST_F(stream, bad_arguments)
{
	VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
	uint32_t push[RW_USER_WORDS];
	struct hm_engine_dispatch d, bad;
	struct hm_engine_work *w = (void *)1, *w2;
	struct hm_engine *e = self->rec.e;
	struct hm_engine_stats st0, st1;
	VkSemaphore sem;
	uint64_t value;
	uint32_t value32;

	make_plan(self, 64);
	d = make_dispatch(self, &self->rec, push);
	ASSERT_EQ(0, hm_engine_stats(e, &st0));
	ASSERT_EQ(-EINVAL, hm_engine_record(NULL, self->cb, &d, &w));
	ASSERT_EQ(-EINVAL, hm_engine_record(e, VK_NULL_HANDLE, &d, &w));
	ASSERT_EQ(NULL, w);
	ASSERT_EQ(-EINVAL, hm_engine_record(e, self->cb, NULL, &w));
	ASSERT_EQ(-EINVAL, hm_engine_record(e, self->cb, &d, NULL));
	bad = d;
	bad.nr_push = RW_USER_WORDS - 1;
	ASSERT_EQ(-EINVAL, hm_engine_record(e, self->cb, &bad, &w));
	bad = d;
	bad.pipeline = HM_ENGINE_MAX_PIPELINES;
	ASSERT_EQ(-EINVAL, hm_engine_submit(e, &bad, &w));
	bad.pipeline = d.pipeline + 1;                  /* no such pipeline */
	ASSERT_EQ(-EINVAL, hm_engine_submit(e, &bad, &w));
	bad = d;
	bad.flags = 1u << 31;
	ASSERT_EQ(-EINVAL, hm_engine_submit(e, &bad, &w));
	bad = d;
	bad.groups[0] = UINT32_MAX;
	ASSERT_EQ(-EINVAL, hm_engine_submit(e, &bad, &w));
	bad = d;
	bad.signal_sem = self->timeline;                /* recording signals nothing */
	ASSERT_EQ(-EINVAL, hm_engine_record(e, self->cb, &bad, &w));
	ASSERT_EQ(-EINVAL, hm_engine_complete(NULL, 0));
	ASSERT_EQ(-EINVAL, hm_engine_cancel(NULL));
	/* the push limit is one number, and its refusal says it is that one */
	ASSERT_EQ(20, HM_ENGINE_MAX_USER_PUSH_WORDS);
	ASSERT_EQ(-E2BIG, hm_engine_pipeline_new(e, hm_test_rw_spv, hm_test_rw_spv_words, "main",
						 HM_ENGINE_MAX_USER_PUSH_WORDS + 1, &value32));
	/* none of that did anything */
	ASSERT_EQ(0, hm_engine_stats(e, &st1));
	ASSERT_EQ(st0.dispatches, st1.dispatches);
	ASSERT_EQ(st0.uploads, st1.uploads);

	/* one work in flight: the rest waits for it */
	ASSERT_EQ(0, vkBeginCommandBuffer(self->cb, &bi));
	ASSERT_EQ(0, hm_engine_record(e, self->cb, &d, &w));
	ASSERT_EQ(-EINVAL, hm_engine_work_timeline(w, &sem, &value)); /* the caller's submission */
	ASSERT_EQ(-EBUSY, hm_engine_record(e, self->cb, &d, &w2));
	ASSERT_EQ(-EBUSY, hm_engine_submit(e, &d, &w2));
	ASSERT_EQ(-EBUSY, hm_engine_dispatch(e, d.pipeline, 1, 1, 1, push, RW_USER_WORDS, 0));
	ASSERT_EQ(-EBUSY, hm_engine_harvest_now(e));
	ASSERT_EQ(-EBUSY, hm_engine_prefetch(e));
	ASSERT_EQ(-EBUSY, hm_engine_advise(e, GUEST_BASE, CHUNK, HM_ADVICE_NEVER_MIRROR));
	ASSERT_EQ(-EBUSY, hm_engine_remove_space(e, 0));
	/* never submitted: not complete, and it can be dropped */
	ASSERT_EQ(-EAGAIN, hm_engine_complete(w, 0));
	ASSERT_EQ(0, hm_engine_cancel(w));
	ASSERT_EQ(-EINVAL, hm_engine_complete(w, 0));
	ASSERT_EQ(-EINVAL, hm_engine_cancel(w));
	ASSERT_EQ(0, vkResetCommandBuffer(self->cb, 0));
	/* nothing of it ran: home is as before the plan */
	ASSERT_NE(-1, first_diff(self->model, self->rec.mem));

	/* a submitted work cannot be cancelled; the engine works after all that */
	ASSERT_EQ(0, hm_engine_submit(e, &d, &w));
	ASSERT_EQ(-EINVAL, hm_engine_cancel(w));
	ASSERT_EQ(0, hm_engine_complete(w, WAIT_NS));
	ASSERT_EQ(-1, first_diff(self->model, self->rec.mem));
	ASSERT_EQ(-EINVAL, hm_engine_complete(w, 0));  /* retired */
}

TEST_HARNESS_MAIN
