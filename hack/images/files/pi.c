/*
 * Computes pi as the integral of 4 / (1 + x^2) over [0, 1] with the midpoint
 * rule, the intervals split round-robin across the ranks, and reports where
 * every rank ran so a caller can see that each host took part.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define INTERVALS 20000000L

int main(int argc, char **argv) {
    int rank, size, name_len;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(host, 0, sizeof host);
    MPI_Get_processor_name(host, &name_len);

    const double width = 1.0 / (double)INTERVALS;
    double partial = 0.0;
    for (long i = rank; i < INTERVALS; i += size) {
        const double x = ((double)i + 0.5) * width;
        partial += 4.0 / (1.0 + x * x);
    }
    partial *= width;

    double pi = 0.0;
    MPI_Reduce(&partial, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    /* Rank 0 prints every rank's host, in rank order, so the output is stable. */
    char all_hosts[size > 0 ? size : 1][MPI_MAX_PROCESSOR_NAME];
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all_hosts, MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ranks: %d\n", size);
        for (int r = 0; r < size; r++) {
            printf("rank %d on %s\n", r, all_hosts[r]);
        }
        printf("pi is approximately %.12f, error %.1e\n", pi, fabs(pi - M_PI));
    }
    MPI_Finalize();
    return 0;
}
