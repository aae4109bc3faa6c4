#ifndef KILN_DEPLOY_KILN_RUNTIME_H_
#define KILN_DEPLOY_KILN_RUNTIME_H_
/* The C API of libkiln_runtime.so: load a kiln artifact and run it.
 * Functions returning int return 0 on success and -1 on failure; the message
 * of a failed load is written to errbuf, that of a failed run is returned by
 * kiln_module_last_error. A module must not be run from two threads at once. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_module kiln_module;

int kiln_module_load(const char* path, kiln_module** out, char* errbuf, size_t errlen);
/* As kiln_module_load, on a device: "opencl:N" or "cuda:N" for a GPU
 * artifact, "cpu" or NULL as kiln_module_load (a GPU artifact then runs on
 * the device its target names, else the first). */
int kiln_module_load_on(const char* path, const char* device, kiln_module** out, char* errbuf,
                        size_t errlen);
/* As kiln_module_load_on, loading only an artifact signed by trust_key: the
 * text of a PEM Ed25519 public key ("-----BEGIN PUBLIC KEY-----", what
 * `kiln-tracker keys` prints). A NULL or empty trust_key requires no
 * signature. Every load checks the artifact's digests first. */
int kiln_module_load_trusted(const char* path, const char* device, const char* trust_key,
                             kiln_module** out, char* errbuf, size_t errlen);
void kiln_module_free(kiln_module* module);

int kiln_module_num_inputs(const kiln_module* module);
int kiln_module_num_outputs(const kiln_module* module);
/* Name of input/output i, or NULL when i is out of range. */
const char* kiln_module_input_name(const kiln_module* module, int i);
const char* kiln_module_output_name(const kiln_module* module, int i);
/* Number of dimensions of input/output i (0 for a scalar), or -1. */
int kiln_module_input_ndim(const kiln_module* module, int i);
int kiln_module_output_ndim(const kiln_module* module, int i);
/* Copies up to max_dims dimensions into dims; returns ndim, or -1. */
int kiln_module_input_shape(const kiln_module* module, int i, int64_t* dims, int max_dims);
int kiln_module_output_shape(const kiln_module* module, int i, int64_t* dims, int max_dims);
/* Element type of input/output i: "float32", "float64", "float16", "int8",
 * "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64" or "bool"
 * (one byte per element, 0 or 1); NULL when i is out of range. */
const char* kiln_module_input_dtype(const kiln_module* module, int i);
const char* kiln_module_output_dtype(const kiln_module* module, int i);
/* Number of elements of input/output i (1 for a scalar), or -1. */
int64_t kiln_module_input_size(const kiln_module* module, int i);
int64_t kiln_module_output_size(const kiln_module* module, int i);
/* Size in bytes of the buffer of input/output i (elements times the size of
 * its dtype), or -1. */
int64_t kiln_module_input_bytes(const kiln_module* module, int i);
int64_t kiln_module_output_bytes(const kiln_module* module, int i);

/* inputs[i] / outputs[i]: dense row-major buffers of the dtypes and shapes
 * above, in the model's order. */
int kiln_module_run(kiln_module* module, const void** inputs, void** outputs);
/* The message of the last failed kiln_module_run ("" when none). */
const char* kiln_module_last_error(const kiln_module* module);

#ifdef __cplusplus
}
#endif

#endif  // KILN_DEPLOY_KILN_RUNTIME_H_
