! osc_f08.f90 — Fortran 2008 bindings (use mpi_f08, which the drop-in cannot reach) on the
! osc component: an allocate window with put, get and accumulate between fences, and a put
! under an exclusive lock, each checked at its target.
program osc_f08
  use, intrinsic :: iso_c_binding
  use mpi_f08
  implicit none
  type(MPI_Win) :: win
  type(c_ptr) :: cbase
  integer(kind=MPI_ADDRESS_KIND) :: nbytes, disp
  integer(kind=8), pointer, asynchronous :: mem(:)
  integer(kind=8) :: value, fetched
  integer :: rank, nprocs, right, left, ierr

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)

  nbytes = 3 * 8
  call MPI_Win_allocate(nbytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, cbase, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_allocate')
  call c_f_pointer(cbase, mem, [3])
  mem = 0

  ! put and accumulate into the right neighbour, between fences
  call MPI_Win_fence(0, win, ierr)
  value = 100 + rank
  disp = 0
  call MPI_Put(value, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Put')
  disp = 1
  call MPI_Accumulate(value, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, MPI_SUM, win, ierr)
  call MPI_Accumulate(value, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, MPI_SUM, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  if (.not. MPI_ASYNC_PROTECTS_NONBLOCKING) call MPI_F_sync_reg(mem)
  call check(mem(1) == 100 + left, 'the put landed')
  call check(mem(2) == 2 * (100 + left), 'both accumulates landed')

  ! get the right neighbour's first word
  fetched = -1
  disp = 0
  call MPI_Get(fetched, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call check(fetched == 100 + rank, 'MPI_Get read the neighbour')

  ! put under an exclusive lock, seen by the target after a barrier
  value = 7000 + rank
  disp = 2
  call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win, ierr)
  call MPI_Put(value, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, win, ierr)
  call MPI_Win_unlock(right, win, ierr)
  call check(ierr == MPI_SUCCESS, 'lock / put / unlock')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win, ierr)
  if (.not. MPI_ASYNC_PROTECTS_NONBLOCKING) call MPI_F_sync_reg(mem)
  call check(mem(3) == 7000 + left, 'the locked put landed')
  call MPI_Win_unlock(rank, win, ierr)

  call MPI_Win_free(win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_free')
  call MPI_Finalize(ierr)
  if (rank == 0) print '(a)', 'osc_f08: PASS'

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a,i0,2a)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine check
end program osc_f08
