// gpu-bench: measures each NVIDIA GPU it is given and prints one JSON line per GPU on stdout
// (docs/gpu-benchmark.md has the contract; agent/src/benchmark/gpu-container.ts reads it).
//
// No CUDA runtime library: the driver API is loaded with dlopen at run time, so the program
// starts on any machine, says plainly when there is no driver or one too old, and runs with
// whatever libcuda the NVIDIA Container Toolkit puts into its container. The GPU code is a
// fatbin (SASS for each architecture plus PTX) and the compatibility PTX for drivers older than
// the toolkit, linked into this binary (gpu-code.S).
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "challenge.h"
#include "shared.h"

// The program's version: its JSON contract and its figures' meaning change with it.
#define GB_VERSION "1.0.0"
#ifndef GB_BUILD
#define GB_BUILD "unknown"
#endif
#ifndef GB_SASS
#define GB_SASS "unknown"
#endif
#ifndef GB_PTX
#define GB_PTX "unknown"
#endif
#ifndef GB_COMPAT_PTX_ISA
#define GB_COMPAT_PTX_ISA "unknown"
#endif
#ifndef GB_COMPAT_CUDA
#error "GB_COMPAT_CUDA: the CUDA version of the compatibility PTX's ISA (scripts/build-gpu-bench.sh)"
#endif

extern "C" const unsigned char gpu_bench_fatbin[];
extern "C" const char gpu_bench_compat_ptx_75[];
extern "C" const char gpu_bench_compat_ptx_80[];

namespace {

// Exit codes (docs/gpu-benchmark.md).
enum Exit { kOk = 0, kFailed = 1, kBadArgs = 2, kNoDriver = 3, kDriverTooOld = 4, kNoGpu = 5 };

// Which GPU code a driver loads. One of the toolkit's family (CUDA 13: R580 and newer) loads the
// fatbin: SASS for each architecture, PTX beyond. NVIDIA's minor-version compatibility ends at
// the family: the cubins of ptxas 13 (ELF ABI version 8) do not load on older drivers, and its
// PTX declares ISA 9.0, which their JIT compilers refuse. Those drivers JIT-compile the
// compatibility PTX instead, whose ISA (checked by ptxas at build time) dates from CUDA
// kMinDriverVersion: the oldest driver this build runs on.
constexpr int kToolkitVersion = CUDA_VERSION;
constexpr int kFatbinDriverVersion = (CUDA_VERSION / 1000) * 1000;
constexpr int kMinDriverVersion = GB_COMPAT_CUDA;

// The oldest Linux driver of a CUDA version (NVIDIA's CUDA toolkit release notes, table 3).
const char *driver_needed_for(int version) {
  if (version >= 13000) return "the R580 branch or newer (580.65.06 at least)";
  if (version >= 12000) return "the R525 branch or newer (525.60.13 at least)";
  if (version >= 11000) return "the R450 branch or newer (450.36.06 at least)";
  return "an older branch";
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

struct Failure {
  int code;
  std::string message;
};

bool g_progress = true;

void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress(const char *fmt, ...) {
  if (!g_progress) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("gpu-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

// ---------------------------------------------------------------------------------------------
// The driver API through dlopen. Each entry names the exported symbol of the ABI we call
// (cuda.h maps most names to a _v2 symbol; cuDeviceGetUuid and cuEventElapsedTime keep their
// first ABI, which every driver since CUDA 10 exports and whose result is the same here).

#define GB_DRIVER_FUNCTIONS(X)                                                                           \
  X(cuInit, "cuInit", CUresult, (unsigned))                                                              \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **))                               \
  X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult, const char **))                           \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int *))                                             \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                                             \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char *, int, CUdevice))                               \
  X(cuDeviceGetUuid, "cuDeviceGetUuid", CUresult, (CUuuid *, CUdevice))                                  \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int *, CUdevice_attribute, CUdevice))       \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t *, CUdevice))                             \
  X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", CUresult, (char *, int, CUdevice))                       \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext *, CUdevice))             \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult, (CUdevice))                     \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext))                                           \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, ())                                                  \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule *, const void *))                          \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", CUresult, (CUmodule *, const void *, unsigned, CUjit_option *, void **)) \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                                              \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult, (CUfunction *, CUmodule, const char *))        \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction, CUfunction_attribute, int))         \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t *, size_t *))                                     \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))                                      \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                                                  \
  X(cuMemAllocHost, "cuMemAllocHost_v2", CUresult, (void **, size_t))                                    \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void *))                                                  \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CUresult, (void *, CUdeviceptr, size_t))                            \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult, (CUdeviceptr, const void *, size_t, CUstream))  \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult, (void *, CUdeviceptr, size_t, CUstream))        \
  X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned))                                  \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))                                         \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))                                    \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned))                                     \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                                            \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))                                       \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))                                       \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float *, CUevent, CUevent))                     \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                          \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **))

struct Driver {
  std::string path;
  int version = 0;
#define GB_DECLARE(name, symbol, ret, args) ret(*name) args = nullptr;
  GB_DRIVER_FUNCTIONS(GB_DECLARE)
#undef GB_DECLARE
};

Driver g_cu;

