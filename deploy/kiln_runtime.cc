#include "deploy/kiln_runtime.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "deploy/runtime.h"

struct kiln_module {
  std::unique_ptr<kiln::deploy::Module> module;
  std::string last_error;
};

namespace {

void CopyError(const std::string& msg, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  size_t n = std::min(msg.size(), len - 1);
  std::memcpy(buf, msg.data(), n);
  buf[n] = '\0';
}

const kiln::deploy::TensorInfo* Info(const kiln_module* m, int i, bool input) {
  if (m == nullptr || i < 0) return nullptr;
  const auto& list = input ? m->module->manifest().inputs : m->module->manifest().outputs;
  return static_cast<size_t>(i) < list.size() ? &list[i] : nullptr;
}

int Shape(const kiln::deploy::TensorInfo* info, int64_t* dims, int max_dims) {
  if (info == nullptr) return -1;
  int ndim = static_cast<int>(info->shape.size());
  for (int d = 0; d < ndim && d < max_dims && dims != nullptr; ++d) dims[d] = info->shape[d];
  return ndim;
}

}  // namespace

extern "C" {

int kiln_module_load(const char* path, kiln_module** out, char* errbuf, size_t errlen) {
  return kiln_module_load_on(path, nullptr, out, errbuf, errlen);
}

int kiln_module_load_on(const char* path, const char* device, kiln_module** out, char* errbuf,
                        size_t errlen) {
  return kiln_module_load_trusted(path, device, nullptr, out, errbuf, errlen);
}

int kiln_module_load_trusted(const char* path, const char* device, const char* trust_key,
                             kiln_module** out, char* errbuf, size_t errlen) {
  if (out == nullptr || path == nullptr) {
    CopyError("kiln_module_load: path and out must not be NULL", errbuf, errlen);
    return -1;
  }
  *out = nullptr;
  kiln::deploy::LoadOptions options;
  if (device != nullptr) options.device = device;
  if (trust_key != nullptr) options.trust_key = trust_key;
  auto m = kiln::deploy::Module::LoadFile(path, options);
  if (!m.ok()) {
    CopyError(m.status().ToString(), errbuf, errlen);
    return -1;
  }
  *out = new kiln_module{*std::move(m), ""};
  CopyError("", errbuf, errlen);
  return 0;
}

void kiln_module_free(kiln_module* module) { delete module; }

int kiln_module_num_inputs(const kiln_module* m) {
  return m == nullptr ? -1 : static_cast<int>(m->module->manifest().inputs.size());
}
int kiln_module_num_outputs(const kiln_module* m) {
  return m == nullptr ? -1 : static_cast<int>(m->module->manifest().outputs.size());
}
const char* kiln_module_input_name(const kiln_module* m, int i) {
  auto* info = Info(m, i, true);
  return info == nullptr ? nullptr : info->name.c_str();
}
const char* kiln_module_output_name(const kiln_module* m, int i) {
  auto* info = Info(m, i, false);
  return info == nullptr ? nullptr : info->name.c_str();
}
int kiln_module_input_ndim(const kiln_module* m, int i) {
  return Shape(Info(m, i, true), nullptr, 0);
}
int kiln_module_output_ndim(const kiln_module* m, int i) {
  return Shape(Info(m, i, false), nullptr, 0);
}
int kiln_module_input_shape(const kiln_module* m, int i, int64_t* dims, int max_dims) {
  return Shape(Info(m, i, true), dims, max_dims);
}
int kiln_module_output_shape(const kiln_module* m, int i, int64_t* dims, int max_dims) {
  return Shape(Info(m, i, false), dims, max_dims);
}
const char* kiln_module_input_dtype(const kiln_module* m, int i) {
  auto* info = Info(m, i, true);
  return info == nullptr ? nullptr : kiln::DTypeName(info->dtype);
}
const char* kiln_module_output_dtype(const kiln_module* m, int i) {
  auto* info = Info(m, i, false);
  return info == nullptr ? nullptr : kiln::DTypeName(info->dtype);
}
int64_t kiln_module_input_size(const kiln_module* m, int i) {
  auto* info = Info(m, i, true);
  return info == nullptr ? -1 : info->NumElements();
}
int64_t kiln_module_output_size(const kiln_module* m, int i) {
  auto* info = Info(m, i, false);
  return info == nullptr ? -1 : info->NumElements();
}

int64_t kiln_module_input_bytes(const kiln_module* m, int i) {
  auto* info = Info(m, i, true);
  return info == nullptr ? -1 : info->ByteSize();
}
int64_t kiln_module_output_bytes(const kiln_module* m, int i) {
  auto* info = Info(m, i, false);
  return info == nullptr ? -1 : info->ByteSize();
}

int kiln_module_run(kiln_module* m, const void** inputs, void** outputs) {
  if (m == nullptr) return -1;
  const auto& manifest = m->module->manifest();
  if ((inputs == nullptr && !manifest.inputs.empty()) || outputs == nullptr) {
    m->last_error = "kiln_module_run: inputs and outputs must not be NULL";
    return -1;
  }
  std::vector<const void*> in(inputs, inputs + manifest.inputs.size());
  std::vector<void*> out(outputs, outputs + manifest.outputs.size());
  absl::Status s = m->module->Run(in, out);
  if (!s.ok()) {
    m->last_error = s.ToString();
    return -1;
  }
  m->last_error.clear();
  return 0;
}

const char* kiln_module_last_error(const kiln_module* m) {
  return m == nullptr ? "" : m->last_error.c_str();
}

}  // extern "C"
