/*
** ndplan/device.h -- one accelerator as the estimators see it. Plain C, SI units throughout:
** bytes, seconds, FLOP/s, and bytes per second *per direction per device* for every link
** (datasheets often quote the bidirectional sum: halve it). Peaks are dense (no 2:4
** sparsity). Efficiencies are fractions in (0, 1] of the matching peak.
*/
#ifndef NDPLAN_DEVICE_H
#define NDPLAN_DEVICE_H

#include <stddef.h>

/*
** The number formats a device's matrix units run, each with its own dense peak (a peak
** slot). The training recipes that use them are in ndplan/precision.h.
*/
typedef enum nd_precision {
  ND_PREC_BF16 = 0,
  ND_PREC_FP16,
  ND_PREC_FP8,     /* FP8 with tensor-wide (or software block) scales: Hopper, Blackwell, CDNA 3-4 */
  ND_PREC_MXFP8,   /* FP8 with hardware E8M0 scales per 32 elements (OCP MX): Blackwell, CDNA 4 */
  ND_PREC_NVFP4,   /* FP4 E2M1 with E4M3 scales per 16 elements: Blackwell */
  ND_PREC_MXFP4,   /* FP4 E2M1 with E8M0 scales per 32 elements (OCP MX): Blackwell, CDNA 4 */
  ND_PREC_COUNT
} nd_precision;

#define ND_DEVICE_NAME_MAX 64    /* including the terminating NUL */
#define ND_DEVICE_DESC_MAX 256

/* The fast domain: NVLink/NVSwitch, Infinity Fabric, HCCS. */
typedef struct nd_scale_up {
  int domain_size;        /* devices reachable through it (8 for HGX, 72 for NVL72) */
  double bandwidth;       /* bytes/s per direction per device */
  double latency;         /* seconds per collective step */
} nd_scale_up;

/*
** A link without a domain: the scale-out network (this device's share of the NICs) or the
** host link. Raw link numbers: unlike comm.h's nd_link, no efficiency is applied here.
*/
typedef struct nd_device_link {
  double bandwidth;       /* bytes/s per direction per device */
  double latency;         /* seconds */
} nd_device_link;

/*
** Achievable fractions of the peaks (each described once, with its default and range, in
** ndplan/fields.h: nd_efficiency_fields). The estimators multiply peaks by these; calibration
** adjusts them rather than the datasheet numbers.
*/
typedef struct nd_efficiency {
  double gemm;            /* best fraction of peak FLOP/s, reached by large GEMMs */
  double gemm_half_size;  /* GEMM FLOPs at which efficiency is gemm/2 (0: no size effect;
                             ND_DERIVED, the default: 1 us of work at bf16 peak) */
  double hbm;             /* fraction of HBM bandwidth for streaming kernels */
  double scale_up;        /* bus-bandwidth fraction on the scale-up links */
  double scale_out;       /* bus-bandwidth fraction on the scale-out network */
  double kernel_overhead; /* seconds of launch and synchronisation per layer per pass, paid
                             on top of the work (dominates small models) */
  double gemm_fp8;        /* best fraction of a quantized format's peak (FP8, MXFP8, FP4),
                             reached by large GEMMs (they lose more to the epilogue and to
                             scaling than 16-bit ones) */
  double gemm_fp8_rowwise; /* the same for row-wise scaled FP8 GEMMs (torchao rowwise: a
                             per-row scale in the epilogue, not cuBLAS's per-tensor path);
                             0 (unset): as gemm_fp8 */
  double attn_fwd;        /* fraction of the 16-bit peak the fused attention kernel reaches
                             in the forward (flash attention; the core stays in bf16) */
  double attn_bwd;        /* the same in the backward, which runs well below the forward */
  double attn_half_keys;  /* keys per query at which attention efficiency is half of
                             attn_fwd/attn_bwd (short sequences fill the SMs poorly; 0: none) */
} nd_efficiency;

typedef struct nd_device {
  char name[ND_DEVICE_NAME_MAX];
  char description[ND_DEVICE_DESC_MAX];
  double peak_flops[ND_PREC_COUNT];   /* dense FLOP/s; 0 = precision not supported */
  double hbm_bytes;
  double hbm_bandwidth;               /* bytes/s */
  nd_scale_up scale_up;
  nd_device_link scale_out;
  nd_device_link host_link;           /* device <-> host memory (PCIe, NVLink-C2C) */
  nd_efficiency efficiency;
  double reserve_bytes;               /* HBM never available to the model: runtime context,
                                         communicator buffers, allocator fragmentation */
  int node_size;                      /* devices per host, the unit that shares the NICs and
                                         the CPUs (8 on HGX, 4 on a GB200/GB300 compute tray
                                         inside its 72-GPU NVLink domain; launchers start
                                         this many ranks per node); 0 = the scale-up domain */
} nd_device;

/* "bf16", "fp16", "fp8", "mxfp8", "nvfp4", "mxfp4"; NULL for an invalid value. */
const char *nd_precision_name (nd_precision p);
/* Parses a precision name (lower case). Returns 0 and sets *out, or -1 if unknown. */
int nd_precision_parse (const char *name, nd_precision *out);

/*
** Zeroes the hardware numbers and sets the modelling knobs to ndplan's defaults
** (efficiencies from their descriptors in fields.c, latencies and reserve in device.c, each
** with its source).
*/
void nd_device_init (nd_device *dev);

/* gemm_half_size as the curves use it: a derived default (ND_DERIVED) is the FLOPs of
   ND_HALF_SIZE_SECONDS of work at the bf16 peak. nd_device_complete writes that value in. */
double nd_device_half_size (const nd_device *dev);
void nd_device_complete (nd_device *dev);

/*
** Checks every field. Returns 0 if the device is usable; otherwise -1 and a message naming
** the field (e.g. "hbm_bytes must be positive, got 0") in err (if err is not NULL).
*/
int nd_device_validate (const nd_device *dev, char *err, size_t len);

/* Peak dense FLOP/s at precision p (0 if unsupported or p is out of range). */
double nd_device_peak_flops (const nd_device *dev, nd_precision p);

/*
** Achievable fraction of peak for one GEMM of `flops` FLOPs: a saturating curve
** gemm * flops / (flops + gemm_half_size). Monotone increasing in flops, 0 at 0, below
** `gemm` everywhere, and gemm/2 at gemm_half_size. Small GEMMs lose to wave quantization
** and launch overhead; this is the smooth version of Calculon's size-step table.
*/
double nd_device_gemm_efficiency (const nd_device *dev, double flops);

/*
** The same curve for a GEMM run at precision p: quantized GEMMs top out at gemm_fp8 and reach it
** at proportionally larger sizes (the fixed cost per GEMM is time, so in FLOPs it scales
** with the peak).
*/
double nd_device_gemm_efficiency_at (const nd_device *dev, nd_precision p, double flops);

/* Fraction of the 16-bit peak of the fused attention kernel, forward (bwd = 0) or backward
   (bwd = 1), when each query sees `keys` keys. */
double nd_device_attention_efficiency (const nd_device *dev, int bwd, double keys);

#endif