std::string cu_error(CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (g_cu.cuGetErrorName == nullptr || g_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (g_cu.cuGetErrorString == nullptr || g_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  return format("%s (%d)%s%s", name ? name : "CUDA error", static_cast<int>(r), text ? ": " : "", text ? text : "");
}

void check(CUresult r, const char *what) {
  if (r != CUDA_SUCCESS) throw Failure{kFailed, format("%s failed: %s", what, cu_error(r).c_str())};
}

std::string version_text(int v) { return format("%d.%d", v / 1000, (v % 1000) / 10); }

// Where libcuda.so.1 is looked for: the loader's own search (LD_LIBRARY_PATH, ld.so.cache),
// then where the NVIDIA Container Toolkit and the driver installers put it (a container built
// FROM scratch may have no ld.so.cache). GPU_BENCH_LIBCUDA names one file instead.
const char *const kLibcudaPaths[] = {
    "libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};

void load_driver() {
  std::vector<std::string> candidates;
  if (const char *only = getenv("GPU_BENCH_LIBCUDA"); only != nullptr && *only != '\0') candidates.push_back(only);
  else candidates.assign(std::begin(kLibcudaPaths), std::end(kLibcudaPaths));
  void *lib = nullptr;
  std::string first_error;
  for (const auto &path : candidates) {
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      g_cu.path = path;
      break;
    }
    if (first_error.empty()) first_error = dlerror();
  }
  if (lib == nullptr) {
    throw Failure{kNoDriver,
                  format("no NVIDIA driver: libcuda.so.1 could not be loaded (%s). On a host, install the NVIDIA driver "
                         "(this build needs %s); in a container, start it with the GPUs (docker run --gpus all, with the "
                         "NVIDIA Container Toolkit), which brings the driver's libcuda.so.1 into the container",
                         first_error.c_str(), driver_needed_for(kMinDriverVersion))};
  }
  // The version first, alone: a driver too old for us may lack functions we load next.
  auto get_version = reinterpret_cast<CUresult (*)(int *)>(dlsym(lib, "cuDriverGetVersion"));
  if (get_version == nullptr || get_version(&g_cu.version) != CUDA_SUCCESS) {
    throw Failure{kNoDriver, format("%s has no working cuDriverGetVersion: it is not an NVIDIA driver library", g_cu.path.c_str())};
  }
  if (g_cu.version < kMinDriverVersion) {
    throw Failure{kDriverTooOld,
                  format("the NVIDIA driver is too old: it supports CUDA %s, and this gpu-bench needs CUDA %s or newer: %s, whose "
                         "JIT compiler takes its compatibility PTX (ISA %s). Upgrade the driver; see docs/gpu-benchmark.md",
                         version_text(g_cu.version).c_str(), version_text(kMinDriverVersion).c_str(),
                         driver_needed_for(kMinDriverVersion), GB_COMPAT_PTX_ISA)};
  }
#define GB_RESOLVE(name, symbol, ret, args)                                                                \
  g_cu.name = reinterpret_cast<ret(*) args>(dlsym(lib, symbol));                                           \
  if (g_cu.name == nullptr) {                                                                              \
    throw Failure{kDriverTooOld, format("the NVIDIA driver's %s has no %s: reinstall or upgrade the driver", \
                                        g_cu.path.c_str(), symbol)};                                       \
  }
  GB_DRIVER_FUNCTIONS(GB_RESOLVE)
#undef GB_RESOLVE
}

void init_driver() {
  // GPU indexes as nvidia-smi numbers them (by PCI bus id), unless the caller chose an order.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  const CUresult r = g_cu.cuInit(0);
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_NO_DEVICE) {
    throw Failure{kNoGpu, format("no NVIDIA GPU is visible to the driver (%s); in a container, start it with the GPUs "
                                 "(docker run --gpus all); on a host, check nvidia-smi", cu_error(r).c_str())};
  }
  if (r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH || r == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) {
    throw Failure{kDriverTooOld, format("the NVIDIA driver cannot be used (%s): the user-space driver (%s, CUDA %s) does "
                                        "not match the kernel module; reboot after a driver upgrade, or reinstall the driver",
                                        cu_error(r).c_str(), g_cu.path.c_str(), version_text(g_cu.version).c_str())};
  }
  throw Failure{kFailed, format("cuInit failed: %s", cu_error(r).c_str())};
}

// ---------------------------------------------------------------------------------------------
// Arguments

// The GPU challenge's parameters (--challenge): C is m x n over k, `rounds` rounds.
struct ChallengeOptions {
  bool on = false;
  unsigned m = 0, n = 0, k = 0, rounds = 0;
  uint8_t pre_seed[32] = {};
  bool has_pre_seed = false;
};

struct Options {
  std::vector<std::string> gpus;  // indexes or UUIDs; empty: all
  unsigned matmul_size = 8192;
  double seconds = 1.0;
  unsigned copy_mib = 1024;
  unsigned transfer_mib = 256;
  ChallengeOptions challenge;
};

const char kUsageText[] =
    "usage: gpu-bench [--gpus LIST] [--matmul-size N] [--seconds S] [--copy-mib N] [--transfer-mib N] [--json-only]\n"
    "       gpu-bench --challenge --m M --n N --k K --rounds R --pre-seed HEX [--gpus LIST] [--json-only]\n"
    "       gpu-bench --version | --help | --self-test\n";

void print_help() {
  printf(
      "gpu-bench %s: measures NVIDIA GPUs and prints one JSON line per GPU on stdout.\n\n"
      "%s\n"
      "Per GPU: dense FP16 and BF16 tensor-core matmul throughput (fp32 accumulation; checked against\n"
      "a reference before any figure is reported), FP32 FMA throughput, device memory bandwidth (a\n"
      "copy: bytes read plus bytes written), host-to-device and device-to-host bandwidth over the bus\n"
      "(pinned memory). Progress goes to stderr.\n\n"
      "  --gpus LIST        GPUs to measure, by index (as nvidia-smi numbers them) or UUID (GPU-...),\n"
      "                     comma-separated; default: every visible GPU\n"
      "  --matmul-size N    M = N = K of the timed matmuls, a multiple of %u from %u to 32768; default 8192\n"
      "  --seconds S        time spent on each figure after its warm-up, 0.05 to 60; default 1\n"
      "  --copy-mib N       MiB of each of the two buffers of the device copy, 64 to 65536; default 1024\n"
      "                     (at most a quarter of the GPU's free memory is used)\n"
      "  --transfer-mib N   MiB of the pinned host buffer of the bus transfers, 16 to 16384; default 256\n"
      "  --json-only        no progress on stderr (errors are still printed there)\n"
      "  --self-test        check the tiling and the result check on the CPU (no GPU needed) and exit\n"
      "  --challenge        run the GPU challenge (docs/decisions.md, \"GPU proof\") instead of measuring:\n"
      "                     set up, print {\"ready\":...}, read \"go HEX\" on stdin, run --rounds rounds of an\n"
      "                     --m x --k by --k x --n int8 product on each GPU, print {\"commit\":...}, read\n"
      "                     \"open UUID:ROUND:ROW ...\" and print {\"openings\":...} (Merkle paths); --m, --n and\n"
      "                     --k are powers of two from 256 (--n and --k up to 16384), --pre-seed 64 hex digits\n"
      "  --version          print the version, the toolkit, the architectures and the oldest driver\n\n"
      "Exit status: 0 every GPU measured; 1 a GPU could not be measured or its matmul was wrong (no\n"
      "figure is printed for it); 2 bad arguments; 3 no NVIDIA driver; 4 a driver too old or broken;\n"
      "5 no GPU, or a requested GPU is not visible.\n",
      GB_VERSION, kUsageText, GB_SIZE_MULTIPLE, GB_SIZE_MULTIPLE);
}

void print_version() {
  printf("gpu-bench %s (build %s)\n", GB_VERSION, GB_BUILD);
  printf("compiled with the CUDA %s toolkit: SASS for %s; PTX for %s\n", version_text(kToolkitVersion).c_str(), GB_SASS, GB_PTX);
  printf("drivers with CUDA %s or newer load that code: %s; older drivers JIT-compile the compatibility PTX for compute_75 and compute_80 (ISA %s)\n",
         version_text(kFatbinDriverVersion).c_str(), driver_needed_for(kFatbinDriverVersion), GB_COMPAT_PTX_ISA);
  printf("needs an NVIDIA driver with CUDA %s or newer: %s\n", version_text(kMinDriverVersion).c_str(), driver_needed_for(kMinDriverVersion));
}

[[noreturn]] void usage_error(const std::string &message) {
  fprintf(stderr, "gpu-bench: %s\n%s", message.c_str(), kUsageText);
  exit(kBadArgs);
}

unsigned parse_unsigned(const char *flag, const char *text, unsigned min, unsigned max) {
  char *end = nullptr;
  errno = 0;
  const unsigned long v = strtoul(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || v < min || v > max) {
    usage_error(format("%s must be a whole number from %u to %u, not \"%s\"", flag, min, max, text));
  }
  return static_cast<unsigned>(v);
}

double parse_seconds(const char *flag, const char *text) {
  char *end = nullptr;
  errno = 0;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !(v >= 0.05 && v <= 60)) {
    usage_error(format("%s must be a number of seconds from 0.05 to 60, not \"%s\"", flag, text));
  }
  return v;
}

