/*
 * mpi_bench.c: the Open MPI peer of choreo's `demo bench` (see run.sh and
 * README.md). Ops: allreduce (float32 SUM, out of place), allgather,
 * sendrecv (ring exchange: every rank MPI_Sendrecv's to rank+1 and from
 * rank-1; with 2 ranks, 0 and 1 exchange both ways at once), alltoall,
 * alltoallv (choreo's uneven split: rank i sends rank j (i+j) mod N shares
 * of N(N-1)/2 of its size, the remainder to the largest share, so one zero
 * count per rank), gather, scatter and reduce (root 0, float32 SUM) and
 * sendrecv_batch (the ring as MPI_Irecv + MPI_Isend + MPI_Waitall, as
 * choreo's Batch).
 *
 *   mpirun -n N mpi_bench LABEL [OPS] [SIZES]
 *   OPS   comma-separated, default allreduce,allgather,sendrecv
 *   SIZES comma-separated bytes per rank, default 4096,...,67108864
 *   env BENCH_BUDGET_S=s caps each timed loop at about s seconds (default 2)
 *
 * size(B) is what each rank contributes (all-gather, gather: its input; the
 * output is N x size; scatter: the block each rank gets; all-to-all: its
 * whole input, elements rounded down to a multiple of N). Per size: one checked op, warm-up, per-op latency (each op
 * after a barrier, max over ranks, median = p50; the counts are choreo's,
 * cut where an op is slow, see capped), then nccl-tests' batch
 * time (timed ops back to back after one barrier, max over ranks / count =
 * time(us)), whose last op is checked too. algbw = bytes / time (all-gather,
 * gather, scatter: N x size bytes), busbw = algbw x 2(N-1)/N (allreduce),
 * x (N-1)/N (allgather, alltoall, alltoallv, gather, scatter), x 1
 * (sendrecv, sendrecv_batch, reduce), as nccl-tests and choreo's demo bench. #wrong = wrong elements over all ranks and
 * both checks. Rows are printed by rank 0 in demo bench's column order
 * with the label first.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, ALLGATHER, SENDRECV, ALLTOALL, ALLTOALLV, GATHER, SCATTER, REDUCE, SENDRECV_BATCH };

static const char *opnames[] = {"allreduce", "allgather", "sendrecv", "alltoall", "alltoallv",
                                "gather", "scatter", "reduce", "sendrecv_batch"};

enum { ROOT = 0 };

/* iterations: the warm-up and timed counts by size, the same table as
 * choreo's demo bench (cmd/demo/bench.go). */
static void iterations(size_t bytes, int *warm, int *timed) {
	if (bytes <= 4 << 10) { *warm = 50; *timed = 1000; }
	else if (bytes <= 64 << 10) { *warm = 20; *timed = 500; }
	else if (bytes <= 1 << 20) { *warm = 10; *timed = 100; }
	else if (bytes <= 16 << 20) { *warm = 3; *timed = 20; }
	else { *warm = 2; *timed = 10; }
}

/* capped cuts timed so that one timed loop takes about BENCH_BUDGET_S
 * seconds (default 2; 0 or less: no cap) at the warm-up's median op time
 * (the slowest rank's), keeping at least 5. */
static int capped(int timed, double perop) {
	const char *e = getenv("BENCH_BUDGET_S");
	double budget = e && *e ? atof(e) : 2.0;
	if (budget <= 0 || perop <= 0) return timed;
	double cap = budget / perop;
	if (cap < 5) cap = 5;
	return cap < timed ? (int)cap : timed;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The input of rank r: element i is r%3 + i%5, exact in float32 and sums. */
static float value(int r, size_t i) { return (float)(r % 3 + (int)(i % 5)); }

struct bench {
	int op, rank, n;
	size_t count;
	float *in, *out;
	size_t inn, outn; /* elements of in and out on this rank */
	/* alltoallv: this rank's counts and displacements, and split[i*n+j],
	 * what rank i sends rank j. */
	int *scounts, *sdispls, *rcounts, *rdispls, *split;
};

/* uneven fills split[i*n+j] with what rank i sends rank j out of count
 * elements: (i+j) mod n shares of n(n-1)/2, the remainder to the largest
 * share (choreo's unevenSplit, cmd/demo/bench_exchange.go). */
static void uneven(int n, size_t count, int *split) {
	if (n == 1) { split[0] = (int)count; return; }
	size_t shares = (size_t)n * (n - 1) / 2, unit = count / shares;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			int w = (i + j) % n;
			split[i * n + j] = (int)(unit * w + (w == n - 1 ? count - unit * shares : 0));
		}
}

