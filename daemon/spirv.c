// SPDX-License-Identifier: GPL-2.0
/*
 * A client's SPIR-V as definitions and instructions (spirv.h), parsed
 * once by SPIRV-Tools for the daemon's checks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* libspirv.h defines (not declares) this constant in C; validate.c has it */
#define kDefaultMaxIdBound hmd_spirv_default_max_id_bound
#include <spirv-tools/libspirv.h>

#include "spirv.h"

/* the grammar SPIRV-Tools parses with: made once, read by any thread */
static spv_context spv_ctx;
static pthread_once_t spv_once = PTHREAD_ONCE_INIT;

static void spv_init(void)
{
	spv_ctx = spvContextCreate(SPV_ENV_UNIVERSAL_1_6);
}

void hmd_spv_free(struct hmd_spv *m)
{
	free(m->ins);
	free(m->def);
	free(m->fn_of);
	free(m->moff);
	memset(m, 0, sizeof(*m));
}

static spv_result_t on_header(void *data, spv_endianness_t e, uint32_t magic,
			      uint32_t version, uint32_t generator, uint32_t bound,
			      uint32_t schema)
{
	struct hmd_spv *m = data;

	if (bound == 0 || bound > (1u << 24))
		return SPV_ERROR_INVALID_BINARY;
	m->bound = bound;
	m->def = calloc(bound, sizeof(*m->def));
	m->fn_of = calloc(bound, sizeof(*m->fn_of));
	return m->def && m->fn_of ? SPV_SUCCESS : SPV_ERROR_OUT_OF_MEMORY;
}

static spv_result_t on_insn(void *data, const spv_parsed_instruction_t *pi)
{
	struct hmd_spv *m = data;
	const uint32_t *w = pi->words;
	struct hmd_spv_insn in = { .type = pi->type_id, .result = pi->result_id };

	if (w < m->w || w >= m->w + m->n)
		return SPV_ERROR_INTERNAL;	/* a copy: another endianness */
	in.at = (uint32_t)(w - m->w);
	for (uint16_t o = 0; o < pi->num_operands; o++) {
		const spv_parsed_operand_t *po = &pi->operands[o];

		switch (po->type) {
		case SPV_OPERAND_TYPE_ID: case SPV_OPERAND_TYPE_TYPE_ID:
		case SPV_OPERAND_TYPE_RESULT_ID: case SPV_OPERAND_TYPE_MEMORY_SEMANTICS_ID:
		case SPV_OPERAND_TYPE_SCOPE_ID:
			if (po->offset < 64)
				in.idmask |= 1ull << po->offset;
			break;
		default:
			break;
		}
	}
	if (pi->opcode == OP_Function)
		m->cur_fn = pi->result_id;
	if (in.result && in.result < m->bound && !m->def[in.result]) {
		m->def[in.result] = in.at;
		m->fn_of[in.result] = m->cur_fn;
	}
	if (pi->opcode == OP_FunctionEnd)
		m->cur_fn = 0;
	if (pi->opcode == OP_MemberDecorate && pi->num_words >= 5 && w[3] == DEC_Offset) {
		struct hmd_spv_moff *nm = realloc(m->moff, (m->nr_moff + 1) * sizeof(*nm));

		if (!nm)
			return SPV_ERROR_OUT_OF_MEMORY;
		m->moff = nm;
		m->moff[m->nr_moff++] = (struct hmd_spv_moff){ w[1], w[2], w[4] };
	}
	if (pi->opcode == OP_Variable && pi->num_words >= 4 && w[3] == SC_PushConstant)
		m->pc_var = w[2];
	if (m->nr_ins == m->cap_ins) {
		size_t cap = m->cap_ins ? 2 * m->cap_ins : 1024;
		struct hmd_spv_insn *ni = realloc(m->ins, cap * sizeof(*ni));

		if (!ni)
			return SPV_ERROR_OUT_OF_MEMORY;
		m->ins = ni;
		m->cap_ins = cap;
	}
	m->ins[m->nr_ins++] = in;
	return SPV_SUCCESS;
}

int hmd_spv_parse(struct hmd_spv *m, const uint32_t *w, size_t n)
{
	spv_result_t r;

	memset(m, 0, sizeof(*m));
	pthread_once(&spv_once, spv_init);
	if (!spv_ctx)
		return -ENOMEM;
	m->w = w;
	m->n = n;
	r = spvBinaryParse(spv_ctx, m, w, n, on_header, on_insn, NULL);
	if (r == SPV_ERROR_OUT_OF_MEMORY)
		return -ENOMEM;
	return r == SPV_SUCCESS && m->bound ? 0 : -EINVAL;
}

const uint32_t *hmd_spv_def(const struct hmd_spv *m, uint32_t id)
{
	return id && id < m->bound && m->def[id] ? m->w + m->def[id] : NULL;
}

bool hmd_spv_const(const struct hmd_spv *m, uint32_t id, uint64_t *ret)
{
	const uint32_t *d = hmd_spv_def(m, id);
	uint32_t wc;

	if (!d || (d[0] & 0xffff) != OP_Constant)
		return false;
	wc = d[0] >> 16;
	*ret = d[3] | (wc >= 5 ? (uint64_t)d[4] << 32 : 0);
	return true;
}

