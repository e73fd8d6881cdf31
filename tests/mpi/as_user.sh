#!/usr/bin/env bash
# as_user.sh CMD [ARGS...] — runs CMD as an unprivileged user (nobody) when started as root, so
# that the ranks' attach to each other (cross-memory attach, pidfd_getfd, memfd mappings)
# goes through the kernel's checks for an ordinary user, without CAP_SYS_PTRACE or any other
# capability; as another user CMD runs as is. An argument that is a file the user cannot
# execute where it lies (a build tree under /root) is copied to a directory it can reach.
set -eu
if [ "$(id -u)" != 0 ]; then exec "$@"; fi
user=nobody
dir=$(mktemp -d /tmp/fastrma-as-user.XXXXXX)
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT
args=()
for a in "$@"; do
  if [ -f "$a" ] && [ -x "$a" ] && ! runuser -u "$user" -- test -x "$a"; then
    cp "$a" "$dir/" && chmod 755 "$dir/$(basename "$a")"
    a="$dir/$(basename "$a")"
  fi
  args+=("$a")
done
cd "$dir"
runuser -u "$user" -- env HOME="$dir" "${args[@]}"
