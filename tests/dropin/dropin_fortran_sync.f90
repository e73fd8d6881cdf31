! dropin_fortran_sync.f90 -- the rest of the Fortran one-sided interface (`use mpi`):
! MPI_Init_thread, PSCW (wait and test), lock / unlock with flush_local, flush_all,
! flush_local_all and win_sync, get_accumulate and compare_and_swap, the request-based
! operations completed by MPI_Wait / MPI_Waitall, a dynamic window (attach / detach), group,
! info, MPI_Win_get_errhandler and MPI_Win_call_errhandler. Runs with 2 or more ranks.

program dropin_fortran_sync
  use mpi
  implicit none
  integer, parameter :: n = 4
  integer, parameter :: i8 = selected_int_kind(18)
  integer :: ierr, rank, nprocs, right, left, provided, win, dwin, i, world, grp_left
  integer :: grp_right, wgroup, cmp, info, info_used, eh, nkeys, reqs(4)
  integer(kind=MPI_ADDRESS_KIND) :: winsize, disp, addr, raddr
  integer(kind=i8), asynchronous :: mem(n), dyn(n)
  integer(kind=i8) :: src(n), got(n), one, old, cmpv, newv
  logical :: flag, sync_reg_ok
  character(len=MPI_MAX_INFO_VAL) :: value

  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call check(ierr == MPI_SUCCESS .and. provided == MPI_THREAD_FUNNELED, 'MPI_Init_thread')
  call MPI_Query_thread(i, ierr)
  call check(i == provided, 'MPI_Query_thread')
  sync_reg_ok = .not. host_run_on_mpich()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)

  mem = -1_i8
  winsize = n * 8
  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'accumulate_ordering', 'none', ierr)
  call MPI_Win_create(mem, winsize, 8, info, MPI_COMM_WORLD, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_create')
  call MPI_Info_free(info, ierr)

  ! ---- group and info ----
  call MPI_Win_get_group(win, wgroup, ierr)
  call MPI_Comm_group(MPI_COMM_WORLD, world, ierr)
  call MPI_Group_compare(wgroup, world, cmp, ierr)
  call check(cmp == MPI_IDENT, 'MPI_Win_get_group')
  call MPI_Group_free(wgroup, ierr)
  call MPI_Win_get_info(win, info_used, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_get_info')
  call MPI_Info_get_nkeys(info_used, nkeys, ierr)
  call MPI_Info_get(info_used, 'accumulate_ordering', MPI_MAX_INFO_VAL, value, flag, ierr)
  if (flag) call check(trim(value) == 'none', 'the accumulate_ordering hint')
  call MPI_Info_free(info_used, ierr)
  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'no_locks', 'false', ierr)
  call MPI_Win_set_info(win, info, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_set_info')
  call MPI_Info_free(info, ierr)

  ! ---- PSCW: expose to the left neighbour, access the right one ----
  call MPI_Group_incl(world, 1, [left], grp_left, ierr)
  call MPI_Group_incl(world, 1, [right], grp_right, ierr)
  do i = 1, n
    src(i) = rank * 10 + i
  end do
  call MPI_Win_post(grp_left, 0, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_post')
  call MPI_Win_start(grp_right, 0, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_start')
  disp = 0
  call MPI_Put(src, n, MPI_INTEGER8, right, disp, n, MPI_INTEGER8, win, ierr)
  call MPI_Win_complete(win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_complete')
  call MPI_Win_wait(win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_wait')
  if (sync_reg_ok) call MPI_F_sync_reg(mem)
  do i = 1, n
    call check(mem(i) == left * 10 + i, 'value after PSCW / wait')
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)  ! the next epoch writes mem again
  call MPI_Win_post(grp_left, 0, win, ierr)
  call MPI_Win_start(grp_right, 0, win, ierr)
  src = src + 100
  call MPI_Put(src, n, MPI_INTEGER8, right, disp, n, MPI_INTEGER8, win, ierr)
  call MPI_Win_complete(win, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Win_test(win, flag, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Win_test')
  end do
  if (sync_reg_ok) call MPI_F_sync_reg(mem)
  call check(mem(n) == left * 10 + n + 100, 'value after PSCW / test')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  ! ---- lock / unlock with the flush family; atomics ----
  if (rank == 0) then
    call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win, ierr)
    mem = 0_i8
    call MPI_Win_unlock(0, win, ierr)
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_lock')
  one = 1
  disp = 0
  call MPI_Get_accumulate(one, 1, MPI_INTEGER8, old, 1, MPI_INTEGER8, 0, disp, 1, &
                          MPI_INTEGER8, MPI_SUM, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Get_accumulate')
  call MPI_Win_flush_local(0, win, ierr)
  call check(ierr == MPI_SUCCESS .and. old >= 0 .and. old < nprocs, 'get_accumulate result')
  cmpv = 0
  newv = rank + 1
  disp = 1
  call MPI_Compare_and_swap(newv, cmpv, old, MPI_INTEGER8, 0, disp, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Compare_and_swap')
  call MPI_Win_flush_all(win, ierr)
  call MPI_Win_flush_local_all(win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_flush_local_all')
  call check(old == 0 .or. (old >= 1 .and. old <= nprocs), 'compare_and_swap result')
  call MPI_Win_unlock(0, win, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_unlock')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win, ierr)
    call MPI_Win_sync(win, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_Win_sync')
    if (sync_reg_ok) call MPI_F_sync_reg(mem)
    call check(mem(1) == nprocs, 'get_accumulate sum')
    call check(mem(2) >= 1 .and. mem(2) <= nprocs, 'one compare_and_swap won')
    call MPI_Win_unlock(0, win, ierr)
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  ! ---- request-based operations ----
  call MPI_Win_lock_all(0, win, ierr)
  disp = 2
  call MPI_Rput(src, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, win, reqs(1), ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Rput')
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Win_flush(right, win, ierr)
  got = 0
  call MPI_Rget(got, 1, MPI_INTEGER8, right, disp, 1, MPI_INTEGER8, win, reqs(1), ierr)
  disp = 3
  call MPI_Raccumulate(one, 1, MPI_INTEGER8, 0, disp, 1, MPI_INTEGER8, MPI_SUM, win, reqs(2), ierr)
  call MPI_Rget_accumulate(one, 1, MPI_INTEGER8, old, 1, MPI_INTEGER8, 0, disp, 1, &
                           MPI_INTEGER8, MPI_SUM, win, reqs(3), ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Rget_accumulate')
  call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Waitall')
  call check(got(1) == src(1), 'MPI_Rget value')
  call MPI_Win_unlock_all(win, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win, ierr)
    if (sync_reg_ok) call MPI_F_sync_reg(mem)
    call check(mem(4) == 2 * nprocs, 'raccumulate + rget_accumulate sum')
    call MPI_Win_unlock(0, win, ierr)
  end if

  ! ---- error handler queries ----
  call MPI_Win_get_errhandler(win, eh, ierr)
  call check(ierr == MPI_SUCCESS .and. eh == MPI_ERRORS_ARE_FATAL, 'MPI_Win_get_errhandler')
  call MPI_Errhandler_free(eh, ierr)
  call MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN, ierr)
  call MPI_Win_call_errhandler(win, MPI_ERR_OTHER, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_call_errhandler with MPI_ERRORS_RETURN')
  call MPI_Win_free(win, ierr)

  ! ---- a dynamic window ----
  call MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, dwin, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_create_dynamic')
  dyn = -1_i8
  winsize = n * 8
  call MPI_Win_attach(dwin, dyn, winsize, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_attach')
  call MPI_Get_address(dyn, addr, ierr)
  call MPI_Sendrecv(addr, 1, MPI_AINT, left, 0, raddr, 1, MPI_AINT, right, 0, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Win_lock_all(0, dwin, ierr)
  call MPI_Put(src, n, MPI_INTEGER8, right, raddr, n, MPI_INTEGER8, dwin, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Put to a dynamic window')
  call MPI_Win_flush(right, dwin, ierr)
  call MPI_Win_unlock_all(dwin, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (sync_reg_ok) call MPI_F_sync_reg(dyn)
  call check(dyn(1) == left * 10 + 1 + 100, 'value in the dynamic window')
  call MPI_Win_detach(dwin, dyn, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Win_detach')
  call MPI_Win_free(dwin, ierr)

  call MPI_Group_free(grp_left, ierr)
  call MPI_Group_free(grp_right, ierr)
  call MPI_Group_free(world, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', '-- fortran sync: all passed'
  call MPI_Finalize(ierr)

contains

  ! host_run_on_mpich: MPICH 4.0.2's
  ! MPI_F_SYNC_REG stores through an IERROR argument the routine does not have (and
  ! crashes): those runs leave it out (docs/dropin.md).
  include 'host_run_on_mpich.inc'

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      write (0, '(a, i0, 2a)') 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
      stop 1
    end if
  end subroutine check

end program dropin_fortran_sync
