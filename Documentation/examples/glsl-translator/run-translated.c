// SPDX-License-Identifier: GPL-2.0
/*
 * run-translated [MODULE.spv]: run the linked example (translated.comp)
 * over a small guest space on the Vulkan device (lavapipe without a GPU),
 * with validation on, and check every word:
 *
 *   guest space: 4 chunks of 64 KiB at guest address 0x40000000; x fills
 *   chunk 0, y runs from the middle of chunk 2 into chunk 3; chunks 0..2
 *   are mapped by the device table, chunk 3 is not.
 *   y[i] = 3 x[i] + 1 where y[i] is mapped, untouched where not; the
 *   marks name exactly chunk 2's slot, and the sink is marked for the
 *   stores that landed nowhere.
 *
 * The last line: "run-translated: DEVICE, N words, M mismatches,
 * validation on, V messages"; exit 0 only when M and V are 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hmirror/table.h>
#include <hmirror/vkctx.h>

#define SHIFT		16
#define CHUNK		(1u << SHIFT)
#define NR_CHUNKS	4u
#define GUEST_BASE	0x40000000ull
#define COUNT		(CHUNK / 4)			/* x: all of chunk 0 */
#define Y_OFF		(2 * CHUNK + CHUNK / 2)		/* y: chunk 2 into 3 */

struct push {
	uint64_t table;
	uint32_t nr_home, chunk_shift;
	uint64_t marks;
	uint64_t x, y;
	uint32_t count, pad;
};

static int read_spv(const char *path, uint32_t **ret, size_t *ret_nr)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || n % 4 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -EINVAL;
	}
	*ret = malloc(n);
	if (!*ret || fread(*ret, 1, n, f) != (size_t)n) {
		free(*ret);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	*ret_nr = n / 4;
	return 0;
}

static void note_slot(uint32_t slot, void *arg)
{
	uint64_t *written = arg;

	*written |= slot < 64 ? 1ull << slot : 1ull << 63;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "translated-linked.spv";
	struct hm_vk_params params = { .validation = 1 };
	struct hm_vk *vk = NULL;
	struct hm_vk_buffer home = { 0 }, slots = { 0 }, marks = { 0 };
	struct hm_vk_pipeline pipe = { 0 };
	struct hm_table *t = NULL;
	uint32_t *spv = NULL, *g, nr_home, nr_slots;
	size_t nr_spv;
	uint64_t written = 0, want_written = 0;
	unsigned long bad = 0;
	int r;

	r = read_spv(path, &spv, &nr_spv);
	if (r) {
		fprintf(stderr, "run-translated: %s: %s\n", path, strerror(-r));
		return 1;
	}
	r = hm_vk_new(&params, &vk);
	if (r) {
		fprintf(stderr, "run-translated: no Vulkan device: %s\n", strerror(-r));
		return 1;
	}
	/* the guest's home pages (here a host-visible buffer; an emulator
	 * imports its guest RAM), the table's slots and the marks */
	nr_home = hm_table_nr_home_for(NR_CHUNKS);
	nr_slots = hm_table_nr_slots_for(nr_home);
	r = hm_vk_buffer_new(vk, NR_CHUNKS * CHUNK, HM_VK_MEM_HOST, &home);
	if (!r)
		r = hm_vk_buffer_new(vk, hm_table_bytes_for(nr_home), HM_VK_MEM_HOST, &slots);
	if (!r)
		r = hm_vk_buffer_new(vk, hm_marks_bytes_for(nr_slots), HM_VK_MEM_HOST, &marks);
	if (!r)
		r = hm_table_new(slots.map, slots.size, nr_home, SHIFT, &t);
	for (uint32_t c = 0; !r && c < NR_CHUNKS - 1; c++)
		r = hm_table_insert(t, (GUEST_BASE >> SHIFT) + c,
				    (int64_t)(home.addr + (uint64_t)c * CHUNK) -
				    (int64_t)(GUEST_BASE + (uint64_t)c * CHUNK), NULL);
	if (!r)
		r = hm_vk_pipeline_new(vk, spv, nr_spv, "main", sizeof(struct push), &pipe);
	if (r) {
		fprintf(stderr, "run-translated: setting up: %s\n", strerror(-r));
		goto out;
	}
	g = home.map;
	memset(g, 0xee, NR_CHUNKS * CHUNK);
	for (uint32_t i = 0; i < COUNT; i++)
		g[i] = i;
	hm_marks_clear(marks.map, nr_slots);
	hm_marks_take_sink(marks.map);

	struct push pc = {
		.table = slots.addr, .nr_home = nr_home, .chunk_shift = SHIFT,
		.marks = marks.addr, .x = GUEST_BASE, .y = GUEST_BASE + Y_OFF, .count = COUNT,
	};
	r = hm_vk_dispatch_sync(vk, &pipe, &pc, sizeof(pc), (COUNT + 63) / 64, 1, 1);
	if (r) {
		fprintf(stderr, "run-translated: dispatch: %s\n", strerror(-r));
		goto out;
	}

	/* every word of the space: y where mapped, untouched elsewhere */
	for (uint32_t w = 0; w < NR_CHUNKS * CHUNK / 4; w++) {
		uint32_t off = w * 4, want = w < COUNT && off < Y_OFF ? w : 0xeeeeeeeeu;

		if (off >= Y_OFF && (off - Y_OFF) / 4 < COUNT && off < (NR_CHUNKS - 1) * CHUNK)
			want = ((off - Y_OFF) / 4) * 3 + 1;
		if (g[w] != want && bad++ < 5)
			fprintf(stderr, "run-translated: word at guest +0x%x is 0x%x, want 0x%x\n",
				off, g[w], want);
	}
	/* the marks: chunk 2's slot (y's mapped part), and the sink */
	uint32_t slot;

	if (hm_table_find(t, (GUEST_BASE >> SHIFT) + 2, &slot) == 0 && slot < 64)
		want_written = 1ull << slot;
	r = hm_marks_scan(marks.map, nr_slots, note_slot, &written);
	if (r < 0 || written != want_written) {
		fprintf(stderr, "run-translated: marked slots 0x%llx, want 0x%llx\n",
			(unsigned long long)written, (unsigned long long)want_written);
		bad++;
	}
	if (!hm_marks_take_sink(marks.map)) {
		fprintf(stderr, "run-translated: the stores to chunk 3 did not mark the sink\n");
		bad++;
	}
	r = 0;
	printf("run-translated: %s, %u words, %lu mismatches, validation %s, %u messages\n",
	       vk->props.deviceName, NR_CHUNKS * CHUNK / 4, bad,
	       vk->validation ? "on" : "off", hm_vk_validation_count(vk));
	if (hm_vk_validation_count(vk))
		fprintf(stderr, "run-translated: last message: %s\n", vk->last_message);
out:
	hm_vk_pipeline_free(vk, &pipe);
	hm_table_free(t);
	hm_vk_buffer_free(vk, &marks);
	hm_vk_buffer_free(vk, &slots);
	hm_vk_buffer_free(vk, &home);
	unsigned v = vk ? hm_vk_validation_count(vk) : 0;

	hm_vk_free(vk);
	free(spv);
	return r || bad || v ? 1 : 0;
}
