#pragma once
// DGLD_VECTOR_CLONES before a function compiles it for AVX-512 and AVX2 as
// well as baseline x86-64 (GCC's target_clones: the widest the machine has is
// picked when the program loads), for the element loops of the kernels in
// common/ops, which the build's baseline target (SSE2) leaves narrow. A
// clone's body is compiled for its target only where it is written in that
// function (or inlined into it): a lambda's body is a function of its own,
// so the cloned function takes a range and the lambda calls it.
// DGLD_ALWAYS_INLINE marks the template bodies such functions inline.

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DGLD_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DGLD_VECTOR_CLONES
#endif

#if defined(__GNUC__)
#define DGLD_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define DGLD_ALWAYS_INLINE inline
#endif
