/*
 * osc_count_put.c — a minimal PMPI tool (libosc_count_put.so): it defines MPI_Put, counts the
 * call and passes it on to PMPI_Put. Linked before libmpi, it sees the application's puts
 * whichever one-sided component serves the window.
 */
#include <mpi.h>

static int calls;

int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
    ++calls;
    return PMPI_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype,
                    win);
}

/* The MPI_Put calls seen so far. */
int osc_count_put_calls(void) { return calls; }
