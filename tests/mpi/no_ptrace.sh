#!/usr/bin/env bash
# no_ptrace.sh CMD [ARGS...] — runs CMD without CAP_SYS_PTRACE, as in a container that lacks
# it: as root the capability leaves the bounding set (setpriv, util-linux), so no descendant
# gets it back; as another user CMD runs as is (such a user has no capability to drop).
# With FASTRMA_FAULT=nondumpable the ranks then may not attach to each other (test_attach).
set -eu
if [ "$(id -u)" = 0 ]; then
  exec setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace -- "$@"
fi
exec "$@"