bool is_uuid(const std::string &s) {
  // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi prints it
  if (s.size() != 40 || strncasecmp(s.c_str(), "GPU-", 4) != 0) return false;
  for (size_t i = 4; i < s.size(); ++i) {
    const bool dash = i == 12 || i == 17 || i == 22 || i == 27;
    if (dash ? s[i] != '-' : !isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

int self_test();

bool parse_seed(const char *text, uint8_t out[32]) {
  if (strlen(text) != 64) return false;
  for (int i = 0; i < 32; ++i) {
    unsigned byte = 0;
    for (int j = 0; j < 2; ++j) {
      const char ch = text[2 * i + j];
      if (!isxdigit(static_cast<unsigned char>(ch))) return false;
      byte = byte * 16 + static_cast<unsigned>(isdigit(static_cast<unsigned char>(ch)) ? ch - '0' : (tolower(ch) - 'a' + 10));
    }
    out[i] = static_cast<uint8_t>(byte);
  }
  return true;
}

std::string hex_of(const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

Options parse_args(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) usage_error(format("%s needs a value", flag));
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      print_help();
      exit(kOk);
    } else if (arg == "--version") {
      print_version();
      exit(kOk);
    } else if (arg == "--self-test") {
      exit(self_test());
    } else if (arg == "--json-only") {
      g_progress = false;
    } else if (arg == "--gpus") {
      const std::string list = value("--gpus");
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        const bool index = !item.empty() && item.size() <= 4 && item.find_first_not_of("0123456789") == std::string::npos;
        if (!index && !is_uuid(item)) {
          usage_error(format("--gpus takes GPU indexes or UUIDs (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) separated by commas, not \"%s\"", item.c_str()));
        }
        o.gpus.push_back(item);
        start = comma + 1;
      }
    } else if (arg == "--matmul-size") {
      o.matmul_size = parse_unsigned("--matmul-size", value("--matmul-size"), GB_SIZE_MULTIPLE, 32768);
      if (o.matmul_size % GB_SIZE_MULTIPLE != 0) usage_error(format("--matmul-size must be a multiple of %u, not %u", GB_SIZE_MULTIPLE, o.matmul_size));
    } else if (arg == "--seconds") {
      o.seconds = parse_seconds("--seconds", value("--seconds"));
    } else if (arg == "--copy-mib") {
      o.copy_mib = parse_unsigned("--copy-mib", value("--copy-mib"), 64, 65536);
    } else if (arg == "--transfer-mib") {
      o.transfer_mib = parse_unsigned("--transfer-mib", value("--transfer-mib"), 16, 16384);
    } else if (arg == "--challenge") {
      o.challenge.on = true;
    } else if (arg == "--m" || arg == "--n" || arg == "--k") {
      const unsigned v = parse_unsigned(arg.c_str(), value(arg.c_str()), 256, arg == "--m" ? (1u << 20) : 16384u);
      if ((v & (v - 1)) != 0) usage_error(format("%s must be a power of two, not %u", arg.c_str(), v));
      (arg == "--m" ? o.challenge.m : arg == "--n" ? o.challenge.n : o.challenge.k) = v;
    } else if (arg == "--rounds") {
      o.challenge.rounds = parse_unsigned("--rounds", value("--rounds"), 1, 1000000);
    } else if (arg == "--pre-seed") {
      if (!parse_seed(value("--pre-seed"), o.challenge.pre_seed)) usage_error(format("--pre-seed must be 64 hex digits, not \"%s\"", argv[i]));
      o.challenge.has_pre_seed = true;
    } else {
      usage_error(format("unknown argument \"%s\"", arg.c_str()));
    }
  }
  if (o.challenge.on) {
    const ChallengeOptions &c = o.challenge;
    for (const auto &[flag, set] : {std::pair<const char *, bool>{"--m", c.m != 0}, {"--n", c.n != 0}, {"--k", c.k != 0}, {"--rounds", c.rounds != 0}, {"--pre-seed", c.has_pre_seed}}) {
      if (!set) usage_error(format("--challenge needs %s", flag));
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// The result check: the host recomputes the inputs (shared.h) and the products in double.

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

struct Dtype {
  const char *name;
  bool bf16;
  const char *kernel;
  // Relative error of rounding the fp32 sum to the output format (half an ulp), doubled.
  double rounding;
};
const Dtype kFp16{"fp16", false, "gb_gemm_fp16", std::ldexp(1.0, -10)};
const Dtype kBf16{"bf16", true, "gb_gemm_bf16", std::ldexp(1.0, -7)};

float input_value(const Dtype &t, uint64_t i, uint32_t seed) {
  return t.bf16 ? bf16_to_float(gb_pattern_bf16(i, seed)) : half_to_float(gb_pattern_fp16(i, seed));
}

// The inputs of `rows` rows of K elements, as the GPU's fill kernel writes them.
std::vector<float> inputs(const Dtype &t, unsigned rows, unsigned K, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(rows) * K);
  for (size_t i = 0; i < v.size(); ++i) v[i] = input_value(t, i, seed);
  return v;
}

// sum_k a[k] * b[k] in double: C[i][j] from row i of A and row j of B (B is stored N x K).
double dot(const float *a, const float *b, unsigned K) {
  double sum = 0;
  for (unsigned k = 0; k < K; ++k) sum += static_cast<double>(a[k]) * b[k];
  return sum;
}

// C[i][j] of the inputs of seeds seed_a and seed_b, without computing the whole inputs.
double reference(const Dtype &t, unsigned K, uint32_t seed_a, uint32_t seed_b, unsigned i, unsigned j) {
  std::vector<float> a(K), b(K);
  for (unsigned k = 0; k < K; ++k) {
    a[k] = input_value(t, static_cast<uint64_t>(i) * K + k, seed_a);
    b[k] = input_value(t, static_cast<uint64_t>(j) * K + k, seed_b);
  }
  return dot(a.data(), b.data(), K);
}

// An fp32 sum of K products of values below 1 in magnitude is off by at most about K * 2^-24
// each way; the output format rounds by `rounding` relative. A wrong layout or a lost k-tile
// is off by the size of the products themselves (about sqrt(K) / 2), far above this.
bool close_enough(const Dtype &t, unsigned K, double got, double want) {
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= t.rounding * std::fabs(want) + K * std::ldexp(1.0, -20) + 1e-3;
}

// ---------------------------------------------------------------------------------------------
// One GPU

struct Gpu {
  int ordinal = 0;
  CUdevice dev = 0;
  std::string uuid, name, pci;
  int cc_major = 0, cc_minor = 0, sms = 0, threads_per_sm = 0, smem_optin = 0;
  size_t memory = 0;
};

std::string uuid_text(const CUuuid &u) {
  const auto *b = reinterpret_cast<const unsigned char *>(u.bytes);
  return format("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int attribute(CUdevice dev, CUdevice_attribute a, const char *what) {
  int v = 0;
  check(g_cu.cuDeviceGetAttribute(&v, a, dev), what);
  return v;
}

Gpu describe(int ordinal) {
  Gpu g;
  g.ordinal = ordinal;
  check(g_cu.cuDeviceGet(&g.dev, ordinal), "cuDeviceGet");
  char name[256] = {0};
  check(g_cu.cuDeviceGetName(name, sizeof name - 1, g.dev), "cuDeviceGetName");
  g.name = name;
  CUuuid uuid;
  check(g_cu.cuDeviceGetUuid(&uuid, g.dev), "cuDeviceGetUuid");
  g.uuid = uuid_text(uuid);
  char pci[64] = {0};
  if (g_cu.cuDeviceGetPCIBusId(pci, sizeof pci - 1, g.dev) == CUDA_SUCCESS) g.pci = pci;
  g.cc_major = attribute(g.dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  g.cc_minor = attribute(g.dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  g.sms = attribute(g.dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  g.threads_per_sm = attribute(g.dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per multiprocessor");
  g.smem_optin = attribute(g.dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory per block");
  check(g_cu.cuDeviceTotalMem(&g.memory, g.dev), "cuDeviceTotalMem");
  return g;
}

// Device memory freed when it goes out of scope.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  explicit DeviceBuffer(size_t bytes, const char *what) {
    const CUresult r = g_cu.cuMemAlloc(&ptr, bytes);
    if (r != CUDA_SUCCESS) throw Failure{kFailed, format("allocating %zu MiB of GPU memory for %s failed: %s", bytes >> 20, what, cu_error(r).c_str())};
  }
  ~DeviceBuffer() {
    if (ptr != 0) g_cu.cuMemFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

struct HostBuffer {
  void *ptr = nullptr;
  explicit HostBuffer(size_t bytes) {
    const CUresult r = g_cu.cuMemAllocHost(&ptr, bytes);
    if (r != CUDA_SUCCESS) throw Failure{kFailed, format("allocating %zu MiB of pinned host memory failed: %s", bytes >> 20, cu_error(r).c_str())};
  }
  ~HostBuffer() {
    if (ptr != nullptr) g_cu.cuMemFreeHost(ptr);
  }
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;
};

class Session {
 public:
  Session(const Gpu &gpu, const Options &options) : gpu_(gpu), options_(options) {
    check(g_cu.cuDevicePrimaryCtxRetain(&ctx_, gpu.dev), "cuDevicePrimaryCtxRetain");
    check(g_cu.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    if (g_cu.version >= kFatbinDriverVersion) load_fatbin();
    else load_compat_ptx();
    check(g_cu.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(g_cu.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
    check(g_cu.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~Session() {
    if (start_ != nullptr) g_cu.cuEventDestroy(start_);
    if (stop_ != nullptr) g_cu.cuEventDestroy(stop_);
    if (stream_ != nullptr) g_cu.cuStreamDestroy(stream_);
    if (module_ != nullptr) g_cu.cuModuleUnload(module_);
    g_cu.cuDevicePrimaryCtxRelease(gpu_.dev);
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Which code the GPU runs (the JSON line's gpuCode): "fatbin", or "compat-ptx-compute_NN".
  const std::string &code() const { return code_; }

  CUfunction function(const char *name) {
    CUfunction f = nullptr;
    check(g_cu.cuModuleGetFunction(&f, module_, name), name);
    return f;
  }

  void launch(CUfunction f, unsigned grid, unsigned block, unsigned smem, void **params, const char *what) {
    check(g_cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, smem, stream_, params, nullptr), what);
  }

  void sync(const char *what) { check(g_cu.cuStreamSynchronize(stream_), what); }

  void copy_to_device(CUdeviceptr dst, const void *src, size_t bytes) { check(g_cu.cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync"); }
  void copy_to_host(void *dst, CUdeviceptr src, size_t bytes) { check(g_cu.cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync"); }

  // Seconds the GPU took for `reps` repetitions of `enqueue`, by events on the stream.
  template <typename F>
  double timed(F &&enqueue, unsigned reps, const char *what) {
    check(g_cu.cuEventRecord(start_, stream_), "cuEventRecord");
    for (unsigned i = 0; i < reps; ++i) enqueue();
    check(g_cu.cuEventRecord(stop_, stream_), "cuEventRecord");
    check(g_cu.cuEventSynchronize(stop_), what);
    float ms = 0;
    check(g_cu.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
    if (!(ms > 0)) throw Failure{kFailed, format("%s: the GPU's timer measured %g ms", what, static_cast<double>(ms))};
    return ms / 1000.0;
  }

  // The rate (work per second) of `enqueue`: a warm-up of about a quarter of the measuring time
  // (clocks settle), then batches of about 50 ms for `options.seconds`; the median batch counts.
  template <typename F>
  double rate(F &&enqueue, double work_per_rep, const char *what) {
    enqueue();
    sync(what);
    const double one = timed(enqueue, 1, what);
    const unsigned reps = static_cast<unsigned>(std::clamp(std::ceil(0.05 / one), 1.0, 100000.0));
    for (double warm = 0; warm < options_.seconds / 4;) warm += timed(enqueue, reps, what);
    std::vector<double> rates;
    double spent = 0;
    while (spent < options_.seconds || rates.size() < 5) {
      const double t = timed(enqueue, reps, what);
      spent += t;
      rates.push_back(work_per_rep * reps / t);
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
  }

  const Gpu &gpu() const { return gpu_; }
  const Options &options() const { return options_; }
  void make_current() { check(g_cu.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }
  CUstream stream() const { return stream_; }

 private:
  void load_fatbin() {
    const CUresult r = g_cu.cuModuleLoadData(&module_, gpu_bench_fatbin);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_SOURCE) {
      throw Failure{kFailed, format("this gpu-bench has no GPU code for compute capability %d.%d (%s; it carries SASS for %s and PTX for %s)",
                                    gpu_.cc_major, gpu_.cc_minor, cu_error(r).c_str(), GB_SASS, GB_PTX)};
    }
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND) {
      throw Failure{kDriverTooOld, format("compute capability %d.%d has no SASS in this gpu-bench and the driver cannot compile its PTX (%s): upgrade the driver",
                                          gpu_.cc_major, gpu_.cc_minor, cu_error(r).c_str())};
    }
    check(r, "loading the GPU code (cuModuleLoadData)");
    code_ = "fatbin";
  }

  // A driver older than the toolkit's family: its JIT compiler compiles the compatibility PTX
  // of the newest architecture this GPU has (compute_80 brings the cp.async pipeline).
  void load_compat_ptx() {
    const bool ampere = gpu_.cc_major >= 8;
    const char *ptx = ampere ? gpu_bench_compat_ptx_80 : gpu_bench_compat_ptx_75;
    const char *arch = ampere ? "compute_80" : "compute_75";
    progress("GPU %d: the driver (CUDA %s) predates the CUDA %s toolkit's code; JIT-compiling the compatibility PTX for %s (ISA %s)",
             gpu_.ordinal, version_text(g_cu.version).c_str(), version_text(kFatbinDriverVersion).c_str(), arch, GB_COMPAT_PTX_ISA);
    char log[4096] = "";
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log))};
    const auto started = std::chrono::steady_clock::now();
    const CUresult r = g_cu.cuModuleLoadDataEx(&module_, ptx, 2, keys, values);
    log[sizeof log - 1] = '\0';
    const std::string detail = log[0] != '\0' ? format("; the JIT compiler said: %s", log) : std::string();
    if (r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND) {
      throw Failure{kDriverTooOld, format("the driver (CUDA %s) needs its JIT compiler for this gpu-bench's %s PTX and has none (%s): install the driver's "
                                          "libnvidia-ptxjitcompiler.so.1 (the NVIDIA Container Toolkit mounts it with the compute capability), or upgrade "
                                          "the driver to %s",
                                          version_text(g_cu.version).c_str(), arch, cu_error(r).c_str(), driver_needed_for(kFatbinDriverVersion))};
    }
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_INVALID_PTX) {
      throw Failure{kDriverTooOld, format("the driver (CUDA %s) cannot JIT-compile this gpu-bench's %s PTX (ISA %s): %s%s. Upgrade the driver to %s",
                                          version_text(g_cu.version).c_str(), arch, GB_COMPAT_PTX_ISA, cu_error(r).c_str(), detail.c_str(),
                                          driver_needed_for(kFatbinDriverVersion))};
    }
    if (r != CUDA_SUCCESS) throw Failure{kFailed, format("loading the %s PTX (cuModuleLoadDataEx) failed: %s%s", arch, cu_error(r).c_str(), detail.c_str())};
    progress("GPU %d: %s PTX compiled by the driver in %.1f s", gpu_.ordinal, arch,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    code_ = std::string("compat-ptx-") + arch;
  }

  const Gpu &gpu_;
  const Options &options_;
  std::string code_;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
};

unsigned stages_for(const Gpu &g) {
  // Turing's path double-buffers through registers: always two stages.
  if (g.cc_major < 8) return 2;
  return std::min<unsigned>(GB_MAX_STAGES, static_cast<unsigned>(g.smem_optin) / GB_STAGE_BYTES);
}

struct Matmul {
  Session &s;
  const Dtype &t;
  CUfunction fill, gemm;
  unsigned stages;

  Matmul(Session &session, const Dtype &dtype) : s(session), t(dtype) {
    fill = s.function("gb_fill16");
    gemm = s.function(t.kernel);
    stages = stages_for(s.gpu());
    if (stages < 2) throw Failure{kFailed, format("the GPU offers %d bytes of shared memory per block; the matmul needs %u", s.gpu().smem_optin, 2 * GB_STAGE_BYTES)};
    check(g_cu.cuFuncSetAttribute(gemm, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(stages * GB_STAGE_BYTES)), "setting the matmul's shared memory");
  }

  void fill_with(CUdeviceptr p, unsigned long long n, unsigned seed) {
    unsigned bf16 = t.bf16 ? 1u : 0u;
    void *params[] = {&p, &n, &seed, &bf16};
    s.launch(fill, static_cast<unsigned>(s.gpu().sms) * 8u, 256, 0, params, "filling the matmul's inputs");
  }

  void enqueue(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, unsigned m, unsigned n, unsigned k) {
    void *params[] = {&a, &b, &c, &m, &n, &k, &stages};
    s.launch(gemm, (m / GB_BM) * (n / GB_BN), GB_THREADS, stages * GB_STAGE_BYTES, params, "the matmul");
  }

  uint16_t element(CUdeviceptr c, unsigned n, unsigned i, unsigned j) {
    uint16_t v = 0;
    check(g_cu.cuMemcpyDtoH(&v, c + (static_cast<size_t>(i) * n + j) * 2, 2), "reading the matmul's result");
    return v;
  }

  double value(uint16_t bits) const { return t.bf16 ? bf16_to_float(bits) : half_to_float(bits); }

  [[noreturn]] void wrong(unsigned m, unsigned n, unsigned k, unsigned i, unsigned j, double got, double want, size_t bad, size_t checked) {
    throw Failure{kFailed, format("the %s matmul (%ux%ux%u) computed a wrong result on this GPU: %zu of %zu checked elements differ, "
                                  "the first C[%u][%u] = %.6g where %.6g was expected; no figure is reported for it",
                                  t.name, m, n, k, bad, checked, i, j, got, want)};
  }

  // A small product checked whole: each tile, each k-tile and the pipeline's wrap-around.
  void check_small() {
    const unsigned m = 2 * GB_BM, n = 2 * GB_BN, k = 16 * GB_BK;
    DeviceBuffer a(static_cast<size_t>(m) * k * 2, "the check"), b(static_cast<size_t>(n) * k * 2, "the check"), c(static_cast<size_t>(m) * n * 2, "the check");
    fill_with(a.ptr, static_cast<unsigned long long>(m) * k, 11);
    fill_with(b.ptr, static_cast<unsigned long long>(n) * k, 12);
    enqueue(a.ptr, b.ptr, c.ptr, m, n, k);
    s.sync("the check's matmul");
    std::vector<uint16_t> out(static_cast<size_t>(m) * n);
    check(g_cu.cuMemcpyDtoH(out.data(), c.ptr, out.size() * 2), "reading the check's result");
    const std::vector<float> ha = inputs(t, m, k, 11), hb = inputs(t, n, k, 12);
    size_t bad = 0;
    unsigned bi = 0, bj = 0;
    double bgot = 0, bwant = 0;
    for (unsigned i = 0; i < m; ++i) {
      for (unsigned j = 0; j < n; ++j) {
        const double want = dot(&ha[static_cast<size_t>(i) * k], &hb[static_cast<size_t>(j) * k], k), got = value(out[static_cast<size_t>(i) * n + j]);
        if (!close_enough(t, k, got, want) && bad++ == 0) bi = i, bj = j, bgot = got, bwant = want;
      }
    }
    if (bad > 0) wrong(m, n, k, bi, bj, bgot, bwant, bad, out.size());
  }

  // The timed product, then 256 of its elements (the four corners among them) checked.
  double measure() {
    const unsigned size = s.options().matmul_size;
    const size_t bytes = static_cast<size_t>(size) * size * 2;
    DeviceBuffer a(bytes, "the matmul"), b(bytes, "the matmul"), c(bytes, "the matmul");
    fill_with(a.ptr, static_cast<unsigned long long>(size) * size, 21);
    fill_with(b.ptr, static_cast<unsigned long long>(size) * size, 22);
    const double flops = 2.0 * size * size * static_cast<double>(size);
    const double per_second = s.rate([&] { enqueue(a.ptr, b.ptr, c.ptr, size, size, size); }, flops, "the matmul");
    size_t bad = 0;
    unsigned bi = 0, bj = 0;
    double bgot = 0, bwant = 0;
    const unsigned samples = 256;
    for (unsigned x = 0; x < samples; ++x) {
      unsigned i = gb_hash(x, 31) % size, j = gb_hash(x, 32) % size;
      if (x < 4) i = (x & 1u) ? size - 1 : 0, j = (x & 2u) ? size - 1 : 0;
      const double want = reference(t, size, 21, 22, i, j), got = value(element(c.ptr, size, i, j));
      if (!close_enough(t, size, got, want) && bad++ == 0) bi = i, bj = j, bgot = got, bwant = want;
    }
    if (bad > 0) wrong(size, size, size, bi, bj, bgot, bwant, bad, samples);
    return per_second / 1e9;
  }
};

double measure_fp32(Session &s) {
  CUfunction f = s.function("gb_fma");
  const Gpu &g = s.gpu();
  const unsigned block = 256, grid = static_cast<unsigned>(g.sms) * std::max(1u, static_cast<unsigned>(g.threads_per_sm) / block);
  DeviceBuffer out(static_cast<size_t>(grid) * block * 4, "the FP32 check");
  unsigned iterations = 4096;
  float b = 0.999999f, c = 1e-6f;
  void *params[] = {&out.ptr, &iterations, &b, &c};
  const double flops = 2.0 * 16 * 8 * static_cast<double>(iterations) * grid * block;
  return s.rate([&] { s.launch(f, grid, block, 0, params, "the FP32 kernel"); }, flops, "the FP32 kernel") / 1e9;
}

double measure_memory(Session &s) {
  size_t free_bytes = 0, total = 0;
  check(g_cu.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  size_t bytes = std::min<size_t>(static_cast<size_t>(s.options().copy_mib) << 20, free_bytes / 4);
  bytes &= ~static_cast<size_t>((1u << 20) - 1);
  if (bytes < (64u << 20)) throw Failure{kFailed, format("only %zu MiB of GPU memory is free: the copy needs 2 x 64 MiB at least", free_bytes >> 20)};
  DeviceBuffer src(bytes, "the copy"), dst(bytes, "the copy");
  CUfunction f = s.function("gb_copy");
  const Gpu &g = s.gpu();
  const unsigned block = 256, grid = static_cast<unsigned>(g.sms) * std::max(1u, static_cast<unsigned>(g.threads_per_sm) / block);
  unsigned long long words = bytes / 16;
  void *params[] = {&src.ptr, &dst.ptr, &words};
  // Bytes read plus bytes written, as a device-to-device copy is counted elsewhere (PyTorch, nvbandwidth).
  return s.rate([&] { s.launch(f, grid, block, 0, params, "the copy kernel"); }, 2.0 * static_cast<double>(bytes), "the copy kernel") / 1e6;
}

void measure_transfers(Session &s, double *to_device, double *to_host) {
  const size_t bytes = static_cast<size_t>(s.options().transfer_mib) << 20;
  HostBuffer host(bytes);
  memset(host.ptr, 0x5a, bytes);
  DeviceBuffer dev(bytes, "the bus transfers");
  *to_device = s.rate([&] { s.copy_to_device(dev.ptr, host.ptr, bytes); }, static_cast<double>(bytes), "the host-to-device copy") / 1e6;
  *to_host = s.rate([&] { s.copy_to_host(host.ptr, dev.ptr, bytes); }, static_cast<double>(bytes), "the device-to-host copy") / 1e6;
}


std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (const unsigned char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += static_cast<char>(ch);
    else if (ch < 0x20) out += format("\\u%04x", ch);
    else out += static_cast<char>(ch);
  }
  return out + "\"";
}

std::string json_number(double v) { return format("%.1f", v); }

struct Figures {
  double fp16 = 0, bf16 = -1, fp32 = 0, memory = 0, to_device = 0, to_host = 0;
};

// The JSON line of one GPU (docs/gpu-benchmark.md): `matmulGflops` is the FP16 figure, which
// every architecture from 7.5 has; `bf16MatmulGflops` is null below 8.0.
std::string json_line(const Gpu &g, const Options &o, const Figures &f, const std::string &code) {
  std::string line = "{";
  line += "\"uuid\":" + json_string(g.uuid);
  line += ",\"index\":" + format("%d", g.ordinal);
  line += ",\"name\":" + json_string(g.name);
  line += ",\"computeCapability\":" + json_string(format("%d.%d", g.cc_major, g.cc_minor));
  line += ",\"pciBusId\":" + (g.pci.empty() ? std::string("null") : json_string(g.pci));
  line += ",\"memoryBytes\":" + format("%zu", g.memory);
  line += ",\"multiprocessors\":" + format("%d", g.sms);
  line += ",\"driverCudaVersion\":" + json_string(version_text(g_cu.version));
  line += ",\"program\":" + json_string(format("gpu-bench %s", GB_VERSION));
  line += ",\"gpuCode\":" + json_string(code);
  line += ",\"matmulSize\":" + format("%u", o.matmul_size);
  line += ",\"matmulGflops\":" + json_number(f.fp16);
  line += ",\"fp16MatmulGflops\":" + json_number(f.fp16);
  line += ",\"bf16MatmulGflops\":" + (f.bf16 < 0 ? std::string("null") : json_number(f.bf16));
  line += ",\"fp32Gflops\":" + json_number(f.fp32);
  line += ",\"memoryBandwidthMbps\":" + json_number(f.memory);
  line += ",\"hostToDeviceMbps\":" + json_number(f.to_device);
  line += ",\"deviceToHostMbps\":" + json_number(f.to_host);
  return line + "}";
}

std::string measure_gpu(const Gpu &g, const Options &o) {
  if (g.cc_major * 10 + g.cc_minor < 75) {
    throw Failure{kFailed, format("compute capability %d.%d is older than 7.5, the oldest that CUDA 13 builds for: not measured", g.cc_major, g.cc_minor)};
  }
  const unsigned n = o.matmul_size;
  Session s(g, o);
  Figures f;
  {
    Matmul fp16(s, kFp16);
    fp16.check_small();
    progress("GPU %d: fp16 matmul checked against the CPU (%u stages of shared memory)", g.ordinal, fp16.stages);
    f.fp16 = fp16.measure();
    progress("GPU %d: fp16 matmul %ux%ux%u: %.1f GFLOPS (256 elements checked)", g.ordinal, n, n, n, f.fp16);
  }
  if (g.cc_major >= 8) {
    Matmul bf16(s, kBf16);
    bf16.check_small();
    f.bf16 = bf16.measure();
    progress("GPU %d: bf16 matmul %ux%ux%u: %.1f GFLOPS (checked)", g.ordinal, n, n, n, f.bf16);
  } else {
    progress("GPU %d: no bf16 tensor cores before compute capability 8.0: bf16MatmulGflops is null", g.ordinal);
  }
  f.fp32 = measure_fp32(s);
  progress("GPU %d: fp32 FMA: %.1f GFLOPS", g.ordinal, f.fp32);
  f.memory = measure_memory(s);
  progress("GPU %d: device memory copy: %.1f MB/s (read + written)", g.ordinal, f.memory);
  measure_transfers(s, &f.to_device, &f.to_host);
  progress("GPU %d: host to device %.1f MB/s, device to host %.1f MB/s (pinned, %u MiB)", g.ordinal, f.to_device, f.to_host, o.transfer_mib);
  return json_line(g, o, f, s.code());
}

// ---------------------------------------------------------------------------------------------
// --challenge: the GPU challenge (challenge.h; the protocol is in docs/decisions.md, "GPU proof").
// One chain per GPU, kept whole on the GPU (each round's seed is made there from the previous
// root), so the host enqueues every round of every GPU without waiting on any.

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
unsigned grid_for(size_t items) { return static_cast<unsigned>(std::min<size_t>(ceil_div(items, 256), 65535)); }

class ChallengeChain {
 public:
  ChallengeChain(const Gpu &gpu, const Options &o)
      : s_(gpu, o),
        c_(o.challenge),
        a_(size_t(c_.m) * c_.k, "A"),
        bt_(size_t(c_.n) * c_.k, "B"),
        product_(size_t(c_.m) * c_.n * 4, "C"),
        chunks_(size_t(c_.m) * (c_.n / GB_CHALLENGE_CHUNK_INT32) * 32, "the chunk hashes"),
        tree_(size_t(2) * c_.m * 32, "the Merkle tree"),
        seeds_(size_t(c_.rounds + 1) * 32, "the seeds"),
        roots_(size_t(c_.rounds + 1) * 32, "the roots"),
        fill_(s_.function("gb_ch_fill")),
        gemm_(s_.function("gb_ch_gemm")),
        hash_chunks_(s_.function("gb_ch_chunks")),
        leaves_(s_.function("gb_ch_leaves")),
        level_(s_.function("gb_ch_level")),
        next_(s_.function("gb_ch_next")) {
    check(g_cu.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
    check(g_cu.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
    // B, fixed for the challenge: made now, before the go.
    uint8_t bseed[32];
    gb_challenge_seed_for("b", c_.pre_seed, gpu.uuid.c_str(), bseed);
    s_.copy_to_device(seeds_.ptr, bseed, 32);
    fill(bt_.ptr, size_t(c_.n) * c_.k, seeds_.ptr);
    s_.sync("making B");
  }
  ~ChallengeChain() {
    if (start_ != nullptr) g_cu.cuEventDestroy(start_);
    if (stop_ != nullptr) g_cu.cuEventDestroy(stop_);
  }
  ChallengeChain(const ChallengeChain &) = delete;
  ChallengeChain &operator=(const ChallengeChain &) = delete;

  const Gpu &gpu() const { return s_.gpu(); }
  void make_current() { s_.make_current(); }

  void start(const uint8_t go[32]) {
    uint8_t seed[32];
    gb_challenge_seed_for("gpu", go, gpu().uuid.c_str(), seed);
    s_.copy_to_device(seeds_.ptr, seed, 32);
    s_.sync("the first seed");
    check(g_cu.cuEventRecord(start_, s_.stream()), "cuEventRecord");
  }

  // Round r of the chain: its root into roots[r], the next round's seed into seeds[r + 1].
  void enqueue_round(unsigned r) {
    const CUdeviceptr seed = seeds_.ptr + 32ull * r, root = roots_.ptr + 32ull * r, next = seed + 32;
    enqueue_tree(seed, root);
    void *params[] = {const_cast<CUdeviceptr *>(&seed), const_cast<CUdeviceptr *>(&root), const_cast<CUdeviceptr *>(&next)};
    s_.launch(next_, 1, 1, 0, params, "gb_ch_next");
  }

  void finish() { check(g_cu.cuEventRecord(stop_, s_.stream()), "cuEventRecord"); }

  // The chain's GPU time and its roots (waits for the GPU).
  double seconds() {
    check(g_cu.cuEventSynchronize(stop_), "the challenge's rounds");
    float ms = 0;
    check(g_cu.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
    return ms / 1000.0;
  }
  std::vector<uint8_t> roots() {
    std::vector<uint8_t> out(size_t(c_.rounds) * 32);
    check(g_cu.cuMemcpyDtoH(out.data(), roots_.ptr, out.size()), "copying the roots");
    return out;
  }

  // Round r again, whole, and the Merkle path of each of `rows`: siblings from the leaf up.
  std::vector<std::string> paths(unsigned r, const std::vector<unsigned> &rows, const uint8_t committed[32]) {
    const CUdeviceptr scratch = roots_.ptr + 32ull * c_.rounds;
    enqueue_tree(seeds_.ptr + 32ull * r, scratch);
    std::vector<uint8_t> tree(size_t(2) * c_.m * 32 - 64), root(32);
    s_.copy_to_host(tree.data(), tree_.ptr, tree.size());
    s_.copy_to_host(root.data(), scratch, 32);
    s_.sync("recomputing a round");
    if (memcmp(root.data(), committed, 32) != 0) {
      throw Failure{kFailed, format("round %u computed again gives another root (%s, committed %s): this GPU does not compute the same product twice; "
                                    "check it (nvidia-smi -q: ECC errors, retired pages, XID errors) before it is offered",
                                    r, hex_of(root.data(), 32).c_str(), hex_of(committed, 32).c_str())};
    }
    std::vector<std::string> out;
    for (unsigned row : rows) {
      std::string path;
      size_t offset = 0;
      for (unsigned count = c_.m, i = row; count > 1; offset += count, count /= 2, i /= 2) path += hex_of(&tree[(offset + (i ^ 1u)) * 32], 32);
      out.push_back(path);
    }
    return out;
  }

 private:
  void fill(CUdeviceptr out, size_t elements, CUdeviceptr seed) {
    unsigned long long groups = elements / 4;
    void *params[] = {&out, &groups, &seed};
    s_.launch(fill_, grid_for(groups), 256, 0, params, "gb_ch_fill");
  }

  // A from `seed`, C = A Bt^T, C's chunk hashes, leaves and tree; the tree's root into `root`.
  void enqueue_tree(CUdeviceptr seed, CUdeviceptr root) {
    fill(a_.ptr, size_t(c_.m) * c_.k, seed);
    unsigned m = c_.m, n = c_.n, k = c_.k;
    void *gemm[] = {&a_.ptr, &bt_.ptr, &product_.ptr, &m, &n, &k};
    s_.launch(gemm_, (m / GB_CH_BM) * (n / GB_CH_BN), GB_CH_THREADS, 0, gemm, "gb_ch_gemm");
    unsigned long long chunks = (unsigned long long)m * n / GB_CHALLENGE_CHUNK_INT32;
    void *hash[] = {&product_.ptr, &chunks_.ptr, &chunks};
    s_.launch(hash_chunks_, grid_for(chunks), 256, 0, hash, "gb_ch_chunks");
    unsigned per_row = n / GB_CHALLENGE_CHUNK_INT32;
    void *leaves[] = {&chunks_.ptr, &tree_.ptr, &m, &per_row};
    s_.launch(leaves_, grid_for(m), 256, 0, leaves, "gb_ch_leaves");
    size_t offset = 0;
    for (unsigned count = m; count > 1; offset += count, count /= 2) {
      CUdeviceptr below = tree_.ptr + offset * 32, above = count == 2 ? root : tree_.ptr + (offset + count) * 32;
      unsigned half = count / 2;
      void *level[] = {&below, &above, &half};
      s_.launch(level_, grid_for(half), 256, 0, level, "gb_ch_level");
    }
  }

  Session s_;
  const ChallengeOptions &c_;
  DeviceBuffer a_, bt_, product_, chunks_, tree_, seeds_, roots_;
  CUfunction fill_, gemm_, hash_chunks_, leaves_, level_, next_;
  CUevent start_ = nullptr, stop_ = nullptr;
};

// Device memory one GPU's chain needs: A, B, C, the chunk hashes, the tree, seeds and roots.
size_t challenge_bytes(const ChallengeOptions &c) {
  return size_t(c.m) * c.k + size_t(c.n) * c.k + size_t(c.m) * c.n * 4 + size_t(c.m) * (c.n / GB_CHALLENGE_CHUNK_INT32) * 32 + size_t(2) * c.m * 32 +
         size_t(2) * (c.rounds + 1) * 32;
}

bool read_line(std::string &line) {
  line.clear();
  for (int ch = getchar(); ch != EOF; ch = getchar()) {
    if (ch == '\n') return true;
    line.push_back(static_cast<char>(ch));
    if (line.size() > (1u << 24)) return false;
  }
  return !line.empty();
}

int run_challenge(const std::vector<const Gpu *> &chosen, const Options &o) {
  const ChallengeOptions &c = o.challenge;
  std::vector<std::unique_ptr<ChallengeChain>> chains;
  try {
    for (const Gpu *g : chosen) {
      if (g->cc_major * 10 + g->cc_minor < 75) {
        throw Failure{kFailed, format("GPU %d (%s): compute capability %d.%d is older than 7.5, the oldest that CUDA 13 builds for", g->ordinal, g->uuid.c_str(), g->cc_major, g->cc_minor)};
      }
      progress("GPU %d: %s (%s): setting up a %u x %u x %u int8 challenge of %u rounds (%.2f GiB of GPU memory)", g->ordinal, g->name.c_str(), g->uuid.c_str(), c.m,
               c.n, c.k, c.rounds, static_cast<double>(challenge_bytes(c)) / (1u << 30));
      chains.push_back(std::make_unique<ChallengeChain>(*g, o));
    }
  } catch (const Failure &f) {
    fprintf(stderr, "gpu-bench: %s\n", f.message.c_str());
    return f.code;
  }
  std::string gpus;
  for (const auto &chain : chains) gpus += format("%s{\"uuid\":%s,\"index\":%d}", gpus.empty() ? "" : ",", json_string(chain->gpu().uuid).c_str(), chain->gpu().ordinal);
  printf("{\"ready\":true,\"program\":\"gpu-bench %s\",\"gpus\":[%s]}\n", GB_VERSION, gpus.c_str());
  fflush(stdout);

  std::string line;
  uint8_t go[32];
  if (!read_line(line) || line.rfind("go ", 0) != 0 || !parse_seed(line.c_str() + 3, go)) {
    fprintf(stderr, "gpu-bench: expected \"go\" and 64 hex digits on stdin, got \"%.80s\"\n", line.c_str());
    return kBadArgs;
  }
  try {
    for (auto &chain : chains) {
      chain->make_current();
      chain->start(go);
    }
    for (unsigned r = 0; r < c.rounds; ++r) {
      for (auto &chain : chains) {
        chain->make_current();
        chain->enqueue_round(r);
      }
    }
    for (auto &chain : chains) {
      chain->make_current();
      chain->finish();
    }
    std::string commit;
    std::vector<std::vector<uint8_t>> roots;
    for (auto &chain : chains) {
      chain->make_current();
      const double seconds = chain->seconds();
      roots.push_back(chain->roots());
      progress("GPU %d: %u rounds in %.3f s of GPU time", chain->gpu().ordinal, c.rounds, seconds);
      commit += format("%s{\"uuid\":%s,\"roots\":\"%s\",\"gpuSeconds\":%.6f}", commit.empty() ? "" : ",", json_string(chain->gpu().uuid).c_str(),
                       hex_of(roots.back().data(), roots.back().size()).c_str(), seconds);
    }
    printf("{\"commit\":[%s]}\n", commit.c_str());
    fflush(stdout);

    if (!read_line(line) || line.rfind("open", 0) != 0) {
      fprintf(stderr, "gpu-bench: expected \"open UUID:ROUND:ROW ...\" on stdin, got \"%.80s\"\n", line.c_str());
      return kBadArgs;
    }
    // The requested rows by GPU and round, in the order asked.
    struct Request {
      size_t chain;
      unsigned round, row;
    };
    std::vector<Request> requests;
    for (size_t at = 4; at < line.size();) {
      const size_t end = std::min(line.find(' ', at + 1), line.size());
      const std::string item = line.substr(at + 1, end - at - 1);
      at = end;
      if (item.empty()) continue;
      const size_t colon = item.find(':'), colon2 = item.find(':', colon + 1);
      size_t which = chains.size();
      for (size_t i = 0; i < chains.size(); ++i) {
        if (colon != std::string::npos && strcasecmp(item.substr(0, colon).c_str(), chains[i]->gpu().uuid.c_str()) == 0) which = i;
      }
      char *e1 = nullptr, *e2 = nullptr;
      const std::string round_text = colon2 == std::string::npos ? "" : item.substr(colon + 1, colon2 - colon - 1);
      const std::string row_text = colon2 == std::string::npos ? "" : item.substr(colon2 + 1);
      const unsigned long round = strtoul(round_text.c_str(), &e1, 10), row = strtoul(row_text.c_str(), &e2, 10);
      if (which == chains.size() || round_text.empty() || row_text.empty() || *e1 != '\0' || *e2 != '\0' || round >= c.rounds || row >= c.m) {
        fprintf(stderr, "gpu-bench: cannot open \"%s\": give UUID:ROUND:ROW of a GPU of this challenge, a round below %u and a row below %u\n", item.c_str(),
                c.rounds, c.m);
        return kBadArgs;
      }
      requests.push_back({which, static_cast<unsigned>(round), static_cast<unsigned>(row)});
    }
    std::vector<std::string> paths(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      if (!paths[i].empty()) continue;
      std::vector<size_t> same;
      std::vector<unsigned> rows;
      for (size_t j = i; j < requests.size(); ++j) {
        if (requests[j].chain == requests[i].chain && requests[j].round == requests[i].round) {
          same.push_back(j);
          rows.push_back(requests[j].row);
        }
      }
      ChallengeChain &chain = *chains[requests[i].chain];
      chain.make_current();
      const std::vector<std::string> found = chain.paths(requests[i].round, rows, &roots[requests[i].chain][size_t(requests[i].round) * 32]);
      for (size_t j = 0; j < same.size(); ++j) paths[same[j]] = found[j];
    }
    std::string openings;
    for (size_t i = 0; i < requests.size(); ++i) {
      openings += format("%s{\"uuid\":%s,\"round\":%u,\"row\":%u,\"path\":\"%s\"}", openings.empty() ? "" : ",",
                         json_string(chains[requests[i].chain]->gpu().uuid).c_str(), requests[i].round, requests[i].row, paths[i].c_str());
    }
    printf("{\"openings\":[%s]}\n", openings.c_str());
    fflush(stdout);
  } catch (const Failure &f) {
    fprintf(stderr, "gpu-bench: %s\n", f.message.c_str());
    return f.code;
  }
  return kOk;
}

// ---------------------------------------------------------------------------------------------
// --self-test: the tiling's index math (shared.h) and the result check, on the CPU.

int self_test() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string &what) {
    if (!ok) {
      fprintf(stderr, "gpu-bench: self-test failed: %s\n", what.c_str());
      ++failures;
    }
  };
  // Every block computes a tile, and every tile exactly once, whatever the shape.
  const unsigned shapes[][2] = {{1, 1}, {2, 2}, {8, 4}, {9, 3}, {17, 5}, {64, 32}, {256, 128}};
  for (const auto &shape : shapes) {
    const unsigned tiles_m = shape[0], tiles_n = shape[1];
    std::vector<int> seen(static_cast<size_t>(tiles_m) * tiles_n, 0);
    bool in_range = true;
    for (unsigned pid = 0; pid < tiles_m * tiles_n; ++pid) {
      unsigned tm = 0, tn = 0;
      gb_tile_of(pid, tiles_m, tiles_n, &tm, &tn);
      if (tm >= tiles_m || tn >= tiles_n) in_range = false;
      else seen[static_cast<size_t>(tm) * tiles_n + tn]++;
    }
    expect(in_range && std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }), format("tile order %ux%u covers each tile once", tiles_m, tiles_n));
  }
  // The copies of a stage cover the A and B tiles, each 16-byte chunk once.
  for (const unsigned rows : {GB_BM, GB_BN}) {
    const unsigned per_thread = rows * 4u / GB_THREADS;
    std::vector<int> seen(static_cast<size_t>(rows) * GB_BK, 0);
    for (unsigned t = 0; t < GB_THREADS; ++t)
      for (unsigned i = 0; i < per_thread; ++i) {
        const unsigned c = t + i * GB_THREADS;
        for (unsigned e = 0; e < 8; ++e) seen[gb_chunk_row(c) * GB_BK + gb_chunk_col(c) + e]++;
      }
    expect(std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; }), format("the copies cover a %u-row tile once", rows));
  }
  // The warps' 4 x 4 fragments cover the block's tile once; the epilogue's lanes a fragment once.
  {
    std::vector<int> seen(static_cast<size_t>(GB_BM) * GB_BN, 0);
    for (unsigned w = 0; w < GB_THREADS / 32; ++w)
      for (unsigned i = 0; i < 4; ++i)
        for (unsigned j = 0; j < 4; ++j)
          for (unsigned r = 0; r < 16; ++r)
            for (unsigned c = 0; c < 16; ++c) seen[(gb_warp_row(w) + i * 16 + r) * GB_BN + gb_warp_col(w) + j * 16 + c]++;
    expect(std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; }), "the warps cover the block's tile once");
    std::vector<int> lanes(256, 0);
    for (unsigned lane = 0; lane < 32; ++lane)
      for (unsigned e = 0; e < 8; ++e) lanes[gb_epi_row(lane) * 16 + gb_epi_col(lane) + e]++;
    expect(std::all_of(lanes.begin(), lanes.end(), [](int x) { return x == 1; }), "the epilogue's lanes cover a fragment once");
  }
  // The kernel's data flow, replayed on the CPU with its own index math: global to the stage
  // (chunks, GB_LDS rows), fragments out of the stage as WMMA reads them (A row-major, B
  // column-major, leading dimension GB_LDS), the epilogue's lanes back to C.
  for (const Dtype *t : {&kFp16, &kBf16}) {
    const unsigned M = 2 * GB_BM, N = 2 * GB_BN, K = 4 * GB_BK;
    const std::vector<float> A = inputs(*t, M, K, 1), B = inputs(*t, N, K, 2);
    std::vector<float> C(static_cast<size_t>(M) * N, NAN);
    std::vector<float> stage(GB_STAGE_ELEMS);
    for (unsigned pid = 0; pid < (M / GB_BM) * (N / GB_BN); ++pid) {
      unsigned tm = 0, tn = 0;
      gb_tile_of(pid, M / GB_BM, N / GB_BN, &tm, &tn);
      std::vector<double> acc(static_cast<size_t>(GB_BM) * GB_BN, 0.0);
      for (unsigned kt = 0; kt < K / GB_BK; ++kt) {
        for (unsigned tid = 0; tid < GB_THREADS; ++tid) {
          for (unsigned i = 0; i < GB_A_CHUNKS_PER_THREAD; ++i) {
            const unsigned c = tid + i * GB_THREADS;
            for (unsigned e = 0; e < 8; ++e)
              stage[gb_chunk_row(c) * GB_LDS + gb_chunk_col(c) + e] = A[(static_cast<size_t>(tm) * GB_BM + gb_chunk_row(c)) * K + kt * GB_BK + gb_chunk_col(c) + e];
          }
          for (unsigned i = 0; i < GB_B_CHUNKS_PER_THREAD; ++i) {
            const unsigned c = tid + i * GB_THREADS;
            for (unsigned e = 0; e < 8; ++e)
              stage[GB_BM * GB_LDS + gb_chunk_row(c) * GB_LDS + gb_chunk_col(c) + e] = B[(static_cast<size_t>(tn) * GB_BN + gb_chunk_row(c)) * K + kt * GB_BK + gb_chunk_col(c) + e];
          }
        }
        for (unsigned w = 0; w < GB_THREADS / 32; ++w) {
          const float *sa = stage.data() + gb_warp_row(w) * GB_LDS;
          const float *sb = stage.data() + GB_BM * GB_LDS + gb_warp_col(w) * GB_LDS;
          for (unsigned kk = 0; kk < GB_BK; kk += 16)
            for (unsigned i = 0; i < 4; ++i)
              for (unsigned j = 0; j < 4; ++j)
                for (unsigned r = 0; r < 16; ++r)
                  for (unsigned c = 0; c < 16; ++c)
                    for (unsigned x = 0; x < 16; ++x) {
                      // a(r, x) at sa[(i*16 + r) * ld + kk + x]; b(x, c) at sb[(j*16 + c) * ld + kk + x]
                      acc[(gb_warp_row(w) + i * 16 + r) * GB_BN + gb_warp_col(w) + j * 16 + c] +=
                          static_cast<double>(sa[(i * 16 + r) * GB_LDS + kk + x]) * sb[(j * 16 + c) * GB_LDS + kk + x];
                    }
        }
      }
      for (unsigned w = 0; w < GB_THREADS / 32; ++w)
        for (unsigned i = 0; i < 4; ++i)
          for (unsigned j = 0; j < 4; ++j)
            for (unsigned lane = 0; lane < 32; ++lane)
              for (unsigned e = 0; e < 8; ++e) {
                const unsigned r = gb_epi_row(lane), c = gb_epi_col(lane) + e;
                C[(static_cast<size_t>(tm) * GB_BM + gb_warp_row(w) + i * 16 + r) * N + tn * GB_BN + gb_warp_col(w) + j * 16 + c] =
                    static_cast<float>(acc[(gb_warp_row(w) + i * 16 + r) * GB_BN + gb_warp_col(w) + j * 16 + c]);
              }
    }
    size_t bad = 0;
    for (unsigned i = 0; i < M; ++i)
      for (unsigned j = 0; j < N; ++j)
        if (!close_enough(*t, K, C[static_cast<size_t>(i) * N + j], dot(&A[static_cast<size_t>(i) * K], &B[static_cast<size_t>(j) * K], K))) ++bad;
    expect(bad == 0, format("the %s matmul replayed on the CPU matches the reference (%zu of %u elements differ)", t->name, bad, M * N));
  }
  // Inputs lie in ±[0.5, 1); the check refuses a result off by one part in a thousand of the sum.
  for (const Dtype *t : {&kFp16, &kBf16}) {
    bool in_range = true;
    for (uint64_t i = 0; i < 100000; ++i) {
      const float v = std::fabs(input_value(*t, i, 7));
      in_range = in_range && v >= 0.5f && v < 1.0f;
    }
    expect(in_range, format("%s inputs lie in ±[0.5, 1)", t->name));
    const double want = reference(*t, 8192, 21, 22, 5, 9);
    expect(close_enough(*t, 8192, want, want), format("the %s check accepts the reference", t->name));
    expect(!close_enough(*t, 8192, want + 1.0 + std::fabs(want) / 32, want), format("the %s check refuses a wrong element", t->name));
    expect(!close_enough(*t, 8192, NAN, want), format("the %s check refuses NaN", t->name));
  }
  if (failures > 0) return kFailed;
  printf("gpu-bench: self-test passed (tile order, copies, fragments, epilogue, the kernel's data flow replayed on the CPU, the result check)\n");
  return kOk;
}

}  // namespace

int main(int argc, char **argv) {
  const Options options = parse_args(argc, argv);
  try {
    load_driver();
    init_driver();
  } catch (const Failure &f) {
    fprintf(stderr, "gpu-bench: %s\n", f.message.c_str());
    return f.code;
  }
  std::vector<Gpu> gpus;
  try {
    int count = 0;
    check(g_cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
    for (int i = 0; i < count; ++i) gpus.push_back(describe(i));
  } catch (const Failure &f) {
    fprintf(stderr, "gpu-bench: %s\n", f.message.c_str());
    return f.code;
  }
  if (gpus.empty()) {
    fprintf(stderr, "gpu-bench: the NVIDIA driver (%s, CUDA %s) sees no GPU\n", g_cu.path.c_str(), version_text(g_cu.version).c_str());
    return kNoGpu;
  }
  std::vector<const Gpu *> chosen;
  if (options.gpus.empty()) {
    for (const Gpu &g : gpus) chosen.push_back(&g);
  }
  for (const std::string &want : options.gpus) {
    const Gpu *found = nullptr;
    for (const Gpu &g : gpus) {
      if (want.rfind("GPU-", 0) == 0 || want.rfind("gpu-", 0) == 0 ? strcasecmp(want.c_str(), g.uuid.c_str()) == 0 : std::to_string(g.ordinal) == std::to_string(atoi(want.c_str()))) found = &g;
    }
    if (found == nullptr) {
      std::string visible;
      for (const Gpu &g : gpus) visible += format("%s%d %s", visible.empty() ? "" : ", ", g.ordinal, g.uuid.c_str());
      fprintf(stderr, "gpu-bench: GPU %s is not visible; the driver sees %zu: %s\n", want.c_str(), gpus.size(), visible.c_str());
      return kNoGpu;
    }
    if (std::find(chosen.begin(), chosen.end(), found) == chosen.end()) chosen.push_back(found);
  }
  if (options.challenge.on) return run_challenge(chosen, options);
  progress("NVIDIA driver with CUDA %s (%s); %zu of %zu GPUs to measure, %.2g s a figure", version_text(g_cu.version).c_str(), g_cu.path.c_str(),
           chosen.size(), gpus.size(), options.seconds);
  int status = kOk;
  for (const Gpu *g : chosen) {
    progress("GPU %d: %s (%s), compute capability %d.%d, %d multiprocessors, %.1f GiB", g->ordinal, g->name.c_str(), g->uuid.c_str(), g->cc_major,
             g->cc_minor, g->sms, static_cast<double>(g->memory) / (1u << 30));
    try {
      const std::string line = measure_gpu(*g, options);
      printf("%s\n", line.c_str());
      fflush(stdout);
    } catch (const Failure &f) {
      fprintf(stderr, "gpu-bench: GPU %d (%s): %s\n", g->ordinal, g->uuid.c_str(), f.message.c_str());
      if (status == kOk) status = f.code;
    }
  }
  return status;
}
