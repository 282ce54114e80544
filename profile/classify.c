/* classify — kernel and activity names to trace categories (reference/profiling.md §2.1, §5,
 * §6). Works on mangled and demangled names alike: the patterns are substrings. */
#include "profile.h"

#include <ctype.h>
#include <string.h>

/* case-insensitive strstr (strcasestr is a GNU extension) */
static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++) {
		size_t i = 0;
		while (i < n && hay[i] &&
		       tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
			i++;
		if (i == n)
			return true;
	}
	return false;
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The collective word after an NCCL kernel prefix. The algorithm / protocol suffix is
 * ignored: NCCL compiles one specialised kernel per (collective, type) and dispatches the real
 * algorithm inside it, so the suffix is not the algorithm that ran. */
static bool nccl_coll(const char *p, enum trace_cat *out)
{
	if (starts(p, "AllReduce"))
		*out = TRACE_ALL_REDUCE;
	else if (starts(p, "ReduceScatter"))
		*out = TRACE_REDUCE_SCATTER;
	else if (starts(p, "AllGather")) /* AllGather, AllGatherV */
		*out = TRACE_ALL_GATHER;
	else if (starts(p, "Broadcast"))
		*out = TRACE_BROADCAST;
	else if (starts(p, "Reduce")) /* rooted, busbw factor 1 like broadcast */
		*out = TRACE_BROADCAST;
	else if (starts(p, "SendRecv") || starts(p, "Send") || starts(p, "Recv"))
		*out = TRACE_P2P; /* also PyTorch all_to_all, built from grouped send/recv */
	else if (starts(p, "AlltoAll") || starts(p, "AllToAll"))
		*out = TRACE_ALL_TO_ALL;
	else if (starts(p, "Generic"))
		*out = TRACE_ALL_REDUCE; /* type not in the name; callers override from metadata */
	else
		return false;
	return true;
}

/* The collective word of an NCCL kernel name (after its prefix, any version) and its
 * category, or NULL. */
static const char *nccl_word(const char *name, enum trace_cat *cat)
{
	static const char *const prefixes[] = {"ncclDevKernel_", "ncclSymkDevKernel_",
					       "ncclKernel_"};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		const char *p = strstr(name, prefixes[i]);
		if (p && nccl_coll(p + strlen(prefixes[i]), cat))
			return p + strlen(prefixes[i]);
	}
	return NULL;
}

bool prof_classify_nccl(const char *name, enum trace_cat *out)
{
	if (nccl_word(name, out))
		return true;
	/* HTA counts any name starting with "nccl" as communication */
	if (starts(name, "nccl")) {
		*out = TRACE_ALL_REDUCE;
		return true;
	}
	return false;
}

bool prof_nccl_is_reduce(const char *name)
{
	enum trace_cat c;
	const char *w = nccl_word(name, &c);
	return w && c == TRACE_BROADCAST && starts(w, "Reduce");
}

enum trace_cat prof_classify_kernel(const char *name)
{
	enum trace_cat c;
	if (prof_classify_nccl(name, &c))
		return c;
	/* Kineto "Memcpy HtoD (Pinned -> Device)", nsys-style "[CUDA memcpy HtoD]" */
	if (contains_ci(name, "memcpy")) {
		if (contains_ci(name, "HtoD") || contains_ci(name, "Host-to-Device"))
			return TRACE_H2D;
		if (contains_ci(name, "DtoH") || contains_ci(name, "Device-to-Host"))
			return TRACE_D2H;
		if (contains_ci(name, "PtoP") || contains_ci(name, "Peer-to-Peer"))
			return TRACE_P2P;
		return TRACE_COMPUTE_OTHER; /* device-to-device copies use the SMs / copy engines */
	}
	static const char *const attn[] = {"flash", "fmha", "attention", "attn", "sdpa", NULL};
	for (int i = 0; attn[i]; i++)
		if (contains_ci(name, attn[i]))
			return TRACE_ATTN;
	static const char *const gemm[] = {"gemm", "cutlass", "xmma", "nvjet", "cublas",
					   "matmul", NULL};
	for (int i = 0; gemm[i]; i++)
		if (contains_ci(name, gemm[i]))
			return TRACE_GEMM;
	return TRACE_COMPUTE_OTHER;
}
