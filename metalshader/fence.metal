// fence.metal: choreo's fence kernels for the fast (shared-word) fence mode.
//
// A fence word is a 32-bit word in a shared-storage buffer that the CPU
// and the GPU both reach. Each word has a single writer (R6): the GPU
// raises a word with fence_update, the CPU raises the words fence_wait
// polls. Every kernel here runs as a single thread, except input_coherent.
//
// Needs MSL 3.2 (macOS 15): coherent(system) pointers and a system-scope
// thread fence. The system scope is not spelled in the public headers, so
// it is built from the compiler's internal value (3) below.
//
// Binding layout, shared with ops.metal and the Go side (metalshader.Bind*):
//   buffer(0) the fence word (or the data for input_coherent)
//   buffer(3) Params: a, b (64-bit), n (32-bit)
//   buffer(4) the batch's status word: 0 = running, nonzero = stop

#include <metal_stdlib>

#pragma METAL internals : enable
#ifndef __METAL_MEMORY_SCOPE_SYSTEM__
#define __METAL_MEMORY_SCOPE_SYSTEM__ 3
#endif

namespace choreo_fence {

constexpr constant metal::thread_scope system_scope =
    static_cast<metal::thread_scope>(__METAL_MEMORY_SCOPE_SYSTEM__);

struct Params {
  ulong a;
  ulong b;
  uint n;
  uint pad;
};

// system_fence orders this thread's device-memory accesses with respect
// to the CPU and other devices.
inline void system_fence() {
  metal::atomic_thread_fence(
      metal::mem_flags::mem_device, metal::memory_order_seq_cst, system_scope);
}

} // namespace choreo_fence

// fence_update raises the word to max(word, p.n) and makes the store
// visible system-wide. The GPU is the word's only writer, so the
// read-compare-store cannot race with another writer; a word the CPU
// released (stop value) is never lowered. It does nothing once the
// batch has stopped.
[[kernel]] void fence_update(
    volatile coherent(system) device uint* word [[buffer(0)]],
    constant choreo_fence::Params& p [[buffer(3)]],
    volatile coherent(system) device uint* status [[buffer(4)]]) {
  if (status[0] != 0u) {
    return;
  }
  uint cur = word[0];
  if (cur < p.n) {
    word[0] = p.n;
  }
  choreo_fence::system_fence();
}

// fence_wait returns once the word is >= p.n. It is bounded: after p.a
// polls it gives up and stores p.b (a nonzero timeout code the CPU made,
// naming the command) into the batch's status word; every later kernel of
// the batch then does nothing. It also
// returns early when the CPU stops the batch (a nonzero status), so a
// closing queue drains without waiting for the word.
[[kernel]] void fence_wait(
    volatile coherent(system) device uint* word [[buffer(0)]],
    constant choreo_fence::Params& p [[buffer(3)]],
    volatile coherent(system) device uint* status [[buffer(4)]]) {
  for (ulong i = 0; i < p.a; i++) {
    choreo_fence::system_fence();
    if (status[0] != 0u) {
      return;
    }
    if (word[0] >= p.n) {
      return;
    }
  }
  status[0] = uint(p.b);
  choreo_fence::system_fence();
}

// input_coherent reads and writes back each of the first p.n 32-bit words
// of the data through a system-coherent pointer, then fences, so that GPU
// writes made earlier on the stream are visible to the CPU before a
// following fence_update raises the word.
[[kernel]] void input_coherent(
    volatile coherent(system) device uint* data [[buffer(0)]],
    constant choreo_fence::Params& p [[buffer(3)]],
    uint i [[thread_position_in_grid]]) {
  if (i < p.n) {
    data[i] = data[i];
  }
  choreo_fence::system_fence();
}
