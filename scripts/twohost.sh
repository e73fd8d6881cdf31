#!/bin/bash
# twohost.sh — two "hosts" on one machine, for MPI jobs whose ranks span nodes.
#
# Each host is a network namespace (frma-a, frma-b) joined to the other by one veth pair
# whose ends are both named frma0, with an address from TWOHOST_SUBNET that exists only
# inside those namespaces, and lo up. Every process launched on a host also gets a UTS
# namespace of its own with that host's name (frma-host-a, frma-host-b), so gethostname(),
# Open MPI and fastrma's node detection all see two machines. Nothing is added to the root
# namespace. The MPI launchers reach host B through an rsh agent (twohost_agent.sh, which
# calls `twohost.sh agent`); mpiexec itself runs on host A.
#
#   twohost.sh check                 exit 0 if the namespaces can be made here; else say why, exit 77
#   twohost.sh up                    make both hosts (removing leftovers of an earlier run first)
#   twohost.sh down                  remove everything: processes left in the namespaces, the
#                                    namespaces (the veth pair goes with them), the state dir
#   twohost.sh status                what exists now
#   twohost.sh env [--mpich]         the launcher settings `run` exports, as shell lines
#   twohost.sh run [--mpich] [--timeout SECONDS | --deadline EPOCH] [--] CMD [ARGS...]
#                                    run CMD on host A with the launcher settings exported
#                                    (OMPI_MCA_* for Open MPI, HYDRA_* with --mpich), so that
#                                    a plain `mpiexec.openmpi -n 4 ./prog` puts ranks 0,1 on
#                                    host A and 2,3 on host B. Brings the hosts up first and
#                                    down afterwards (also on failure, signal or timeout)
#                                    unless they were up already. Exit status: CMD's; 77 if
#                                    the namespaces cannot be made; 124 on timeout (the
#                                    time starts when this run has the hosts to itself;
#                                    --deadline: end CMD at that absolute time, lock wait
#                                    included, as under a test harness's own limit).
#   twohost.sh agent [-opts] HOST CMD...   the rsh agent: run CMD (joined with spaces, as ssh
#                                    does) on HOST (an address, host name or namespace name)
#
# Variables reach the ranks on host B only as they would over ssh: the agent starts the
# remote daemon with a clean login environment (PATH, HOME, USER, LOGNAME, SHELL, LANG),
# so pass what the ranks need with the launcher (Open MPI: -x NAME[=VALUE]; hydra: -genv).
# TWOHOST_AGENT_ENV=keep makes the agent pass its whole environment instead.
set -u

SUBNET=${TWOHOST_SUBNET:-10.213.77.0/24}   # a /24; only ever assigned inside the namespaces
NET=${SUBNET%.*}                              # 10.213.77
ADDR_A=$NET.1
ADDR_B=$NET.2
NS_A=frma-a
NS_B=frma-b
HOST_A=frma-host-a
HOST_B=frma-host-b
IFACE=frma0
SLOTS=${TWOHOST_SLOTS:-2}
STATE=/run/frma-twohost                       # hostfiles; removed by down
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
AGENT=$HERE/twohost_agent.sh

say() { echo "twohost: $*" >&2; }

# --- check -------------------------------------------------------------------------------
# Everything up needs, tried for real on a throwaway namespace: prints the reason and
# returns 77 when something is missing.
check() {
    local quiet=${1:-}
    local why=""
    if [ "$(id -u)" != 0 ]; then
        why="not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    else
        local tool
        for tool in ip unshare hostname flock timeout; do
            command -v "$tool" >/dev/null 2>&1 || { why="'$tool' not found"; break; }
        done
    fi
    if [ -z "$why" ]; then
        local probe=frma-check-$$ err
        if ! err=$(ip netns add "$probe" 2>&1); then
            why="cannot make a network namespace: $err"
        elif ! err=$(ip -n "$probe" link add frma-c0 type veth peer name frma-c1 2>&1); then
            why="cannot make a veth pair: $err"
        elif ! err=$(ip netns exec "$probe" unshare --uts sh -c 'hostname frma-check' 2>&1); then
            why="cannot enter the namespace with a UTS namespace of its own: $err"
        fi
        ip netns del "$probe" >/dev/null 2>&1
    fi
    if [ -n "$why" ]; then
        say "namespaces cannot be made here: $why"
        return 77
    fi
    [ -n "$quiet" ] || say "ok: network and UTS namespaces, veth pairs"
    return 0
}

