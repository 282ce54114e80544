/* cluster — the machines: topologies/NAME.json (schema in docs/cluster.md), units in the
 * field names (_gib = 2^30 bytes, _GBps = 1e9 bytes/s, _gbps = 1e9 bits/s, _us, _ns), and a
 * note beside every number saying where it comes from ("hbm_GBps_note", or one "note" inside
 * an object of numbers such as peak_tflops). Every field is required; notes are optional for
 * a user's file and required of our presets (a unit test checks them).
 *
 * The loader keeps the file's cJSON tree so that --set PATH=VALUE can override any field by
 * dotted path before the struct is filled (cluster_load applies the overrides). */
#ifndef TW_CLUSTER_H
#define TW_CLUSTER_H

#include "tw.h"

enum cluster_fabric { CLUSTER_FABRIC_INFINIBAND = 0, CLUSTER_FABRIC_ROCE, CLUSTER_FABRIC_ETHERNET,
		      CLUSTER_FABRIC_NONE };
enum cluster_netopo { CLUSTER_TOPO_RAIL_FAT_TREE = 0, CLUSTER_TOPO_FAT_TREE, CLUSTER_TOPO_SINGLE_SWITCH };
enum cluster_intra { CLUSTER_INTRA_NVSWITCH = 0, CLUSTER_INTRA_NVLINK_MESH, CLUSTER_INTRA_PCIE,
		     CLUSTER_INTRA_HOST /* CPU ranks sharing memory */ };
enum cluster_cpu { CLUSTER_CPU_INTEL = 0, CLUSTER_CPU_AMD, CLUSTER_CPU_ARM };
/* The names used in the file ("infiniband", "rail_fat_tree", "nvswitch", "intel"). */
const char *cluster_fabric_name(enum cluster_fabric f);
const char *cluster_topo_name(enum cluster_netopo t);
const char *cluster_intra_name(enum cluster_intra i);
const char *cluster_cpu_name(enum cluster_cpu v);
/* Which links of a straggler its link_scale slows: every link, the NVLink (or PCIe peer) port,
 * its share of the node's NICs, or its PCIe link to the host and NIC ("all", "nvlink", "nic",
 * "pcie"). */
enum cluster_links { CLUSTER_LINKS_ALL = 0, CLUSTER_LINKS_NVLINK, CLUSTER_LINKS_NIC, CLUSTER_LINKS_PCIE };
const char *cluster_links_name(enum cluster_links l);

/* Step-function efficiency table: eff = value of the last entry whose threshold <= x. */
#define CLUSTER_MAX_EFF 8
struct cluster_eff_table {
	int n;
	double min[CLUSTER_MAX_EFF]; /* threshold (FLOPs or bytes), ascending, first = 0 */
	double eff[CLUSTER_MAX_EFF]; /* fraction of peak in (0, 1] */
};
double cluster_eff_lookup(const struct cluster_eff_table *t, double x);

/* Named attention kernels with their own efficiency tables (eff.attn_kernels: "fa2", "fa3",
 * "cudnn", ...), which a strategy's attention_kernel picks instead of eff.attn. */
#define CLUSTER_MAX_ATTN_KERNELS 4
#define CLUSTER_KERNEL_NAME 16
struct cluster_attn_kernel {
	char name[CLUSTER_KERNEL_NAME];
	struct cluster_eff_table t;
};

#define CLUSTER_MAX_STRAGGLERS 16
struct cluster {
	char name[64];
	struct {
		char name[64];
		int arch_sm;                /* compute capability x10 (70, 80, 90, 100); 0 = CPU */
		double memory_gib;          /* usable HBM (total capacity as torch reports it) */
		double peak_tflops[TW_NUM_DTYPES]; /* dense, per dtype (0 = unsupported) */
		double hbm_GBps;            /* HBM bandwidth */
		int sms;                    /* streaming multiprocessors */
		double launch_us;           /* per-kernel launch overhead */
		double context_gib;         /* CUDA context + cuBLAS/NCCL workspaces */
		double speed_variation;     /* spread of compute speed among GPUs of this SKU,
					     * (fastest - slowest) / median with outliers left
					     * out; 0 = identical GPUs (optional in a file) */
	} gpu;
	struct {
		int gpus;                   /* GPUs per node */
		enum cluster_intra intra;
		double nvlink_GBps;         /* per GPU, per direction, as NCCL achieves it */
		bool nvls;                  /* NVLink SHARP in-switch reduction */
		double nvls_GBps;           /* NVLS all-reduce bus bandwidth (nccl-tests busbw); 0 if !nvls */
		int nvlink_domain_gpus;     /* GPUs in one NVLink domain (8, or 72 for NVL72); 0 = none */
		int pcie_gen;
		double pcie_GBps;           /* per GPU, per direction, achievable for DMA (host link; for
					       CPU ranks: shared-memory copy bandwidth per rank) */
		double host_memory_gib;
		int cpu_cores;
		enum cluster_cpu cpu_vendor; /* NCCL's net overhead and LL caps depend on it */
		double cpu_mem_GBps;        /* host DRAM bandwidth (CPU optimizer is bound by it) */
		double cpu_tflops;          /* fp32, all cores (CPU ranks, CPU Adam) */
		double nvme_GBps;           /* read/write, whole node */
		double nvlink_latency_us;   /* per-hop software+wire latency NCCL adds on NVLink */
		double pcie_latency_us;
	} node;
	struct {
		int nics_per_node;          /* 0 only with fabric "none" (one machine) */
		double nic_gbps;            /* Gb/s per NIC, per direction */
		double nic_eff;             /* achievable fraction of nic_gbps for NCCL */
		enum cluster_fabric fabric;
		enum cluster_netopo topology;
		int leaf_radix;             /* ports per leaf switch toward nodes */
		double oversubscription;    /* leaf down:up ratio, 1 = non-blocking */
		double latency_us;          /* end-to-end per message, software included */
		double plugin_latency_us;   /* what NCCL's net plugin reports (latencyInter), 0 for IB */
		int max_nodes;              /* largest job the fabric holds */
	} net;
	struct {
		struct cluster_eff_table gemm;   /* by FLOPs of one GEMM */
		struct cluster_eff_table attn;   /* by FLOPs of one attention kernel */
		struct cluster_attn_kernel attn_kernels[CLUSTER_MAX_ATTN_KERNELS];
		int n_attn_kernels;
		struct cluster_eff_table mem;    /* by bytes moved, memory-bound kernels */
		double comm_overlap_slowdown;    /* compute slowdown while a comm kernel runs, >= 1 */
		double alloc_fragmentation;      /* allocator overhead on top of live bytes, >= 1 */
	} eff;
	/* What-ifs the simulator runs in full mode: the file's "stragglers" array, e.g.
	 * --set 'stragglers=[{"gpu":3,"compute_scale":0.8}]' (a GPU 20% slower) or
	 * --set 'stragglers=[{"node":1,"link":"nic","link_scale":0.5}]' (a node's NICs at half
	 * speed). An entry selects one GPU or every GPU of one node; entries may overlap, and where
	 * they do their scales multiply. */
	int n_stragglers;
	struct cluster_straggler {
		bool by_node;         /* "node" given, else "gpu" */
		int index;            /* the global GPU, or the node (every one of its node.gpus) */
		double compute_scale; /* multiplies the compute rate, (0, 1] */
		double link_scale;    /* multiplies the bandwidth of `links`, (0, 1] */
		enum cluster_links links;
	} stragglers[CLUSTER_MAX_STRAGGLERS];
};

