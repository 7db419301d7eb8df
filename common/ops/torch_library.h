#pragma once
// The "dgld" TorchScript library (torch_library.cpp): torch.classes.dgld.Block
// and torch.ops.dgld.{copy_u_reduce, gat_aggregate}. Registered when this
// object is linked in; BlockGraph::create references torch_library_namespace
// so that every program that builds blocks has it.

namespace dgld::ops {

const char* torch_library_namespace();

}  // namespace dgld::ops