is_up() {
    [ -e /run/netns/$NS_A ] && [ -e /run/netns/$NS_B ] && [ -f $STATE/hostfile ] &&
        ip -n $NS_A -o addr show dev $IFACE 2>/dev/null | grep -q "inet $ADDR_A/" &&
        ip -n $NS_B -o addr show dev $IFACE 2>/dev/null | grep -q "inet $ADDR_B/"
}

# --- down --------------------------------------------------------------------------------
# Every namespace named frma-* is ours (the prefix is this script's). Processes still in
# one (ranks, daemons of a crashed job) would keep it alive after `ip netns del`: they are
# ended first, by pid, TERM then KILL.
down() {
    local ns pids p i
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^frma-/ {print $1}'); do
        # A probe of a check still running (check takes no lock) is that check's to remove.
        case "$ns" in frma-check-*) kill -0 "${ns#frma-check-}" 2>/dev/null && continue ;; esac
        for i in 1 2 3 4 5 6 7 8 9 10 11; do
            pids=$(ip netns pids "$ns" 2>/dev/null | grep -vx -e "$$" -e "$PPID" || true)
            [ -n "$pids" ] || break
            if [ $i -eq 1 ]; then
                say "ending processes left in $ns: $(echo $pids)"
                kill -TERM $pids 2>/dev/null
            elif [ $i -eq 10 ]; then
                kill -KILL $pids 2>/dev/null
            fi
            sleep 0.2
        done
        ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
    done
    rm -rf $STATE
    # The veth pair lived only in the namespaces; nothing of ours may stay in the root one.
    if ip -o link show 2>/dev/null | grep -q ": $IFACE[@:]"; then
        say "warning: an interface $IFACE is in the root namespace (not made by this script)"
    fi
    return 0
}

