// CompileModel: fused groups -> kernels, memory plan, entry plan, shared
// object, and the artifact container of docs/artifact-format.md.

#include <cstring>
#include <functional>
#include <map>
#include <string_view>

#include "absl/status/status.h"
#include "base/bytes.h"
#include "base/check.h"
#include "base/sha256.h"
#include "base/str.h"
#include "compiler/codegen/module.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/memory_plan.h"
#include "compiler/graph/passes.h"
#include "compiler/model.h"
#include "compiler/ops/lower_workload.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif

namespace kiln::compiler {
namespace {

constexpr size_t kHeaderBytes = 152;  // docs/artifact-format.md

std::string ShapeText(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("scalar") : StrJoin(shape, "x");
}

void PutU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A section of the container: `data`, or `size` bytes that `fill` writes in
// place (the weights, copied straight from the graph so that a model's
// weights are never held twice on top of the graph).
struct Section {
  std::string name;
  std::string_view data;
  uint64_t size = 0;
  std::function<void(char*)> fill;
  uint64_t Size() const { return fill ? size : data.size(); }
};

// The container of docs/artifact-format.md (version 2): the manifest
// (`manifest`, completed here with a `section NAME sha256 HEX` record for
// every other section), then `sections`; the manifest's SHA-256 in the
// header; unsigned (compiler::SignArtifact signs it).
std::string WriteContainer(std::string manifest, const std::vector<Section>& sections) {
  // The digest records have a fixed length: the manifest's place is decided
  // before the digests are known, and they are written into it at the end.
  const size_t manifest_base = manifest.size();
  for (const Section& s : sections) {
    manifest += StrCat("section ", s.name, " sha256 ", std::string(64, '0'), "\n");
  }
  size_t header = kHeaderBytes + 4 + std::string_view("manifest").size() + 16;
  for (const Section& s : sections) header += 4 + s.name.size() + 16;
  std::vector<uint64_t> offsets;
  uint64_t pos = AlignUp(static_cast<int64_t>(header));
  const uint64_t manifest_offset = pos;
  pos = AlignUp(static_cast<int64_t>(pos + manifest.size()));
  for (const Section& s : sections) {
    offsets.push_back(pos);
    pos = AlignUp(static_cast<int64_t>(pos + s.Size()));
  }
  std::string out;
  out.reserve(pos);
  out = "KILNART1";
  PutU32(out, 2);
  PutU32(out, static_cast<uint32_t>(sections.size() + 1));
  out.resize(kHeaderBytes, '\0');  // manifest digest (below), no signature
  auto put_entry = [&](std::string_view name, uint64_t offset, uint64_t size) {
    PutU32(out, static_cast<uint32_t>(name.size()));
    out += name;
    PutU64(out, offset);
    PutU64(out, size);
  };
  put_entry("manifest", manifest_offset, manifest.size());
  for (size_t i = 0; i < sections.size(); ++i) {
    put_entry(sections[i].name, offsets[i], sections[i].Size());
  }
  out.resize(manifest_offset, '\0');
  out += manifest;
  for (size_t i = 0; i < sections.size(); ++i) {
    out.resize(offsets[i], '\0');
    if (sections[i].fill) {
      out.resize(offsets[i] + sections[i].size, '\0');
      sections[i].fill(out.data() + offsets[i]);
    } else {
      out += sections[i].data;
    }
  }
  std::string records;
  for (size_t i = 0; i < sections.size(); ++i) {
    records += StrCat(
        "section ", sections[i].name, " sha256 ",
        Hex(kiln::Sha256(std::string_view(out).substr(offsets[i], sections[i].Size()))), "\n");
  }
  KILN_CHECK(records.size() == manifest.size() - manifest_base) << "digest records changed size";
  std::memcpy(out.data() + manifest_offset + manifest_base, records.data(), records.size());
  const std::string digest =
      kiln::Sha256(std::string_view(out).substr(manifest_offset, manifest.size()));
  std::memcpy(out.data() + 16, digest.data(), digest.size());
  return out;
}

// The module's kernels lowered for `target` (a CPU kernel that packs an
// input, LowerPack; a GPU target has none).
absl::StatusOr<std::vector<ir::PrimFunc>> LowerKernels(const std::vector<KernelDef>& kernels,
                                                       const Target& target,
                                                       const LowerOptions& options) {
  std::vector<ir::PrimFunc> funcs;
  funcs.reserve(kernels.size());
  for (const KernelDef& k : kernels) {
    if (k.pack_input >= 0 && target.is_gpu()) {
      return absl::UnimplementedError(
          StrCat("kernel ", k.name, ": a packed input on a GPU target (no GPU template packs)"));
    }
    auto f = k.pack_input >= 0
                 ? LowerPack(k.workload, k.config, target, k.pack_input, k.name, options)
                 : LowerWorkload(k.workload, k.config, target, k.name, options);
    if (!f.ok()) {
      return absl::Status(f.status().code(),
                          StrCat("lowering kernel ", k.name, " (", k.workload.Canonical(),
                                 "): ", f.status().message()));
    }
    funcs.push_back(std::move(*f));
  }
  return funcs;
}

}  // namespace

absl::StatusOr<std::string> CompileModel(const Model& model, const Target& target,
                                         const ConfigLookup& lookup, const CompileOptions& options,
                                         CompileReport* report) {
  const Graph& g = model.graph();
  // The steps: every compute node, then a copy per output that cannot be
  // written in place (it aliases an input, a constant or another output).
  struct Step {
    Workload workload;
    Config config;
    std::vector<int> inputs;  // value ids (alias roots resolved later)
    int output = -1;          // value id; -1 for a copy into output `out_index`
    int out_index = -1;
    int pack_input = -1;  // >= 0: packs that input of `workload` into temporary `temp`
    int temp = -1;
    // Inputs the kernel reads packed: position -> packed constant (weight)
    // or temporary written by the pack step before it.
    std::map<int, int> packed_const, packed_temp;
  };
  std::vector<Step> nodes;
  for (const Node& n : g.nodes) {
    if (n.kind == NodeKind::kView) continue;
    KILN_CHECK(n.kind == NodeKind::kCompute) << "node '" << n.name << "' survived the passes";
    nodes.push_back({n.workload, {}, n.inputs, n.output, -1});
  }
  std::map<int, BufferRef> root_buf;  // alias root -> buffer
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    root_buf[g.inputs[i]] = {BufferRef::Kind::kInput, static_cast<int>(i), 0};
  }
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    int root = AliasRoot(g, g.outputs[j]);
    const Value& rv = g.values[root];
    if (rv.is_input || rv.IsConstant() || root_buf.count(root)) {
      std::vector<int64_t> shape = rv.shape.empty() ? std::vector<int64_t>{1} : rv.shape;
      Workload copy;
      copy.op = Op::kEltwise;
      copy.ints["shape"] = shape;
      copy.ints["in_shape"] = shape;
      copy.SetDtypes({rv.dtype, rv.dtype});
      nodes.push_back({copy, {}, {root}, -1, static_cast<int>(j)});
    } else {
      root_buf[root] = {BufferRef::Kind::kOutput, static_cast<int>(j), 0};
    }
  }
  // Configs, and the inputs each kernel takes packed: a constant is packed
  // here, once; any other input by a pack step just before the kernel.
  std::vector<Step> steps;
  std::vector<std::vector<uint8_t>> packed_consts;
  std::map<std::string, int> packed_const_index;  // value, workload, config, input
  std::vector<int64_t> temp_bytes;
  int tuned = 0;
  for (Step& s : nodes) {
    std::optional<Config> cfg = lookup ? lookup(s.workload) : std::nullopt;
    if (cfg) {
      s.config = *cfg;
      ++tuned;
    } else {
      auto d = DefaultConfig(s.workload, target);
      if (!d.ok()) return d.status();
      s.config = *d;
    }
    auto packed = PackedInputsOf(s.workload, s.config, target);
    if (!packed.ok()) return packed.status();
    for (const PackedInput& p : *packed) {
      const int root = AliasRoot(g, s.inputs[p.input]);
      const Value& v = g.values[root];
      if (!v.IsConstant()) {
        Step pack{s.workload, s.config, {s.inputs[p.input]}, -1, -1, p.input};
        pack.temp = static_cast<int>(temp_bytes.size());
        temp_bytes.push_back(p.Bytes());
        s.packed_temp[p.input] = pack.temp;
        steps.push_back(std::move(pack));
        continue;
      }
      std::string key =
          StrCat(root, " ", s.workload.Canonical(), " ", CanonicalConfig(s.config), " ", p.input);
      auto [it, added] = packed_const_index.emplace(key, static_cast<int>(packed_consts.size()));
      if (added) {
        auto bytes =
            PackConstant(s.workload, s.config, target, p.input,
                         {reinterpret_cast<const uint8_t*>(v.bytes->data()), v.bytes->size()});
        if (!bytes.ok()) return bytes.status();
        packed_consts.push_back(*std::move(bytes));
      }
      s.packed_const[p.input] = it->second;
    }
    steps.push_back(std::move(s));
  }
  // Weights: every constant a kernel reads as is, then the packed ones,
  // 64-byte aligned. Only their places are decided here; the bytes are copied
  // into the artifact at the end.
  int64_t weights_size = 0;
  std::vector<std::pair<int, int64_t>> weight_places;  // value, offset
  for (const Step& s : steps) {
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      int root = AliasRoot(g, s.inputs[i]);
      if (s.packed_const.count(static_cast<int>(i)) || s.packed_temp.count(static_cast<int>(i)) ||
          !g.values[root].IsConstant() || root_buf.count(root)) {
        continue;
      }
      int64_t off = AlignUp(weights_size);
      weights_size = off + static_cast<int64_t>(g.values[root].bytes->size());
      weight_places.emplace_back(root, off);
      root_buf[root] = {BufferRef::Kind::kWeight, 0, off};
    }
  }
  std::vector<int64_t> packed_offsets;
  for (const auto& bytes : packed_consts) {
    packed_offsets.push_back(AlignUp(weights_size));
    weights_size = packed_offsets.back() + static_cast<int64_t>(bytes.size());
  }
  weights_size = AlignUp(weights_size);
  // Workspace: every other written root and every pack temporary, with
  // liveness over steps.
  std::vector<int> ws_roots;
  std::vector<BufferLifetime> lifetimes;
  std::map<int, int> ws_index;
  for (size_t t = 0; t < steps.size(); ++t) {
    if (steps[t].output < 0) continue;
    int root = AliasRoot(g, steps[t].output);
    if (root_buf.count(root)) continue;
    ws_index[root] = static_cast<int>(ws_roots.size());
    ws_roots.push_back(root);
    lifetimes.push_back(
        {std::max<int64_t>(1, g.values[root].NumElements()) * DTypeBytes(g.values[root].dtype),
         static_cast<int>(t), static_cast<int>(t)});
  }
  std::vector<int> temp_lifetime(temp_bytes.size());
  for (size_t t = 0; t < steps.size(); ++t) {
    for (int v : steps[t].inputs) {
      auto it = ws_index.find(AliasRoot(g, v));
      if (it != ws_index.end())
        lifetimes[it->second].last = std::max<int>(lifetimes[it->second].last, t);
    }
    if (steps[t].temp >= 0) {
      // Read by the kernel after this step's run of pack steps.
      size_t reader = t + 1;
      while (steps[reader].pack_input >= 0) ++reader;
      temp_lifetime[steps[t].temp] = static_cast<int>(lifetimes.size());
      lifetimes.push_back(
          {temp_bytes[steps[t].temp], static_cast<int>(t), static_cast<int>(reader)});
    }
  }
  MemoryPlan mem = PlanMemory(lifetimes);
  for (size_t i = 0; i < ws_roots.size(); ++i) {
    root_buf[ws_roots[i]] = {BufferRef::Kind::kWorkspace, 0, mem.offsets[i]};
  }
  auto buf_of = [&](int v) {
    auto it = root_buf.find(AliasRoot(g, v));
    KILN_CHECK(it != root_buf.end()) << "value '" << g.values[v].name << "' has no buffer";
    return it->second;
  };
  auto temp_buf = [&](int temp) {
    return BufferRef{BufferRef::Kind::kWorkspace, 0, mem.offsets[temp_lifetime[temp]]};
  };
  // Kernels and the entry plan.
  std::vector<KernelDef> kernels;
  EntryPlan plan;
  for (size_t t = 0; t < steps.size(); ++t) {
    const Step& s = steps[t];
    KernelDef def;
    def.name = s.pack_input >= 0 ? StrCat("k", t, "_pack") : StrCat("k", t, "_", s.workload.op);
    def.workload = s.workload;
    def.config = s.config;
    def.pack_input = s.pack_input;
    KernelCall call;
    call.kernel = def.name;
    call.label = StrCat(def.name, " ", s.workload.Key());
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (auto c = s.packed_const.find(static_cast<int>(i)); c != s.packed_const.end()) {
        call.args.push_back({BufferRef::Kind::kWeight, 0, packed_offsets[c->second]});
      } else if (auto p = s.packed_temp.find(static_cast<int>(i)); p != s.packed_temp.end()) {
        call.args.push_back(temp_buf(p->second));
      } else {
        call.args.push_back(buf_of(s.inputs[i]));
      }
    }
    if (s.temp >= 0) {
      call.args.push_back(temp_buf(s.temp));
    } else {
      call.args.push_back(s.output >= 0 ? buf_of(s.output)
                                        : BufferRef{BufferRef::Kind::kOutput, s.out_index, 0});
    }
    plan.calls.push_back(std::move(call));
    kernels.push_back(std::move(def));
  }
  // The buffers the entry point takes, as the manifest describes them: the
  // runtime refuses a manifest that does not say the same
  // (docs/artifact-format.md, "Entry point").
  std::string io_lines;
  for (int v : g.inputs) {
    io_lines += StrCat("input ", g.values[v].name, " ", DTypeName(g.values[v].dtype), " ",
                       ShapeText(g.values[v].shape), "\n");
  }
  for (int v : g.outputs) {
    io_lines += StrCat("output ", g.values[v].name, " ", DTypeName(g.values[v].dtype), " ",
                       ShapeText(g.values[v].shape), "\n");
  }
  plan.io =
      StrCat("workspace_bytes ", mem.total_bytes, "\nweights_bytes ", weights_size, "\n", io_lines);
  // The code: a shared object with the entry point (CPU), or the device
  // program and its launch plan (GPU).
  std::vector<Section> code;
  std::string so_bytes;
  DeviceModule device;
  auto funcs = LowerKernels(kernels, target, options.lower);
  if (!funcs.ok()) return funcs.status();
  if (target.is_gpu()) {
    auto built = BuildDeviceModule(*funcs, plan, target);
    if (!built.ok()) return built.status();
    device = *std::move(built);
    if (target.kind == TargetKind::kCuda) {
      code = {{"device.cu", device.source}, {"device.ptx", device.ptx}};
      if (!device.cubin.empty()) code.push_back({"device.cubin", device.cubin});
    } else {
      code = {{"device.cl", device.source}};
    }
    code.push_back({"launch", device.launches});
  } else {
    auto so = codegen::BuildSharedObjectFromFuncs(*funcs, plan, target);
    if (!so.ok()) return so.status();
    so_bytes = *std::move(so);
    code = {{"module.so", so_bytes}};
  }

  std::string manifest = "kiln-artifact 2\n";
  manifest += StrCat("target ", target.Spec(), "\n");
  manifest += StrCat("compiler_version ", KILN_VERSION, "\n");
  manifest += StrCat("model_sha256 ", model.source_sha256(), "\n");
  manifest += StrCat("entry ", target.is_gpu() ? "launch" : plan.name, "\n");
  manifest += StrCat("workspace_bytes ", mem.total_bytes, "\n");
  manifest += StrCat("weights_bytes ", weights_size, "\n");
  manifest += StrCat("kernels ", kernels.size(), "\n");
  manifest += StrCat("tuned_kernels ", tuned, "\n");
  manifest += io_lines;
  if (report) {
    report->kernels = static_cast<int>(kernels.size());
    report->tuned_kernels = tuned;
  }
  auto fill_weights = [&](char* dst) {
    for (const auto& [root, off] : weight_places) {
      const auto& data = *g.values[root].bytes;
      std::memcpy(dst + off, data.data(), data.size());
    }
    for (size_t i = 0; i < packed_consts.size(); ++i) {
      std::memcpy(dst + packed_offsets[i], packed_consts[i].data(), packed_consts[i].size());
    }
  };
  std::vector<Section> sections = code;
  sections.push_back({"weights", {}, static_cast<uint64_t>(weights_size), fill_weights});
  return WriteContainer(std::move(manifest), sections);
}

}  // namespace kiln::compiler
