#include "compiler/te/layout.h"

#include <cctype>

#include "base/str.h"

namespace kiln::te {
using namespace ir;

absl::StatusOr<LayoutMap> LayoutMap::Make(const std::string& src, const std::string& dst,
                                          const std::vector<int64_t>& src_shape) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(StrCat("layout transform ", src, " -> ", dst, ": ", why));
  };
  if (src.size() != src_shape.size()) {
    return bad(
        StrCat("the source names ", src.size(), " dimensions, the tensor has ", src_shape.size()));
  }
  LayoutMap m;
  m.src_ = src;
  m.dst_ = dst;
  m.outer_of_.assign(src.size(), -1);
  m.inner_of_.assign(src.size(), -1);
  for (size_t i = 0; i < src.size(); ++i) {
    if (!std::isupper(static_cast<unsigned char>(src[i])))
      return bad(StrCat("source letter '", std::string(1, src[i]), "' is not upper case"));
    if (src.find(src[i]) != i) return bad(StrCat("source repeats '", std::string(1, src[i]), "'"));
  }
  std::vector<int64_t> factor(src.size(), 1);
  for (size_t i = 0; i < dst.size();) {
    int64_t f = 0;
    size_t digits = 0;
    while (i < dst.size() && std::isdigit(static_cast<unsigned char>(dst[i]))) {
      if (f > (int64_t{1} << 40)) return bad("block factor too large");
      f = f * 10 + (dst[i++] - '0');
      ++digits;
    }
    if (i == dst.size()) return bad("ends in a number");
    const char c = dst[i++];
    const bool inner = std::islower(static_cast<unsigned char>(c)) != 0;
    if (digits > 0 && !inner)
      return bad(StrCat("a factor before upper-case '", std::string(1, c), "'"));
    if (inner && digits == 0) return bad(StrCat("block '", std::string(1, c), "' has no factor"));
    const auto pos = src.find(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    if (pos == std::string::npos)
      return bad(StrCat("'", std::string(1, c), "' is not in the source"));
    const int d = static_cast<int>(pos);
    int& slot = inner ? m.inner_of_[d] : m.outer_of_[d];
    if (slot >= 0) return bad(StrCat("'", std::string(1, c), "' appears twice"));
    slot = static_cast<int>(m.dims_.size());
    if (inner) {
      if (f < 1) return bad(StrCat("block factor ", f, " of '", std::string(1, c), "' is below 1"));
      factor[d] = f;
    }
    m.dims_.push_back({d, 1, inner});
  }
  for (size_t d = 0; d < src.size(); ++d) {
    if (m.outer_of_[d] < 0 && (src_shape[d] != 1 || m.inner_of_[d] >= 0)) {
      return bad(StrCat("'", std::string(1, src[d]), "' is missing"));
    }
  }
  m.src_shape_ = src_shape;
  for (DstDim& dd : m.dims_) {
    dd.factor = factor[dd.src_dim];
    const int64_t e = src_shape[dd.src_dim];
    m.dst_shape_.push_back(dd.inner ? dd.factor : (e + dd.factor - 1) / dd.factor);
  }
  return m;
}

bool LayoutMap::padded() const {
  for (const DstDim& d : dims_) {
    if (d.factor > 1 && src_shape_[d.src_dim] % d.factor != 0) return true;
  }
  return false;
}

std::vector<Expr> LayoutMap::ToDst(const std::vector<Expr>& src_idx) const {
  KILN_CHECK(src_idx.size() == src_.size()) << "layout " << src_ << ": rank";
  std::vector<Expr> out;
  for (const DstDim& d : dims_) {
    const Expr& i = src_idx[d.src_dim];
    if (d.inner) {
      out.push_back(d.factor == 1 ? IntImm(0) : FloorMod(i, IntImm(d.factor)));
    } else {
      out.push_back(d.factor == 1 ? i : FloorDiv(i, IntImm(d.factor)));
    }
  }
  return out;
}

std::vector<Expr> LayoutMap::ToSrc(const std::vector<Expr>& dst_idx) const {
  KILN_CHECK(dst_idx.size() == dims_.size()) << "layout " << dst_ << ": rank";
  std::vector<Expr> out;
  for (size_t d = 0; d < src_.size(); ++d) {
    if (outer_of_[d] < 0) {
      out.push_back(IntImm(0));
      continue;
    }
    const Expr& o = dst_idx[outer_of_[d]];
    if (inner_of_[d] < 0) {
      out.push_back(o);
    } else {
      out.push_back(o * IntImm(dims_[inner_of_[d]].factor) + dst_idx[inner_of_[d]]);
    }
  }
  return out;
}

Expr LayoutMap::ValueAt(const Tensor& t, const std::vector<Expr>& dst_idx) const {
  std::vector<Expr> idx = ToSrc(dst_idx);
  Expr in_bounds;
  for (size_t d = 0; d < idx.size(); ++d) {
    const int64_t e = src_shape_[d];
    if (inner_of_[d] < 0 || e % dims_[inner_of_[d]].factor == 0) continue;
    Expr ok = idx[d] < IntImm(e);
    in_bounds = in_bounds.defined() ? (in_bounds && ok) : ok;
    idx[d] = Min(idx[d], IntImm(e - 1));
  }
  Expr v = t(idx);
  if (!in_bounds.defined()) return v;
  const DataType dt = t.buffer()->dtype;
  return Select(in_bounds, v, dt.is_float() ? FloatImm(0.0, dt) : IntImm(0, dt));
}

Tensor TransformLayoutOf(const Tensor& t, const LayoutMap& map, const std::string& name) {
  return Compute(
      name, map.dst_shape(),
      [&](const std::vector<Var>& i) {
        return map.ValueAt(t, std::vector<Expr>(i.begin(), i.end()));
      },
      t.buffer()->dtype);
}

absl::StatusOr<Tensor> TransformLayoutOf(const Tensor& t, const std::string& src,
                                         const std::string& dst, const std::string& name) {
  auto map = LayoutMap::Make(src, dst, t->shape);
  if (!map.ok()) return map.status();
  return TransformLayoutOf(t, *map, name);
}

}  // namespace kiln::te