# --- up ----------------------------------------------------------------------------------
up() {
    check quiet || return 77
    down
    set -e
    ip netns add $NS_A
    ip netns add $NS_B
    # Made inside A with its peer end moved straight into B: the pair never exists in the
    # root namespace.
    ip -n $NS_A link add $IFACE type veth peer name $IFACE netns $NS_B
    local ns addr
    for ns in $NS_A $NS_B; do
        [ $ns = $NS_A ] && addr=$ADDR_A || addr=$ADDR_B
        # IPv4 only on the pair: no link-local v6 address for a launcher to pick up.
        ip netns exec $ns sh -c "echo 1 > /proc/sys/net/ipv6/conf/$IFACE/disable_ipv6" 2>/dev/null || true
        ip -n $ns addr add $addr/${SUBNET#*/} dev $IFACE
        ip -n $ns link set lo up
        ip -n $ns link set $IFACE up
    done
    set +e
    for _ in $(seq 50); do
        ip -n $NS_A link show $IFACE | grep -q LOWER_UP && ip -n $NS_B link show $IFACE | grep -q LOWER_UP && break
        sleep 0.1
    done
    mkdir -p $STATE
    printf '%s slots=%s\n%s slots=%s\n' $ADDR_A "$SLOTS" $ADDR_B "$SLOTS" > $STATE/hostfile
    printf '%s:%s\n%s:%s\n' $ADDR_A "$SLOTS" $ADDR_B "$SLOTS" > $STATE/hostfile.mpich
    say "up: $NS_A ($HOST_A, $ADDR_A) <-> $NS_B ($HOST_B, $ADDR_B) on $IFACE"
}

status() {
    local ns
    if ! ip netns list 2>/dev/null | grep -q '^frma-'; then
        echo "down: no frma-* namespace"
        return 1
    fi
    for ns in $(ip netns list | awk '$1 ~ /^frma-/ {print $1}'); do
        echo "$ns:"
        ip -n "$ns" -br addr 2>/dev/null | sed 's/^/  /'
        echo "  processes: $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    done
    [ -d $STATE ] && echo "state: $STATE ($(ls $STATE | tr '\n' ' '))"
    is_up && echo "up" || { echo "incomplete (run: $0 down)"; return 1; }
}

# --- launcher settings -------------------------------------------------------------------
# Open MPI: MCA parameters from the environment (mpiexec passes them on to the remote
# daemons on their command line: plm_rsh_pass_environ_mca_params), so that a plain
# mpiexec, or one inside a test script, picks them up. byslot mapping: ranks 0..SLOTS-1 on
# host A. pml ob1 over btl tcp between the hosts and vader within one; the root and
# oversubscription settings as tests/ (cmake/host_mpi.cmake). mpi_preconnect_mpi: every
# pair's TCP connection is made in MPI_Init, while one thread per process runs, not at a
# pair's first message while several threads are inside MPI; one run that connected lazily
# printed "Open MPI failed to TCP connect to a peer" during a stall (docs/twohost.md, "Stalls
# over TCP": the stalls themselves remained with preconnect). mpi_yield_when_idle=0: Open
# MPI cannot see that the two hosts share this machine's cores (each hostfile entry has 2
# slots) and would not yield anyway; it is set explicitly because yielding threads trigger
# a kernel scheduling bug here that starves ksoftirqd, and with it the hosts' TCP, for up to
# a minute (docs/twohost.md, "Yielding and the scheduler"; the ranks then spin in the host
# MPI's own waits, which is slower but never stalled).
env_lines() {
    local mpich=$1
    if [ "$mpich" = 1 ]; then
        cat <<EOF
export HYDRA_LAUNCHER=rsh
export HYDRA_LAUNCHER_EXEC=$AGENT
export HYDRA_HOST_FILE=$STATE/hostfile.mpich
export HYDRA_IFACE=$IFACE
export UCX_NET_DEVICES=$IFACE,lo
export TWOHOST_IFACE=$IFACE
EOF
    else
        cat <<EOF
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$AGENT
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_orte_default_hostfile=$STATE/hostfile
export OMPI_MCA_rmaps_base_mapping_policy=slot
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=tcp,vader,self
export OMPI_MCA_btl_tcp_if_include=$SUBNET
export OMPI_MCA_oob_tcp_if_include=$SUBNET
export OMPI_MCA_mpi_preconnect_mpi=1
export OMPI_MCA_mpi_yield_when_idle=0
export TWOHOST_IFACE=$IFACE
EOF
    fi
}

# --- the rsh agent -----------------------------------------------------------------------
# Called as ssh would be: [options] HOST WORDS...; the words are joined with spaces and run
# by a shell on HOST, here in HOST's network namespace, under a UTS namespace with HOST's
# name, with a login-like environment.
agent() {
    while [ $# -gt 0 ]; do
        case "$1" in
            -l|-p|-o|-i|-F) shift 2 ;;     # ssh options with a value
            -*) shift ;;                   # -x, -T, -q, ...
            *) break ;;
        esac
    done
    [ $# -ge 1 ] || { say "agent: no host"; exit 255; }
    local host=$1 ns name
    shift
    case "$host" in
        "$ADDR_A"|"$HOST_A"|"$NS_A") ns=$NS_A name=$HOST_A ;;
        "$ADDR_B"|"$HOST_B"|"$NS_B") ns=$NS_B name=$HOST_B ;;
        *) say "agent: unknown host '$host' (known: $ADDR_A $HOST_A $ADDR_B $HOST_B)"; exit 255 ;;
    esac
    local cmd="$*"
    # TWOHOST_AGENT_LOG=FILE: one line per launch (host, command), for debugging launchers.
    [ -n "${TWOHOST_AGENT_LOG:-}" ] && echo "$host: $cmd" >> "$TWOHOST_AGENT_LOG"
    local envp=(env)
    if [ "${TWOHOST_AGENT_ENV:-}" != keep ]; then
        envp=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
              HOME="${HOME:-/root}" USER="$(id -un)" LOGNAME="$(id -un)" SHELL=/bin/sh
              LANG="${LANG:-C.UTF-8}")
    fi
    exec ip netns exec "$ns" unshare --uts "${envp[@]}" \
        sh -c 'hostname "$1" || exit 255; exec sh -c "$2"' sh "$name" "$cmd"
}

