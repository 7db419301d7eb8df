// LibTorch kernels dgld puts in place of LibTorch's own when the package is
// imported, for the operators DGL's training scripts spend their time in
// (docs/python.md, "Faster LibTorch kernels"). DGLD_TORCH_KERNELS=0 in the
// environment keeps LibTorch's.
//
// Tensor.bernoulli_(p) on the CPU, which every torch.nn.Dropout draws its
// mask with: LibTorch 1.13 without MKL draws element by element on one
// thread (200 ms of a 40 k x 256 activation's dropout, half the model step
// of DistDGL's 3-layer model). dgld's fill_bernoulli gives the same
// distribution (each element 1 with probability p, to within 2^-32) in one
// parallel vectorised pass from one seed drawn from the generator, so
// torch.manual_seed still makes a script reproducible; the draws themselves
// differ from LibTorch's. Other dtypes, non-contiguous tensors and p within
// 1e-6 of 0 or 1 (where 2^-32 would matter) go to LibTorch's kernel.
//
// torch.nn.functional.dropout (aten::dropout, what torch.nn.Dropout calls)
// on the CPU in training: LibTorch's draws a mask, scales it and multiplies
// (three passes over a tensor of the input's size, the mask kept for the
// backward pass, which multiplies again); dgld's dropout (common/ops) is one
// pass that keeps no mask, its backward one pass drawing the bits again from
// the seed. The same distribution (to within 2^-24), other draws. Dense
// float32 and float64 on the CPU with p at least 1e-6 from 0 and 1;
// otherwise (sparse, nested, other devices and types), and outside
// training, LibTorch's.
#include <ATen/ops/bernoulli_native.h>
#include <ATen/ops/dropout_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/ops/dropout.h"
#include "python/src/binding.h"

namespace dgld::python {

namespace {

at::Tensor& bernoulli_float_(at::Tensor& self, double p, c10::optional<at::Generator> gen) {
  const bool fast = self.is_contiguous() &&
                    (self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble) &&
                    (p == 0.0 || p == 1.0 || (p >= 1e-6 && p <= 1.0 - 1e-6));
  if (!fast) return at::native::bernoulli_(self, p, std::move(gen));
  ops::fill_bernoulli(self, p, ops::draw_seed(gen));
  return self;
}

at::Tensor dropout(const at::Tensor& input, double p, bool train) {
  const bool fast = train && input.device().is_cpu() && input.layout() == at::kStrided && !input.is_nested() &&
                    (input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble) &&
                    p >= 1e-6 && p <= 1.0 - 1e-6;
  if (!fast) return at::native::dropout(input, p, train);
  return ops::dropout(input, p, /*training=*/true, /*relu=*/false);
}

// Swallows the one warning LibTorch gives when a kernel replaces another.
class QuietWarnings : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation&, const std::string&, const bool) override {}
};

}  // namespace

bool install_torch_kernels() {
  const char* env = std::getenv("DGLD_TORCH_KERNELS");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  QuietWarnings quiet;
  c10::Warning::WarningHandlerGuard guard(&quiet);
  // Kept for the process's life: the registration ends with the Library.
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
  lib->impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  // aten::dropout has no backend kernels: it is composed above autograd, and
  // so is dgld's (an autograd function of its own).
  static auto* composite = new torch::Library(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::CompositeImplicitAutograd, __FILE__, __LINE__);
  composite->impl("dropout", TORCH_FN(dropout));
  return true;
}

}  // namespace dgld::python