/* Whether straggler s covers global GPU g (node k holds GPUs k*node.gpus .. (k+1)*node.gpus-1). */
bool cluster_straggler_covers(const struct cluster *c, const struct cluster_straggler *s, int64_t g);

/* Bandwidth (GB/s, per GPU, per direction) and latency (us) between two GPUs of one node:
 * NVLink for nvswitch/nvlink_mesh, PCIe for pcie, shared memory (pcie_GBps) for host. */
double cluster_intra_GBps(const struct cluster *c);
double cluster_intra_latency_us(const struct cluster *c);
/* The time multiplier of a synchronous job's GPU compute on `gpus` GPUs drawn from the
 * cluster: every collective and pipeline hand-off waits for its slowest member, so the step
 * runs at the pace of the job's slowest GPU. Per-GPU speed is taken as normal with the
 * spread gpu.speed_variation between Tukey's fences (+-2.698 sigma); the multiplier is
 * 1 + sigma x E[max of gpus standard normals] (1 for one GPU or no spread). */
double cluster_job_pace(const struct cluster *c, int64_t gpus);
/* What NCCL achieves on one NIC, GB/s per direction: nic_gbps / 8 * nic_eff. */
double cluster_nic_GBps(const struct cluster *c);
/* Dense peak TFLOP/s in the dtype GEMMs run in, the MFU denominator: fp8 with fp8 GEMMs, TF32
 * for fp32 with tf32 (else fp32 runs in fp32, PyTorch's default), otherwise the parameter
 * dtype; bf16 (or fp16) where that rate is unknown. */
double cluster_gemm_peak(const double peak_tflops[TW_NUM_DTYPES], enum tw_dtype param_dtype,
			 bool fp8_gemm, bool tf32);

/* Load CLUSTER (preset name in topologies_dir or a path), apply sets (PATH=VALUE, cluster
 * paths only; each must exist and keep its type) and validate. */
enum tw_result cluster_load(const char *name_or_path, const char *topologies_dir,
			    const char *const *sets, int nsets, struct cluster *out,
			    struct tw_err *err);
/* The efficiency table of the attention kernel called `name` (eff.attn_kernels), NULL when the
 * cluster has none by that name; `list` (may be NULL) gets the names it has, comma-separated. */
const struct cluster_eff_table *cluster_attn_kernel(const struct cluster *c, const char *name,
						    char *list, size_t len);
/* Whether a --set path belongs to the cluster (gpu., node., net., eff., ...). */
bool cluster_owns_path(const char *path);
/* For a descriptive field no prediction reads (node.pcie_gen, node.cpu_cores, net.fabric,
 * node.nvlink_domain_gpus; PATH or PATH=VALUE), the fields that carry its effect; else NULL. */
const char *cluster_descriptive(const char *path);
/* For a field a prediction reads only in part, so that a what-if on it alone misleads (gpu.sms:
 * wave quantisation, not the peak), what else to set; else NULL. */
const char *cluster_partial(const char *path);
/* Ranges and cross-field rules on a filled struct (cluster_load calls it; call it again after
 * changing fields in code). file names the input in messages. */
enum tw_result cluster_validate(const struct cluster *c, const char *file, struct tw_err *err);

/* GPU count check: whole nodes, or fewer GPUs on one node, at most net.max_nodes nodes, and
 * every straggler's GPU or node inside the job. Fills nodes. */
enum tw_result cluster_check_gpus(const struct cluster *c, int64_t gpus, int *nodes,
				  struct tw_err *err);

/* Preset names (topologies_dir/NAME.json), sorted, ", "-separated into buf. */
void cluster_list_presets(const char *topologies_dir, char *buf, size_t len);
/* The cluster in the file's schema (without notes): loading it back gives the same struct. */
struct cJSON *cluster_to_json(const struct cluster *c);

#endif
