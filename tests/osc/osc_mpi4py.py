"""osc_mpi4py.py — a Python client (mpi4py) on the osc component: put, get and accumulate
between fences, and fetch-and-op under a lock, on an allocate window; each result checked."""
import sys

try:
    from mpi4py import MPI
except ImportError:
    print("osc_mpi4py: mpi4py is not installed (python3-mpi4py; scripts/setup.sh installs it)")
    sys.exit(77)
import array


def check(ok, what):
    if not ok:
        print(f"FAIL rank {MPI.COMM_WORLD.Get_rank()}: {what}", flush=True)
        MPI.COMM_WORLD.Abort(1)


comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

win = MPI.Win.Allocate(4 * 8, 8, comm=comm)
mem = memoryview(win.tomemory()).cast("B").cast("q")
mem[:] = array.array("q", [0, 0, 0, 0])

win.Fence()
win.Put(array.array("q", [100 + rank]), right, target=0)
win.Accumulate(array.array("q", [rank + 1]), right, target=1, op=MPI.SUM)
win.Accumulate(array.array("q", [rank + 1]), right, target=1, op=MPI.SUM)
win.Fence()
check(mem[0] == 100 + left, "put landed")
check(mem[1] == 2 * (left + 1), "accumulates landed")

got = array.array("q", [-1])
win.Get(got, right, target=0)
win.Fence()
check(got[0] == 100 + rank, "get read the neighbour")

# every rank adds 1 to rank 0's word 2 under a shared lock; each fetched value once
old = array.array("q", [-1])
win.Lock(0, MPI.LOCK_SHARED)
win.Fetch_and_op(array.array("q", [1]), old, 0, target_disp=2, op=MPI.SUM)
win.Unlock(0)
olds = comm.allgather(old[0])
comm.Barrier()
if rank == 0:
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    check(mem[2] == size, "every fetch_and_op landed")
    win.Unlock(0)
check(sorted(olds) == list(range(size)), "each fetched value once")

info = win.Get_info()
check(info.Get("fastrma_transport") is not None, "the window is fastrma's (fastrma_transport)")
info.Free()
win.Free()
if rank == 0:
    print("osc_mpi4py: PASS", flush=True)
