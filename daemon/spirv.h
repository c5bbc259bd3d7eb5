/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One parse of a client's SPIR-V (spirv.c), for the checks that read it
 * as definitions: the isolation check (isolate.c) and the compute limits
 * (validate.c).  SPIRV-Tools' binary parser fills it; the module is not
 * copied (w stays the caller's).
 */
#ifndef HMIRRORD_SPIRV_H
#define HMIRRORD_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the SPIR-V numbers the daemon's checks read */
enum {
	OP_Nop = 0, OP_Undef = 1, OP_Line = 8, OP_EntryPoint = 15, OP_Extension = 10, OP_ExtInstImport = 11,
	OP_ExtInst = 12, OP_TypeVoid = 19, OP_TypeBool = 20, OP_TypeInt = 21,
	OP_TypeFloat = 22, OP_TypeVector = 23, OP_TypeMatrix = 24, OP_TypeArray = 28,
	OP_TypeRuntimeArray = 29, OP_TypeStruct = 30, OP_TypePointer = 32,
	OP_TypeFunction = 33, OP_TypeForwardPointer = 39, OP_Constant = 43,
	OP_ConstantComposite = 44, OP_ConstantNull = 46, OP_SpecConstant = 50,
	OP_Function = 54, OP_FunctionParameter = 55, OP_FunctionEnd = 56,
	OP_FunctionCall = 57, OP_Variable = 59, OP_Load = 61, OP_CopyMemory = 63,
	OP_CopyMemorySized = 64, OP_AccessChain = 65, OP_InBoundsAccessChain = 66,
	OP_PtrAccessChain = 67, OP_InBoundsPtrAccessChain = 70, OP_Decorate = 71,
	OP_MemberDecorate = 72, OP_CompositeExtract = 81, OP_UConvert = 113,
	OP_ConvertUToPtr = 120, OP_Bitcast = 124, OP_IAdd = 128, OP_IMul = 132,
	OP_UMod = 137, OP_Select = 169, OP_INotEqual = 171, OP_ShiftLeftLogical = 196,
	OP_BitwiseOr = 197, OP_BitwiseAnd = 199, OP_NoLine = 317, OP_Capability = 17,
	OP_ExecutionMode = 16, OP_SpecConstantComposite = 51, OP_ExecutionModeId = 331,
};
enum {
	SC_UniformConstant = 0, SC_Input = 1, SC_Uniform = 2, SC_Output = 3,
	SC_Workgroup = 4, SC_CrossWorkgroup = 5, SC_Private = 6, SC_Function = 7,
	SC_PushConstant = 9, SC_StorageBuffer = 12, SC_PSB = 5349,
	DEC_ArrayStride = 6, DEC_BuiltIn = 11, DEC_Offset = 35,
	CAP_Linkage = 5, EXEC_GLCompute = 5,
	MODE_LocalSize = 17, MODE_LocalSizeId = 38, BUILTIN_WorkgroupSize = 25,
};

struct hmd_spv_moff { uint32_t id, member, offset; };	/* OpMemberDecorate Offset */

/* one instruction, as SPIRV-Tools parsed it */
struct hmd_spv_insn {
	uint32_t at;		/* word index in the module */
	uint32_t type, result;	/* 0 where it has none */
	uint64_t idmask;	/* bit k: word k is an id (k < 64) */
};

struct hmd_spv {
	const uint32_t *w;
	size_t n;
	uint32_t bound;
	struct hmd_spv_insn *ins;
	size_t nr_ins, cap_ins;
	uint32_t *def;		/* id -> word index of its defining instruction */
	uint32_t *fn_of;	/* id -> the function (its id) defining it, 0: global */
	uint32_t cur_fn;
	struct hmd_spv_moff *moff;
	size_t nr_moff;
	uint32_t pc_var;	/* the PushConstant variable, 0 if none */
};

/* 0, -EINVAL (not a module SPIRV-Tools parses), -ENOMEM; free it with
 * hmd_spv_free() either way */
int  hmd_spv_parse(struct hmd_spv *m, const uint32_t *w, size_t n);
void hmd_spv_free(struct hmd_spv *m);
/* the instruction defining id, NULL if none */
const uint32_t *hmd_spv_def(const struct hmd_spv *m, uint32_t id);
/* the value of an OpConstant integer (either width), false if id is none */
bool hmd_spv_const(const struct hmd_spv *m, uint32_t id, uint64_t *ret);

#endif
