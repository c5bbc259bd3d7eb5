// SPDX-License-Identifier: GPL-2.0
/*
 * elfcut: write every 64-bit little-endian ELF image found inside a file
 * (a Vulkan pipeline cache) to PREFIX.N.elf, each cut at the end of its
 * section or program header table, whichever lies further.  Used by
 * tools/gpu/sass.sh to hand NVIDIA's compiled shaders to nvdisasm.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	FILE *f;
	unsigned char *d;
	long n;
	int found = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: elfcut FILE PREFIX\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(argv[1]);
		return 1;
	}
	d = malloc(n ? n : 1);
	if (!d || fread(d, 1, n, f) != (size_t)n) {
		perror(argv[1]);
		return 1;
	}
	fclose(f);
	for (long i = 0; i + (long)sizeof(Elf64_Ehdr) <= n; i++) {
		Elf64_Ehdr h;
		unsigned long end;
		char name[4096];
		FILE *o;

		if (memcmp(d + i, ELFMAG, SELFMAG) || d[i + EI_CLASS] != ELFCLASS64)
			continue;
		memcpy(&h, d + i, sizeof(h));
		end = h.e_shoff + (unsigned long)h.e_shnum * h.e_shentsize;
		if (h.e_phoff + (unsigned long)h.e_phnum * h.e_phentsize > end)
			end = h.e_phoff + (unsigned long)h.e_phnum * h.e_phentsize;
		if (end < sizeof(h) || end > (unsigned long)(n - i))
			continue;
		snprintf(name, sizeof(name), "%s.%d.elf", argv[2], found++);
		o = fopen(name, "wb");
		if (!o || fwrite(d + i, 1, end, o) != end || fclose(o)) {
			perror(name);
			return 1;
		}
		printf("%s: %lu bytes at offset %ld, machine %u\n", name, end, i, h.e_machine);
		i += end - 1;
	}
	if (!found)
		printf("%s: no ELF image in %ld bytes\n", argv[1], n);
	free(d);
	return 0;
}
