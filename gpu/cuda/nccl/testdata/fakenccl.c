// A stand-in for libnccl.so.2 with NCCL's C signatures (nccl.h 2.28), for
// TestABIFakeLibrary: every entry point appends what it received to a log
// that the test reads back through fakeLog, so the test checks how purego
// passed each argument (the by-value ncclUniqueId above all). It does no
// communication.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclComm* ncclComm_t;
typedef void* cudaStream_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;

static char logbuf[1 << 16];
static size_t loglen;
static ncclResult_t nextResult;
static char fakeComm[8];

static void logf_(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(logbuf + loglen, sizeof(logbuf) - loglen, fmt, ap);
  va_end(ap);
  if (n > 0 && loglen + (size_t)n < sizeof(logbuf)) loglen += (size_t)n;
}

static uint64_t idsum(const ncclUniqueId* id) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (int i = 0; i < 128; i++) { h ^= (unsigned char)id->internal[i]; h *= 1099511628211ULL; }
  return h;
}

const char* fakeLog(void) { return logbuf; }
void fakeReset(ncclResult_t next) { loglen = 0; logbuf[0] = 0; nextResult = next; }

ncclResult_t ncclGetVersion(int* v) { *v = 22803; logf_("ncclGetVersion\n"); return nextResult; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < 128; i++) id->internal[i] = (char)(255 - i);
  logf_("ncclGetUniqueId\n");
  return nextResult;
}
const char* ncclGetErrorString(ncclResult_t r) { return r == 6 ? "remote process exited or there was a network error" : "fake error string"; }
const char* ncclGetLastError(ncclComm_t comm) { (void)comm; return "fake last error"; }

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  logf_("ncclCommInitRank nranks=%d rank=%d id=%016llx first=%d last=%d\n", nranks, rank,
        (unsigned long long)idsum(&id), (unsigned char)id.internal[0], (unsigned char)id.internal[127]);
  *comm = nextResult == 0 ? (ncclComm_t)fakeComm : NULL;
  return nextResult;
}
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, ncclUniqueId* ids, void* config) {
  logf_("ncclCommInitRankScalable nranks=%d rank=%d nId=%d id=%016llx config=%p\n", nranks, rank, nId,
        (unsigned long long)idsum(&ids[0]), config);
  *comm = nextResult == 0 ? (ncclComm_t)fakeComm : NULL;
  return nextResult;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { logf_("ncclCommDestroy ok=%d\n", c == (ncclComm_t)fakeComm); return nextResult; }
ncclResult_t ncclCommAbort(ncclComm_t c) { logf_("ncclCommAbort ok=%d\n", c == (ncclComm_t)fakeComm); return nextResult; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r) {
  *r = 6;  // a remote error, so the test sees it come back
  logf_("ncclCommGetAsyncError ok=%d\n", c == (ncclComm_t)fakeComm);
  return nextResult;
}

#define OK(c) ((c) == (ncclComm_t)fakeComm)
ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  logf_("ncclAllReduce %p %p %zu %d %d ok=%d %p\n", s, r, n, dt, op, OK(c), st); return nextResult;
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t dt, ncclComm_t c, cudaStream_t st) {
  logf_("ncclAllGather %p %p %zu %d ok=%d %p\n", s, r, n, dt, OK(c), st); return nextResult;
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  logf_("ncclReduceScatter %p %p %zu %d %d ok=%d %p\n", s, r, n, dt, op, OK(c), st); return nextResult;
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t dt, int root, ncclComm_t c, cudaStream_t st) {
  logf_("ncclBroadcast %p %p %zu %d %d ok=%d %p\n", s, r, n, dt, root, OK(c), st); return nextResult;
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st) {
  logf_("ncclReduce %p %p %zu %d %d %d ok=%d %p\n", s, r, n, dt, op, root, OK(c), st); return nextResult;
}
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t st) {
  logf_("ncclSend %p %zu %d %d ok=%d %p\n", s, n, dt, peer, OK(c), st); return nextResult;
}
ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t st) {
  logf_("ncclRecv %p %zu %d %d ok=%d %p\n", r, n, dt, peer, OK(c), st); return nextResult;
}
ncclResult_t ncclGroupStart(void) { logf_("ncclGroupStart\n"); return nextResult; }
ncclResult_t ncclGroupEnd(void) { logf_("ncclGroupEnd\n"); return nextResult; }