static void run(struct bench *b) {
	int right = (b->rank + 1) % b->n, left = (b->rank + b->n - 1) % b->n;
	switch (b->op) {
	case ALLREDUCE:
		MPI_Allreduce(b->in, b->out, (int)b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(b->in, (int)b->count, MPI_FLOAT, b->out, (int)b->count, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case SENDRECV:
		MPI_Sendrecv(b->in, (int)b->count, MPI_FLOAT, right, 7, b->out, (int)b->count, MPI_FLOAT, left, 7,
		             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		break;
	case ALLTOALL:
		MPI_Alltoall(b->in, (int)(b->count / b->n), MPI_FLOAT, b->out, (int)(b->count / b->n), MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case ALLTOALLV:
		MPI_Alltoallv(b->in, b->scounts, b->sdispls, MPI_FLOAT, b->out, b->rcounts, b->rdispls, MPI_FLOAT, MPI_COMM_WORLD);
		break;
	case GATHER:
		MPI_Gather(b->in, (int)b->count, MPI_FLOAT, b->out, (int)b->count, MPI_FLOAT, ROOT, MPI_COMM_WORLD);
		break;
	case SCATTER:
		MPI_Scatter(b->in, (int)b->count, MPI_FLOAT, b->out, (int)b->count, MPI_FLOAT, ROOT, MPI_COMM_WORLD);
		break;
	case REDUCE:
		MPI_Reduce(b->in, b->out, (int)b->count, MPI_FLOAT, MPI_SUM, ROOT, MPI_COMM_WORLD);
		break;
	case SENDRECV_BATCH: {
		MPI_Request req[2];
		MPI_Irecv(b->out, (int)b->count, MPI_FLOAT, left, 8, MPI_COMM_WORLD, &req[0]);
		MPI_Isend(b->in, (int)b->count, MPI_FLOAT, right, 8, MPI_COMM_WORLD, &req[1]);
		MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
		break;
	}
	}
}

/* wrong counts this rank's wrong output elements, then clears the output so
 * a later check cannot pass on stale data. */
static long wrong(struct bench *b) {
	long w = 0;
	size_t c = b->count;
	switch (b->op) {
	case ALLREDUCE: {
		float s = 0;
		for (int r = 0; r < b->n; r++) s += (float)(r % 3);
		for (size_t i = 0; i < c; i++) w += b->out[i] != s + (float)(b->n * (int)(i % 5));
		break;
	}
	case ALLGATHER:
		for (int r = 0; r < b->n; r++)
			for (size_t i = 0; i < c; i++) w += b->out[r * c + i] != value(r, i);
		break;
	case SENDRECV:
	case SENDRECV_BATCH: {
		int left = (b->rank + b->n - 1) % b->n;
		for (size_t i = 0; i < c; i++) w += b->out[i] != value(left, i);
		break;
	}
	case ALLTOALL: {
		size_t blk = c / b->n;
		for (int r = 0; r < b->n; r++)
			for (size_t i = 0; i < blk; i++) w += b->out[r * blk + i] != value(r, b->rank * blk + i);
		break;
	}
	case ALLTOALLV:
		for (int r = 0; r < b->n; r++) {
			size_t off = 0; /* where rank r's block for this rank starts in r's input */
			for (int j = 0; j < b->rank; j++) off += b->split[r * b->n + j];
			for (int i = 0; i < b->rcounts[r]; i++) w += b->out[b->rdispls[r] + i] != value(r, off + i);
		}
		break;
	case GATHER:
		if (b->rank == ROOT)
			for (int r = 0; r < b->n; r++)
				for (size_t i = 0; i < c; i++) w += b->out[r * c + i] != value(r, i);
		break;
	case SCATTER:
		for (size_t i = 0; i < c; i++) w += b->out[i] != value(ROOT, b->rank * c + i);
		break;
	case REDUCE:
		if (b->rank == ROOT) {
			float s = 0;
			for (int r = 0; r < b->n; r++) s += (float)(r % 3);
			for (size_t i = 0; i < c; i++) w += b->out[i] != s + (float)(b->n * (int)(i % 5));
		}
		break;
	}
	memset(b->out, 0xff, b->outn * sizeof(float)); /* NaN */
	return w;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	struct bench b;
	MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &b.n);
	const char *label = argc > 1 ? argv[1] : "mpi";
	char ops[256], sizes[1024];
	snprintf(ops, sizeof ops, "%s", argc > 2 ? argv[2] : "allreduce,allgather,sendrecv");
	snprintf(sizes, sizeof sizes, "%s", argc > 3 ? argv[3] : "4096,65536,1048576,16777216,67108864");
	char *opsave;
	for (char *opname = strtok_r(ops, ",", &opsave); opname; opname = strtok_r(0, ",", &opsave)) {
		b.op = -1;
		for (int k = 0; k < (int)(sizeof opnames / sizeof *opnames); k++)
			if (!strcmp(opname, opnames[k])) b.op = k;
		if (b.op < 0) {
			if (b.rank == 0) fprintf(stderr, "mpi_bench: unknown op %s\n", opname);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		char sz[1024], *szsave;
		snprintf(sz, sizeof sz, "%s", sizes);
		for (char *s = strtok_r(sz, ",", &szsave); s; s = strtok_r(0, ",", &szsave)) {
			size_t bytes = strtoull(s, 0, 10);
			b.count = bytes / sizeof(float);
			if (b.op == ALLTOALL) b.count -= b.count % b.n; /* equal blocks */
			if (b.count < 1) continue;
			bytes = b.count * sizeof(float);
			b.inn = b.outn = b.count;
			if (b.op == ALLGATHER || (b.op == GATHER && b.rank == ROOT)) b.outn *= b.n;
			if (b.op == SCATTER && b.rank == ROOT) b.inn *= b.n;
			b.in = malloc(b.inn * sizeof(float));
			b.out = malloc(b.outn * sizeof(float));
			b.split = malloc(sizeof(int) * b.n * b.n);
			b.scounts = malloc(sizeof(int) * 4 * b.n);
			if (!b.in || !b.out || !b.split || !b.scounts) {
				fprintf(stderr, "mpi_bench: out of memory at %zu bytes\n", bytes);
				MPI_Abort(MPI_COMM_WORLD, 3);
			}
			b.sdispls = b.scounts + b.n, b.rcounts = b.scounts + 2 * b.n, b.rdispls = b.scounts + 3 * b.n;
			uneven(b.n, b.count, b.split);
			for (int j = 0, so = 0, ro = 0; j < b.n; j++) {
				b.scounts[j] = b.split[b.rank * b.n + j], b.sdispls[j] = so, so += b.scounts[j];
				b.rcounts[j] = b.split[j * b.n + b.rank], b.rdispls[j] = ro, ro += b.rcounts[j];
			}
			for (size_t i = 0; i < b.inn; i++) b.in[i] = value(b.rank, i);
			memset(b.out, 0, b.outn * sizeof(float)); /* fault the pages in */
			run(&b);
			long bad = wrong(&b);
			int warm, timed;
			iterations(bytes, &warm, &timed);
			double *wl = malloc(sizeof(double) * warm);
			for (int i = 0; i < warm; i++) {
				double t0 = MPI_Wtime();
				run(&b);
				wl[i] = MPI_Wtime() - t0;
			}
			qsort(wl, warm, sizeof(double), cmp);
			double tw = wl[(warm - 1) / 2], twmax; /* the median: one slow op does not cut the counts */
			free(wl);
			MPI_Allreduce(&tw, &twmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			int table = timed;
			timed = capped(timed, twmax);
			if (b.rank == 0)
				fprintf(stderr, "# %s %s %zu: warm %d timed %d (table %d, warm-up median %.1f us/op)\n", label, opname,
				        bytes, warm, timed, table, twmax * 1e6);
			double *lat = malloc(sizeof(double) * timed), *latmax = malloc(sizeof(double) * timed);
			for (int i = 0; i < timed; i++) {
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				run(&b);
				lat[i] = MPI_Wtime() - t0;
			}
			MPI_Allreduce(lat, latmax, timed, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int i = 0; i < timed; i++) run(&b);
			double batch = (MPI_Wtime() - t0) / timed, bmax;
			MPI_Allreduce(&batch, &bmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			bad += wrong(&b); /* the batch's last op */
			long badAll;
			MPI_Reduce(&bad, &badAll, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
			if (b.rank == 0) {
				qsort(latmax, timed, sizeof(double), cmp);
				int wide = b.op == ALLGATHER || b.op == GATHER || b.op == SCATTER;
				double moved = (double)bytes * (wide ? b.n : 1);
				double algbw = moved / bmax / 1e9;
				double factor = b.op == ALLREDUCE ? 2.0 * (b.n - 1) / b.n
				                : wide || b.op == ALLTOALL || b.op == ALLTOALLV ? (double)(b.n - 1) / b.n
				                                                                  : 1.0;
				const char *redop = b.op == ALLREDUCE || b.op == REDUCE ? "sum" : b.op == ALLTOALLV ? "(i+j)%N" : "-";
				printf("%s\t%s\t%zu\t%zu\tfloat32\t%s\t%.1f\t%.1f\t%.3f\t%.3f\t%ld\n", label, opname, bytes, b.count,
				       redop, bmax * 1e6, latmax[timed / 2] * 1e6, algbw, algbw * factor, badAll);
				fflush(stdout);
			}
			free(lat);
			free(latmax);
			free(b.in);
			free(b.out);
			free(b.split);
			free(b.scounts);
		}
	}
	MPI_Finalize();
	return 0;
}
