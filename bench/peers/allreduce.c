/*
 * allreduce.c: the MPI peer of `demo bench` (see run.sh). float32 SUM
 * all-reduce, out of place, over a size sweep, with the method of
 * ../../../shared/reference/peers.md: a correctness check first, warm-up and
 * timed counts by size, per-op latency (median, each op after a barrier,
 * max over ranks) and nccl-tests batch time (ops back to back after one
 * barrier). Prints rows in demo bench's column order.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void iterations(size_t bytes, int *warm, int *timed) {
	if (bytes <= 4 << 10) { *warm = 50; *timed = 1000; }
	else if (bytes <= 64 << 10) { *warm = 20; *timed = 500; }
	else if (bytes <= 1 << 20) { *warm = 10; *timed = 100; }
	else if (bytes <= 16 << 20) { *warm = 3; *timed = 20; }
	else { *warm = 2; *timed = 10; }
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	const char *label = argc > 1 ? argv[1] : "mpi";
	size_t minb = argc > 2 ? strtoull(argv[2], 0, 10) : 4096;
	size_t maxb = argc > 3 ? strtoull(argv[3], 0, 10) : 64u << 20;
	size_t factor = argc > 4 ? strtoull(argv[4], 0, 10) : 16;
	for (size_t bytes = minb; bytes <= maxb; bytes *= factor) {
		size_t count = bytes / sizeof(float);
		float *in = malloc(bytes), *out = malloc(bytes);
		for (size_t i = 0; i < count; i++) in[i] = (float)(rank % 3);
		MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		float want = 0;
		for (int r = 0; r < n; r++) want += (float)(r % 3);
		long wrong = 0;
		for (size_t i = 0; i < count; i++) wrong += out[i] != want;
		int warm, timed;
		iterations(bytes, &warm, &timed);
		for (int i = 0; i < warm; i++)
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double *lat = malloc(sizeof(double) * timed);
		for (int i = 0; i < timed; i++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			double t = MPI_Wtime() - t0, tmax;
			MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
			lat[i] = tmax;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < timed; i++)
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double batch = (MPI_Wtime() - t0) / timed, bmax;
		MPI_Allreduce(&batch, &bmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		long wrongAll;
		MPI_Reduce(&wrong, &wrongAll, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			qsort(lat, timed, sizeof(double), cmp);
			double algbw = (double)bytes / bmax / 1e9;
			printf("%s\tallreduce\t%zu\t%zu\tfloat32\tsum\t%.1f\t%.1f\t%.3f\t%.3f\t%ld\n", label, bytes, count,
			       bmax * 1e6, lat[timed / 2] * 1e6, algbw, algbw * 2.0 * (n - 1) / n, wrongAll);
			fflush(stdout);
		}
		free(lat);
		free(in);
		free(out);
	}
	MPI_Finalize();
	return 0;
}