# --- run ---------------------------------------------------------------------------------
run() {
    local mpich=0 limit="" deadline=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --mpich) mpich=1; shift ;;
            --timeout) limit=$2; shift 2 ;;
            --deadline) deadline=$2; shift 2 ;;
            --) shift; break ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || { say "run: no command"; exit 2; }
    check quiet || exit 77
    # Hosts made by `up` stay for the next command; hosts left by a run that died (killed
    # before its trap ran) are made anew and removed afterwards.
    child=""
    if ! is_up || [ "$(cat $STATE/owner 2>/dev/null)" != manual ]; then
        trap 'down' EXIT
        up || exit $?
        echo "run $$" > $STATE/owner
    fi
    # A signal ends the command (the EXIT trap then removes the hosts if this run made them).
    trap 'stop 130' INT
    trap 'stop 143' TERM
    trap 'stop 129' HUP
    eval "$(env_lines $mpich)"
    # --deadline: an absolute time (date +%s), counted once the lock is ours.
    if [ -n "$deadline" ]; then
        limit=$((deadline - $(date +%s)))
        [ $limit -ge 1 ] || { say "run: deadline passed while waiting for the hosts"; exit 124; }
    fi
    local pre=()
    [ -n "$limit" ] && pre=(timeout -k 10 "$limit")
    # In the background so that a signal is handled at once (bash runs traps only between
    # foreground commands); stdin is the caller's.
    ip netns exec $NS_A unshare --uts sh -c 'hostname "$1" || exit 255; shift; exec "$@"' \
        sh $HOST_A "${pre[@]}" "$@" <&0 9<&- &
    child=$!
    wait $child
    local rc=$?
    [ $rc -eq 124 ] && [ -n "$limit" ] && say "run: timed out after $limit s"
    exit $rc
}

stop() {
    if [ -n "$child" ]; then
        kill -TERM $child 2>/dev/null
        for _ in $(seq 50); do kill -0 $child 2>/dev/null || break; sleep 0.1; done
        kill -KILL $child 2>/dev/null
    fi
    exit $1
}

cmd=${1:-}
[ $# -gt 0 ] && shift
# One job on the two hosts at a time (ctest runs these entries serially too): up, down and
# run hold a lock on this script's file (fd 9), which the commands they start do not
# inherit (9<&-), so that a straggler cannot keep it; nested calls (TWOHOST_LOCKED, set
# for the command of run) do not wait for it.
case "$cmd" in
    up|down|run)
        if [ -z "${TWOHOST_LOCKED:-}" ]; then
            exec 9<"$SELF"
            flock -w 900 9 || { say "another twohost.sh holds the lock (900 s)"; exit 75; }
            export TWOHOST_LOCKED=1
        fi ;;
esac
case "$cmd" in
    check) check; exit $? ;;
    up) up && echo manual > $STATE/owner; exit $? ;;
    down) down; exit $? ;;
    status) status; exit $? ;;
    env)
        mpich=0
        [ "${1:-}" = --mpich ] && mpich=1
        env_lines $mpich; exit 0 ;;
    run) run "$@" ;;
    agent) agent "$@" ;;
    *)
        sed -n '2,/^set -u/p' "$SELF" | sed '$d; s/^# \{0,1\}//'
        [ -z "$cmd" ] || [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
        exit 0 ;;
esac
