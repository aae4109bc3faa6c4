/* A minimal C reader of the kiln artifact format (docs/artifact-format.md),
 * cross-compiled for AArch64 by tests/compiler/aarch64_test.cc and run under
 * qemu-user: it runs kiln-generated AArch64 code the way a board would, with
 * nothing of kiln's C++ runtime (which needs Abseil for the target).
 *
 *   run_artifact ARTIFACT OUT_DIR INPUT0.bin INPUT1.bin ...
 *
 * Inputs are raw little-endian tensors of the manifest's dtypes and shapes;
 * each output i is written raw to OUT_DIR/output_i.bin. Link it with libm
 * (-Wl,--no-as-needed -lm): modules call expf, erff... by their undefined
 * symbols, as they do from libkiln_runtime.so. Parallel loops run
 * on two threads, so the generated trampolines are called from a thread other
 * than the caller's. Exits 1 with a message on any error. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TENSORS 64

static void die(const char* what, const char* detail) {
  fprintf(stderr, "run_artifact: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

struct range {
  int64_t begin, end;
  void (*body)(int64_t, void*);
  void* ctx;
};

static void* run_range(void* arg) {
  struct range* r = arg;
  for (int64_t i = r->begin; i < r->end; ++i) r->body(i, r->ctx);
  return NULL;
}

/* Exported (-rdynamic) for the module's undefined symbol. */
void kiln_parallel_for(int64_t n, void (*body)(int64_t, void*), void* ctx) {
  struct range lo = {0, n / 2, body, ctx}, hi = {n / 2, n, body, ctx};
  pthread_t t;
  if (pthread_create(&t, NULL, run_range, &hi) != 0) die("pthread_create failed", NULL);
  run_range(&lo);
  pthread_join(t, NULL);
}

/* Large kernel scratch (deploy/parallel.h's workspace); plain heap blocks
   here. */
void* kiln_workspace_alloc(int64_t bytes) {
  void* p = aligned_alloc(64, ((size_t)bytes + 63) / 64 * 64);
  if (!p) die("cannot allocate kernel workspace", NULL);
  return p;
}

void kiln_workspace_free(void* p) { free(p); }

/* The entry point's profiling hooks (deploy/profile.h): no profiling here. */
void kiln_kernel_begin(int32_t call, const char* label) {
  (void)call;
  (void)label;
}
void kiln_kernel_end(int32_t call) { (void)call; }

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = aligned_alloc(64, ((size_t)n + 64) / 64 * 64);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static uint64_t le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | (uint8_t)p[i];
  return v;
}

static size_t dtype_bytes(const char* name) {
  static const struct {
    const char* name;
    size_t bytes;
  } kTypes[] = {{"float32", 4}, {"float64", 8}, {"float16", 2}, {"int8", 1},
                {"int16", 2},   {"int32", 4},   {"int64", 8},   {"uint8", 1},
                {"uint16", 2},  {"uint32", 4},  {"uint64", 8},  {"bool", 1}};
  for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
    if (strcmp(name, kTypes[i].name) == 0) return kTypes[i].bytes;
  die("unknown dtype", name);
  return 0;
}

/* "1x3x32x32" or "scalar" times the element size. */
static size_t tensor_bytes(const char* dtype, char* shape) {
  size_t n = dtype_bytes(dtype);
  if (strcmp(shape, "scalar") == 0) return n;
  for (char* d = strtok(shape, "x"); d; d = strtok(NULL, "x")) n *= strtoull(d, NULL, 10);
  return n;
}

int main(int argc, char** argv) {
  if (argc < 3) die("usage: run_artifact ARTIFACT OUT_DIR INPUT.bin...", NULL);
  size_t size;
  char* file = read_file(argv[1], &size);
  if (size < 152 || memcmp(file, "KILNART1", 8) != 0) die("not a kiln artifact", argv[1]);
  /* Format version 2: the section table follows the 152-byte header. This
   * test loader reads what the compiler just wrote and checks no digest
   * (the runtime does: deploy/artifact.cc). */
  if (le(file + 8, 4) != 2) die("not an artifact of format version 2", argv[1]);
  const char *manifest = NULL, *so = NULL, *weights = NULL;
  size_t manifest_size = 0, so_size = 0;
  const char* p = file + 152;
  for (uint32_t s = 0, n = (uint32_t)le(file + 12, 4); s < n; ++s) {
    uint32_t len = (uint32_t)le(p, 4);
    const char* name = p + 4;
    uint64_t off = le(name + len, 8), bytes = le(name + len + 8, 8);
    if (off + bytes > size) die("section past the end of the file", NULL);
    if (len == 8 && memcmp(name, "manifest", 8) == 0) manifest = file + off, manifest_size = bytes;
    if (len == 9 && memcmp(name, "module.so", 9) == 0) so = file + off, so_size = bytes;
    if (len == 7 && memcmp(name, "weights", 7) == 0) weights = file + off;
    p = name + len + 16;
  }
  if (!manifest || !so || !weights) die("missing section", NULL);

  char entry[128] = "", line[1024];
  size_t workspace_bytes = 0, in_bytes[MAX_TENSORS], out_bytes[MAX_TENSORS];
  int n_in = 0, n_out = 0;
  FILE* m = fmemopen((void*)manifest, manifest_size, "r");
  while (fgets(line, sizeof line, m)) {
    char key[32], name[256], dtype[32], shape[512];
    if (sscanf(line, "entry %127s", entry) == 1) continue;
    if (sscanf(line, "workspace_bytes %zu", &workspace_bytes) == 1) continue;
    if (sscanf(line, "%31s %255s %31s %511s", key, name, dtype, shape) != 4) continue;
    if (strcmp(key, "input") == 0 && n_in < MAX_TENSORS)
      in_bytes[n_in++] = tensor_bytes(dtype, shape);
    if (strcmp(key, "output") == 0 && n_out < MAX_TENSORS)
      out_bytes[n_out++] = tensor_bytes(dtype, shape);
  }
  fclose(m);
  if (argc - 3 != n_in) die("wrong number of inputs for this artifact", NULL);

  char so_path[] = "/tmp/kiln-a64-XXXXXX";
  int fd = mkstemp(so_path);
  if (fd < 0 || write(fd, so, so_size) != (ssize_t)so_size) die("cannot write", so_path);
  close(fd);
  void* dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  unlink(so_path);
  if (!dl) die("dlopen failed", dlerror());
  typedef int32_t (*entry_fn)(void* const*, void* const*, const uint8_t*, uint8_t*);
  entry_fn fn = (entry_fn)dlsym(dl, entry);
  if (!fn) die("entry point not found", entry);

  void *inputs[MAX_TENSORS], *outputs[MAX_TENSORS];
  for (int i = 0; i < n_in; ++i) {
    size_t got;
    inputs[i] = read_file(argv[3 + i], &got);
    if (got != in_bytes[i]) die("input file has the wrong size", argv[3 + i]);
  }
  for (int i = 0; i < n_out; ++i) outputs[i] = aligned_alloc(64, (out_bytes[i] + 64) / 64 * 64);
  uint8_t* workspace = aligned_alloc(64, (workspace_bytes + 64) / 64 * 64);
  int32_t rc = fn(inputs, outputs, (const uint8_t*)weights, workspace);
  if (rc != 0) die("the entry point failed", NULL);
  for (int i = 0; i < n_out; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%d.bin", argv[2], i);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(outputs[i], 1, out_bytes[i], f) != out_bytes[i]) die("cannot write", path);
    fclose(f);
  }
  return 0;
}
