#!/usr/bin/env bash
# ofi_bench.sh [ROUNDS] [OUTDIR] — fastrma over ofi against the peers on the same wire, in
# interleaved rounds on the current build (build/): latency (put, get, accumulate,
# fetch_and_op, compare_and_swap under lock_all + flush, lock, fence, PSCW), bandwidth,
# message rate and overlap with a target that computes instead of waiting in MPI.
#
# Every implementation runs rma_suite --mode p2p --quick on 2 local ranks, allocate windows,
# sections lat,bw,rate,overlap, with TCP over the loopback interface as the only wire:
#   fastrma-ofi   FASTRMA_TRANSPORT=ofi, libfabric tcp;ofi_rxm bound to lo (FI_TCP_IFACE=lo)
#   fastrma-am    FASTRMA_TRANSPORT=am over Open MPI's ob1 + btl tcp (lo), no shared memory
#   ompi-ucx      Open MPI osc ucx + pml ucx, UCX_TLS=tcp,self on lo
#   mpich-ucx     MPICH 4 ch4:ucx (rma_suite built with mpicxx.mpich), UCX_TLS=tcp,self on lo
#   ompi-pt2pt    Open MPI osc pt2pt over ob1 + btl tcp (lo) (MPI_THREAD_SERIALIZED)
# One round runs each once, one right after the other, so that all see the same machine; the
# report takes per point the median over the rounds, and prints tables with each peer's time
# divided by fastrma-ofi's (> 1: ofi faster), and for the target computing (the overlap
# section's op + flush with the target outside MPI) its ratio to the same op + flush with the
# target waiting in MPI_Barrier (lat.flush).
# Each round also runs build/bench/wire_rtt on the same wire (the host MPI's 8-byte ping-pong
# over ob1/tcp, libfabric's send, fetch-atomic, write and read round trips on tcp;ofi_rxm):
# the floor that no op + flush can beat, and each implementation's 8-byte op + flush in
# multiples of it.
# Raw outputs stay in OUTDIR (default bench-results/ofi), the table in OUTDIR/report.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
out=${2:-bench-results/ofi}
suite=build/bench/rma_suite
[[ -x $suite ]] || { echo "ofi_bench.sh: $suite not built (make -C build rma_suite)" >&2; exit 2; }
mkdir -p "$out"
mpich_bin=build/bench/rma_suite_mpich
if command -v mpicxx.mpich > /dev/null && command -v mpiexec.mpich > /dev/null; then
  if [[ ! -x $mpich_bin || bench/rma_suite.cpp -nt $mpich_bin ]]; then
    mpicxx.mpich -O2 -std=c++20 -pthread -DRMA_SUITE_NO_FASTRMA bench/rma_suite.cpp -o "$mpich_bin"
  fi
else
  mpich_bin=
  echo "ofi_bench.sh: MPICH not installed (mpich): no mpich-ucx column" >&2
fi
mpiexec=$(command -v mpiexec.openmpi || command -v mpiexec)
[[ $(id -u) == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi=("$mpiexec" -n 2 --oversubscribe --bind-to none)
tcp_ob1=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
ucx_tcp=(--mca pml ucx --mca osc ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
         -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=lo)
args=(--mode p2p --quick --flavors allocate --sections lat,bw,rate,overlap)
to=${OFI_BENCH_TIMEOUT:-600}
{
  echo "started: $(date -u '+%F %T UTC'), rounds: $rounds, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
} > "$out/settings.txt"
for ((i = 1; i <= rounds; ++i)); do
  echo "ofi_bench.sh: round $i of $rounds" >&2
  if [[ -x build/bench/wire_rtt ]]; then
    timeout "$to" "${ompi[@]}" "${tcp_ob1[@]}" -x FI_TCP_IFACE=lo build/bench/wire_rtt > "$out/wire-rtt_$i.txt" 2>&1 ||
      echo "  wire_rtt: exit $?" >&2
  fi
  timeout "$to" "${ompi[@]}" "${tcp_ob1[@]}" --mca osc pt2pt -x FASTRMA_TRANSPORT=ofi -x FI_TCP_IFACE=lo \
    -x FI_SOCKETS_IFACE=lo "$suite" "${args[@]}" --impl fastrma --fastrma-label fastrma-ofi \
    > "$out/fastrma-ofi_$i.txt" 2>&1 || echo "  fastrma-ofi: exit $?" >&2
  timeout "$to" "${ompi[@]}" "${tcp_ob1[@]}" --mca osc pt2pt -x FASTRMA_TRANSPORT=am "$suite" "${args[@]}" \
    --impl fastrma --fastrma-label fastrma-am > "$out/fastrma-am_$i.txt" 2>&1 || echo "  fastrma-am: exit $?" >&2
  timeout "$to" "${ompi[@]}" "${ucx_tcp[@]}" "$suite" "${args[@]}" --impl mpi --mpi-label ompi-ucx \
    > "$out/ompi-ucx_$i.txt" 2>&1 || echo "  ompi-ucx: exit $?" >&2
  if [[ -n $mpich_bin ]]; then
    timeout "$to" mpiexec.mpich -n 2 -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES lo "$mpich_bin" "${args[@]}" \
      --impl mpi --mpi-label mpich-ucx > "$out/mpich-ucx_$i.txt" 2>&1 || echo "  mpich-ucx: exit $?" >&2
  fi
  timeout "$to" "${ompi[@]}" "${tcp_ob1[@]}" --mca osc pt2pt "$suite" "${args[@]}" --impl mpi --thread serialized \
    --mpi-label ompi-pt2pt > "$out/ompi-pt2pt_$i.txt" 2>&1 || echo "  ompi-pt2pt: exit $?" >&2
done
echo "finished: $(date -u '+%F %T UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/settings.txt"
python3 bench/ofi_report.py "$out" | tee "$out/report.md"
