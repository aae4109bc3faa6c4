#include "compiler/workload.h"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <optional>

#include "absl/status/status.h"
#include "base/check.h"
#include "base/str.h"

namespace kiln::compiler {
namespace {

std::string FormatFloat(double v) {
  // Enough digits for a float32 value to round-trip (attributes are float32).
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string EpilogueText(const EpilogueOp& e) {
  // A tap's operand is "@N" in place of a shape.
  const std::string operand = e.IsTap() ? StrCat("@", e.tap) : StrJoin(e.operand_shape, ",");
  switch (e.kind) {
    case EpilogueKind::kRelu:
      return "relu";
    case EpilogueKind::kAdd:
      return StrCat("add:", operand);
    case EpilogueKind::kMul:
      return StrCat("mul:", operand);
    case EpilogueKind::kUnary: {
      std::string out = StrCat("u:", e.fn);
      if (!e.params.empty()) {
        std::vector<std::string> ps;
        for (double p : e.params) ps.push_back(FormatFloat(p));
        out += StrCat(":", StrJoin(ps, ","));
      }
      return out;
    }
    case EpilogueKind::kBinary:
      return StrCat(e.reversed ? "br:" : "b:", e.fn, ":", operand);
  }
  return "?";
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(std::string_view text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (std::string_view part : StrSplit(text, ',')) {
    int64_t v = 0;
    if (!ParseInt64(part, &v)) {
      return absl::InvalidArgumentError(StrCat("bad integer '", part, "' in workload"));
    }
    out.push_back(v);
  }
  return out;
}

absl::Status CheckBroadcastable(const std::vector<int64_t>& from, const std::vector<int64_t>& to,
                                std::string_view what) {
  if (from.size() != to.size()) {
    return absl::InvalidArgumentError(
        StrCat(what, ": rank ", from.size(), " does not match output rank ", to.size()));
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[i]) {
      return absl::InvalidArgumentError(
          StrCat(what, ": dimension ", i, " of size ", from[i], " cannot broadcast to ", to[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Workload::Int(std::string_view name) const {
  auto it = ints.find(std::string(name));
  KILN_CHECK(it != ints.end() && it->second.size() == 1)
      << "workload " << op << " lacks scalar attribute " << name;
  return it->second[0];
}

int64_t Workload::IntOr(std::string_view name, int64_t fallback) const {
  auto it = ints.find(std::string(name));
  return it == ints.end() || it->second.size() != 1 ? fallback : it->second[0];
}

const std::vector<int64_t>& Workload::Ints(std::string_view name) const {
  auto it = ints.find(std::string(name));
  KILN_CHECK(it != ints.end()) << "workload " << op << " lacks attribute " << name;
  return it->second;
}

double Workload::FloatOr(std::string_view name, double fallback) const {
  auto it = floats.find(std::string(name));
  return it == floats.end() ? fallback : it->second;
}

std::string Workload::Canonical() const {
  // Keys of ints and floats merged in sorted order; floats prefixed by 'f'.
  std::map<std::string, std::string> items;
  for (const auto& [k, v] : ints) items[k] = StrJoin(v, ",");
  for (const auto& [k, v] : floats) items[k] = StrCat("f", FormatFloat(v));
  std::string out = StrCat(op, "(");
  bool first = true;
  for (const auto& [k, v] : items) {
    out += StrCat(first ? "" : ";", k, "=", v);
    first = false;
  }
  out += ")";
  for (const EpilogueOp& e : epilogue) out += StrCat("|", EpilogueText(e));
  for (const Prologue& p : prologue) {
    std::string inner;
    for (char c : p.op.Canonical()) {
      inner += c == '%' ? std::string("%25") : c == '|' ? std::string("%7C") : std::string(1, c);
    }
    out += StrCat("|<", p.input, ":", inner);
  }
  return out;
}

std::string Workload::Key() const {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : Canonical()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, h);
  return StrCat(op, "-", buf);
}

namespace {

// An epilogue op's operand, the `index`th op's: a shape, or "@N" for the
// chain's value entering op N (N <= index).
absl::Status ParseOperand(std::string_view text, size_t index, EpilogueOp* e) {
  if (!text.empty() && text[0] == '@') {
    int64_t tap = 0;
    if (!ParseInt64(text.substr(1), &tap) || tap < 0 || static_cast<size_t>(tap) > index) {
      return absl::InvalidArgumentError(
          StrCat("epilogue op ", index, " taps '", text, "': not an earlier point of its chain"));
    }
    e->tap = tap;
    return absl::OkStatus();
  }
  auto shape = ParseIntList(text);
  if (!shape.ok()) return shape.status();
  e->operand_shape = *std::move(shape);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Workload> Workload::Parse(std::string_view canonical) {
  size_t open = canonical.find('(');
  size_t close = canonical.find(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
      open == 0) {
    return absl::InvalidArgumentError(StrCat("malformed workload '", canonical, "'"));
  }
  Workload w;
  const std::string_view name = canonical.substr(0, open);
  const std::optional<Op> op = ParseName<Op>(name);
  if (!op) {
    return absl::InvalidArgumentError(
        StrCat("unknown workload op '", name, "' (known: ", NamesList<Op>(), ")"));
  }
  w.op = *op;
  std::string_view body = canonical.substr(open + 1, close - open - 1);
  if (!body.empty()) {
    for (std::string_view item : StrSplit(body, ';')) {
      size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return absl::InvalidArgumentError(StrCat("malformed attribute '", item, "' in workload"));
      }
      std::string key(item.substr(0, eq));
      std::string_view value = item.substr(eq + 1);
      if (!value.empty() && value[0] == 'f') {
        double d = 0;
        if (!ParseDouble(value.substr(1), &d)) {
          return absl::InvalidArgumentError(StrCat("bad float attribute '", item, "'"));
        }
        w.floats[key] = d;
      } else {
        auto list = ParseIntList(value);
        if (!list.ok()) return list.status();
        w.ints[key] = *std::move(list);
      }
    }
  }
  std::string_view rest = canonical.substr(close + 1);
  if (!rest.empty()) {
    if (rest[0] != '|') return absl::InvalidArgumentError("malformed epilogue in workload");
    for (std::string_view part : StrSplit(rest.substr(1), '|')) {
      if (!part.empty() && part[0] == '<') {
        size_t colon = part.find(':');
        int64_t input = 0;
        if (colon == std::string_view::npos || !ParseInt64(part.substr(1, colon - 1), &input) ||
            input < 0 || (!w.prologue.empty() && input <= w.prologue.back().input)) {
          return absl::InvalidArgumentError(StrCat("malformed prologue '", part, "'"));
        }
        std::string inner;
        std::string_view esc = part.substr(colon + 1);
        for (size_t k = 0; k < esc.size(); ++k) {
          if (esc[k] == '%' && esc.substr(k, 3) == "%25") {
            inner += '%';
            k += 2;
          } else if (esc[k] == '%' && esc.substr(k, 3) == "%7C") {
            inner += '|';
            k += 2;
          } else {
            inner += esc[k];
          }
        }
        auto op = Parse(inner);
        if (!op.ok()) return op.status();
        w.prologue.push_back({input, *std::move(op)});
        continue;
      }
      if (!w.prologue.empty()) return absl::InvalidArgumentError("epilogue after a prologue");
      EpilogueOp e;
      std::string_view name = part.substr(0, part.find(':'));
      std::vector<std::string_view> fields = StrSplit(part, ':');
      if (name == "u" || name == "b" || name == "br") {
        if (fields.size() < 2 || fields[1].empty() || fields.size() > 3 ||
            (name != "u" && fields.size() != 3)) {
          return absl::InvalidArgumentError(StrCat("malformed epilogue '", part, "'"));
        }
        auto fn = ParseName<ElementFn>(fields[1]);
        if (!fn.has_value() || IsUnary(*fn) != (name == "u")) {
          return absl::InvalidArgumentError(StrCat("epilogue '", part, "': '", fields[1],
                                                   "' is not a ", name == "u" ? "unary" : "binary",
                                                   " elementwise function"));
        }
        e.fn = *fn;
        if (name == "u") {
          e.kind = EpilogueKind::kUnary;
          if (fields.size() == 3) {
            for (std::string_view p : StrSplit(fields[2], ',')) {
              double d = 0;
              if (!ParseDouble(p, &d)) {
                return absl::InvalidArgumentError(StrCat("bad epilogue parameter '", p, "'"));
              }
              e.params.push_back(d);
            }
          }
        } else {
          e.kind = EpilogueKind::kBinary;
          e.reversed = name == "br";
          if (auto s = ParseOperand(fields[2], w.epilogue.size(), &e); !s.ok()) return s;
        }
      } else if (name == "relu") {
        e.kind = EpilogueKind::kRelu;
      } else if (name == "add" || name == "mul") {
        e.kind = name == "add" ? EpilogueKind::kAdd : EpilogueKind::kMul;
        if (part.find(':') == std::string_view::npos) {
          return absl::InvalidArgumentError(StrCat("epilogue '", part, "' lacks a shape"));
        }
        if (auto s = ParseOperand(part.substr(part.find(':') + 1), w.epilogue.size(), &e);
            !s.ok()) {
          return s;
        }
      } else {
        return absl::InvalidArgumentError(StrCat("unknown epilogue op '", name, "'"));
      }
      w.epilogue.push_back(std::move(e));
    }
  }
  if (auto sig = w.Signature(); !sig.ok()) return sig.status();
  return w;
}

bool IsDepthwiseConv(const Workload& w) {
  return w.op == Op::kConv2d && w.Int("groups") > 1 && w.Int("groups") == w.Int("C") &&
         w.Int("K") == w.Int("C");
}

bool OneElement(const std::vector<int64_t>& shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d == 1; });
}

std::vector<int64_t> BlockedShape(const std::vector<int64_t>& nchw, int64_t b) {
  if (b <= 0 || nchw.size() != 4) return nchw;
  return {nchw[0], nchw[1] / b, nchw[2], nchw[3], b};
}

namespace {

// in_block / out_block: absent, 0, or kChannelBlock dividing C / the output
// channels `out_channels` (K for conv2d, C for pool2d); a blocked conv2d is
// one a template reads and writes in blocks: ungrouped with K a multiple of
// the block, or depthwise with its data and output alike.
absl::Status CheckBlocks(const Workload& w, const char* out_channels) {
  const std::pair<const char*, const char*> blocks[] = {{"in_block", "C"},
                                                        {"out_block", out_channels}};
  for (const auto& [name, channels] : blocks) {
    const int64_t b = w.IntOr(name, 0);
    if (b != 0 && (b != kChannelBlock || w.Int(channels) % b != 0)) {
      return absl::InvalidArgumentError(StrCat(w.op, ": ", name, "=", b, " must be 0 or ",
                                               kChannelBlock, " dividing ", channels, "=",
                                               w.Int(channels)));
    }
  }
  const int64_t ib = w.IntOr("in_block", 0), ob = w.IntOr("out_block", 0);
  if (w.op != Op::kConv2d || (ib == 0 && ob == 0)) return absl::OkStatus();
  const bool ungrouped = w.Int("groups") == 1 && w.Int("K") % kChannelBlock == 0;
  const bool depthwise = IsDepthwiseConv(w) && (ib == ob || ob == 0);
  if (!ungrouped && !depthwise) {
    return absl::InvalidArgumentError(
        "conv2d: channel blocks need an ungrouped layer with K a multiple of the block, or a "
        "depthwise one with its data blocked");
  }
  return absl::OkStatus();
}

// Whether `key` is attribute `a` (name, or name<i> for an indexed one).
bool IsAttribute(std::string_view key, const AttrSpec& a) {
  if (!a.indexed) return key == a.name;
  if (key.size() <= a.name.size() || key.substr(0, a.name.size()) != a.name) return false;
  return std::all_of(key.begin() + static_cast<std::ptrdiff_t>(a.name.size()), key.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// Every attribute of w is one its op declares, of that kind.
absl::Status CheckAttributes(const Workload& w) {
  const std::vector<AttrSpec>& specs = AttributesOf(w.op);
  auto check = [&](std::string_view key, AttrKind kind) -> absl::Status {
    for (const AttrSpec& a : specs) {
      if (!IsAttribute(key, a)) continue;
      if (a.kind == kind) return absl::OkStatus();
      return absl::InvalidArgumentError(
          StrCat("workload ", w.op, ": attribute '", key, "' is ",
                 a.kind == AttrKind::kFloat ? "a float" : "a list of integers", ", not ",
                 kind == AttrKind::kFloat ? "a float" : "integers"));
    }
    std::vector<std::string> names;
    for (const AttrSpec& a : specs) names.push_back(StrCat(a.name, a.indexed ? "<i>" : ""));
    return absl::InvalidArgumentError(StrCat("workload ", w.op, " has no attribute '", key,
                                             "' (its attributes: ", StrJoin(names, ", "), ")"));
  };
  for (const auto& [key, v] : w.ints) {
    if (absl::Status s = check(key, AttrKind::kInts); !s.ok()) return s;
  }
  for (const auto& [key, v] : w.floats) {
    if (absl::Status s = check(key, AttrKind::kFloat); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<AttrSpec>& AttributesOf(Op op) {
  // Per op, its attributes besides `dtypes`: a name is a list of integers,
  // `name:f` a float, `name#` one per index (name0, name1, ...).
  static const auto* table = [] {
    static constexpr std::pair<Op, std::string_view> kDeclared[] = {
        {Op::kConv2d,
         "N C H W K R S OH OW stride pad dilation groups bias in_block out_block bf16"},
        {Op::kDense,
         "M N K batch batch_a batch_b transA transB bias bias_shape bf16 alpha:f beta:f"},
        {Op::kPool2d,
         "N C H W OH OW kernel stride pad dilation kind count_include_pad in_block out_block"},
        {Op::kPool3d,
         "N C D H W OD OH OW kernel stride pad dilation kind count_include_pad in_block out_block"},
        {Op::kEltwise, "shape in_shape"},
        {Op::kNll, "in# shape has_ignore ignore part"},
        {Op::kReduce, "in# shape axes keep kind pre"},
        {Op::kArgReduce, "in# shape axis keep kind last"},
        {Op::kCumSum, "in# shape axis exclusive reverse"},
        {Op::kTranspose, "in# shape perm"},
        {Op::kConcat, "in# shape axis"},
        {Op::kSlice, "in# shape starts steps"},
        {Op::kGather, "in# shape axis scalar_indices"},
        {Op::kGatherElements, "in# shape axis"},
        {Op::kPad, "in# shape mode pads value:f"},
        {Op::kWhere, "in# shape"},
        {Op::kTile, "in# shape"},
        {Op::kTrilu, "in# shape k upper"},
        {Op::kOneHot, "in# shape axis"},
        {Op::kEyeLike, "in# shape k"},
        {Op::kResize,
         "in# shape mode coord nearest exclude antialias cubic_a:f extrapolation:f scale#:f "
         "roi_lo#:f roi_hi#:f"},
        {Op::kGridSample, "in# shape align mode padding"},
        {Op::kGatherNd, "in# shape batch"},
        {Op::kScatter, "in# shape axis mode reduction"},
        {Op::kTopK, "in# shape axis largest part"},
        {Op::kMatMul, "in# shape zp"},
        {Op::kConv,
         "in# shape strides pads dilations group has_bias transposed zp in_block out_block"},
        {Op::kWindow, "in# shape kind kernel strides pads dilations order p:f"},
        {Op::kEinsum, "in# shape extent out t#"},
        {Op::kLrn, "in# shape size alpha:f beta:f bias:f"},
        {Op::kQuantize, "in# shape axis block saturate"},
        {Op::kDequantize, "in# shape axis block"},
        {Op::kQAdd, "in# shape"},
    };
    // Indexed by op, in Op's order (every value declared once).
    auto* t = new std::vector<std::vector<AttrSpec>>(ValuesOf<Op>().size());
    for (const auto& [o, declared] : kDeclared) {
      std::vector<AttrSpec>& specs = (*t)[static_cast<size_t>(o)];
      KILN_CHECK(specs.empty()) << "attributes declared twice for " << o;
      specs.push_back({"dtypes"});
      for (std::string_view name : StrSplit(declared, ' ')) {
        AttrSpec a;
        if (name.ends_with(":f")) {
          a.kind = AttrKind::kFloat;
          name.remove_suffix(2);
        }
        if (name.ends_with('#')) {
          a.indexed = true;
          name.remove_suffix(1);
        }
        a.name = name;
        specs.push_back(a);
      }
    }
    for (Op o : ValuesOf<Op>()) {
      KILN_CHECK(!(*t)[static_cast<size_t>(o)].empty()) << "no attributes declared for " << o;
    }
    return t;
  }();
  return table->at(static_cast<size_t>(op));
}

absl::StatusOr<KernelSignature> Workload::Signature() const {
  if (absl::Status s = CheckAttributes(*this); !s.ok()) return s;
  auto need = [&](std::initializer_list<const char*> names) -> absl::Status {
    for (const char* n : names) {
      auto it = ints.find(n);
      if (it == ints.end() || it->second.empty()) {
        return absl::InvalidArgumentError(StrCat("workload ", op, " lacks attribute ", n));
      }
    }
    return absl::OkStatus();
  };
  KernelSignature sig;
  if (op == Op::kConv2d) {
    if (auto s = need({"N", "C", "H", "W", "K", "R", "S", "stride", "pad", "dilation", "groups",
                       "bias", "OH", "OW"});
        !s.ok())
      return s;
    int64_t groups = Int("groups");
    if (groups <= 0 || Int("C") % groups != 0 || Int("K") % groups != 0) {
      return absl::InvalidArgumentError("conv2d: channels not divisible by groups");
    }
    if (Ints("stride").size() != 2 || Ints("pad").size() != 4 || Ints("dilation").size() != 2) {
      return absl::InvalidArgumentError("conv2d: stride/dilation need 2 values, pad 4");
    }
    if (auto s = CheckBlocks(*this, "K"); !s.ok()) return s;
    if (const int64_t bf16 = IntOr("bf16", 0); bf16 != 0 && bf16 != 1) {
      return absl::InvalidArgumentError(StrCat("conv2d: bf16=", bf16, " (0 or 1)"));
    }
    sig.inputs.push_back(
        {"data", BlockedShape({Int("N"), Int("C"), Int("H"), Int("W")}, IntOr("in_block", 0))});
    sig.inputs.push_back({"weight", {Int("K"), Int("C") / groups, Int("R"), Int("S")}});
    if (Int("bias")) sig.inputs.push_back({"bias", {Int("K")}});
    sig.output = {"out",
                  BlockedShape({Int("N"), Int("K"), Int("OH"), Int("OW")}, IntOr("out_block", 0))};
  } else if (op == Op::kDense) {
    if (auto s = need({"M", "N", "K", "transA", "transB", "bias"}); !s.ok()) return s;
    if (const int64_t bf16 = IntOr("bf16", 0); bf16 != 0 && bf16 != 1) {
      return absl::InvalidArgumentError(StrCat("dense: bf16=", bf16, " (0 or 1)"));
    }
    int64_t M = Int("M"), N = Int("N"), K = Int("K");
    int64_t batch = IntOr("batch", 1);
    bool ba = IntOr("batch_a", 0) != 0, bb = IntOr("batch_b", 0) != 0;
    std::vector<int64_t> a =
        Int("transA") ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
    std::vector<int64_t> b =
        Int("transB") ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
    if (ba) a.insert(a.begin(), batch);
    if (bb) b.insert(b.begin(), batch);
    sig.inputs.push_back({"A", a});
    sig.inputs.push_back({"B", b});
    std::vector<int64_t> out = {M, N};
    if (ba || bb) out.insert(out.begin(), batch);
    if (Int("bias")) {
      if (auto s = need({"bias_shape"}); !s.ok()) return s;
      sig.inputs.push_back({"C", Ints("bias_shape")});
      if (auto s = CheckBroadcastable(Ints("bias_shape"), out, "dense bias"); !s.ok()) return s;
    }
    sig.output = {"out", out};
  } else if (op == Op::kPool2d) {
    if (auto s =
            need({"N", "C", "H", "W", "kernel", "stride", "pad", "dilation", "OH", "OW", "kind"});
        !s.ok())
      return s;
    if (auto s = CheckBlocks(*this, "C"); !s.ok()) return s;
    sig.inputs.push_back(
        {"data", BlockedShape({Int("N"), Int("C"), Int("H"), Int("W")}, IntOr("in_block", 0))});
    sig.output = {"out",
                  BlockedShape({Int("N"), Int("C"), Int("OH"), Int("OW")}, IntOr("out_block", 0))};
  } else if (op == Op::kPool3d) {
    if (auto s = need({"N", "C", "D", "H", "W", "kernel", "stride", "pad", "dilation", "OD", "OH",
                       "OW", "kind"});
        !s.ok())
      return s;
    if (Ints("kernel").size() != 3 || Ints("stride").size() != 3 || Ints("pad").size() != 6 ||
        Ints("dilation").size() != 3) {
      return absl::InvalidArgumentError("pool3d: kernel/stride/dilation need 3 values, pad 6");
    }
    for (int i = 0; i < 3; ++i) {
      if (Ints("kernel")[i] <= 0 || Ints("stride")[i] <= 0 || Ints("dilation")[i] <= 0) {
        return absl::InvalidArgumentError("pool3d: kernel/stride/dilation must be positive");
      }
    }
    sig.inputs.push_back({"data", {Int("N"), Int("C"), Int("D"), Int("H"), Int("W")}});
    sig.output = {"out", {Int("N"), Int("C"), Int("OD"), Int("OH"), Int("OW")}};
  } else if (op == Op::kEltwise) {
    if (auto s = need({"shape", "in_shape"}); !s.ok()) return s;
    sig.inputs.push_back({"in", Ints("in_shape")});
    if (auto s = CheckBroadcastable(Ints("in_shape"), Ints("shape"), "eltwise input"); !s.ok())
      return s;
    sig.output = {"out", Ints("shape")};
  } else {
    // A generic operator: in0, in1, ... then the output `shape`.
    if (!ints.count("in0") || !ints.count("shape")) {
      return absl::InvalidArgumentError(
          StrCat("workload ", op, " lacks attribute ", ints.count("in0") ? "shape" : "in0"));
    }
    for (int i = 0;; ++i) {
      auto it = ints.find(StrCat("in", i));
      if (it == ints.end()) break;
      sig.inputs.push_back({StrCat("in", i), it->second});
    }
    sig.output = {"out", Ints("shape")};
  }
  // Prologues: op input i becomes its producer's arguments (last first, so
  // earlier positions stay put).
  for (size_t k = prologue.size(); k-- > 0;) {
    const Prologue& p = prologue[k];
    if (p.input < 0 || p.input >= static_cast<int64_t>(sig.inputs.size()) ||
        (k > 0 && prologue[k - 1].input >= p.input)) {
      return absl::InvalidArgumentError(StrCat("workload ", op, ": bad prologue input ", p.input));
    }
    auto psig = p.op.Signature();
    if (!psig.ok()) return psig.status();
    if (psig->output.shape != sig.inputs[p.input].shape) {
      return absl::InvalidArgumentError(
          StrCat("workload ", op, ": prologue of input ", p.input, " has another shape"));
    }
    std::vector<TensorSpec> args = psig->inputs;
    for (size_t a = 0; a < args.size(); ++a) args[a].name = StrCat("p", p.input, "_", a);
    sig.inputs.erase(sig.inputs.begin() + p.input);
    sig.inputs.insert(sig.inputs.begin() + p.input, args.begin(), args.end());
  }
  int idx = 0;
  for (size_t j = 0; j < epilogue.size(); ++j) {
    const EpilogueOp& e = epilogue[j];
    if (e.IsTap() && (static_cast<size_t>(e.tap) > j || e.kind == EpilogueKind::kRelu ||
                      e.kind == EpilogueKind::kUnary)) {
      return absl::InvalidArgumentError(
          StrCat("workload ", op, ": epilogue op ", j, " taps op ", e.tap, " of its chain"));
    }
    if (!e.HasOperand()) continue;
    if (auto s = CheckBroadcastable(e.operand_shape, sig.output.shape, "epilogue operand");
        !s.ok()) {
      return s;
    }
    sig.inputs.push_back({StrCat("ep", idx++), e.operand_shape});
  }
  // Sizes: every buffer's element count must fit comfortably in int64.
  std::vector<const TensorSpec*> all;
  for (const auto& in : sig.inputs) all.push_back(&in);
  all.push_back(&sig.output);
  for (const TensorSpec* t : all) {
    int64_t n = 1;
    for (int64_t d : t->shape) {
      if (d < 0 || (d > 0 && n > (int64_t{1} << 50) / d)) {
        return absl::InvalidArgumentError(StrCat("workload ", op, ": tensor ", t->name,
                                                 " has a bad shape [", StrJoin(t->shape, ","),
                                                 "]"));
      }
      n *= d;
    }
  }
  if (auto it = ints.find("dtypes"); it != ints.end()) {
    if (it->second.size() != sig.inputs.size() + 1) {
      return absl::InvalidArgumentError(StrCat("workload ", op, ": ", it->second.size(),
                                               " dtypes for ", sig.inputs.size() + 1,
                                               " kernel arguments"));
    }
    for (size_t i = 0; i <= sig.inputs.size(); ++i) {
      auto d = DTypeFromOnnx(it->second[i]);
      if (!d) {
        return absl::InvalidArgumentError(
            StrCat("workload ", op, ": unknown dtype code ", it->second[i]));
      }
      (i < sig.inputs.size() ? sig.inputs[i] : sig.output).dtype = *d;
    }
  }
  return sig;
}

void Workload::SetDtypes(const std::vector<DType>& dtypes) {
  bool all_f32 = true;
  std::vector<int64_t> codes;
  for (DType d : dtypes) {
    all_f32 = all_f32 && d == DType::kFloat32;
    codes.push_back(OnnxCode(d));
  }
  if (all_f32) {
    ints.erase("dtypes");
  } else {
    ints["dtypes"] = codes;
  }
}

double Workload::Flops() const {
  auto sig = Signature();
  if (!sig.ok()) return 0;
  double out = static_cast<double>(sig->output.NumElements());
  double per = 0;
  if (op == Op::kConv2d) {
    per = 2.0 * static_cast<double>(Int("C") / Int("groups") * Int("R") * Int("S"));
  } else if (op == Op::kDense) {
    per = 2.0 * static_cast<double>(Int("K"));
  } else if (op == Op::kPool2d) {
    per = static_cast<double>(Ints("kernel")[0] * Ints("kernel")[1]);
  } else if (op == Op::kPool3d) {
    per = static_cast<double>(Ints("kernel")[0] * Ints("kernel")[1] * Ints("kernel")[2]);
  } else if (op == Op::kMatMul && sig->inputs.size() >= 2 && !sig->inputs[0].shape.empty()) {
    per = 2.0 * static_cast<double>(sig->inputs[0].shape.back());  // 2K
  } else if (op == Op::kConv && sig->inputs.size() >= 2 && IntOr("transposed", 0) == 0) {
    // 2 x the weight's elements per output channel: C/group x kernel.
    const auto& ws = sig->inputs[1].shape;
    double taps = 1;
    for (size_t d = 1; d < ws.size(); ++d) taps *= static_cast<double>(ws[d]);
    per = 2.0 * taps;
  }
  return out * (per + static_cast<double>(epilogue.size()));
}

}  // namespace kiln::compiler
