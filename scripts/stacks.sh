#!/bin/bash
# stacks.sh PID... — every thread's stack of each process, one line per thread (innermost
# function first, arguments and namespaces left out), so that a stuck test's report stays
# short enough to be read whole in a CI log. Needs gdb; prints nothing without it.
command -v gdb >/dev/null || exit 0
for pid in "$@"; do
    echo "stacks of pid $pid ($(hostname 2>/dev/null)):"
    gdb -p "$pid" -batch -ex 'thread apply all bt 40' 2>/dev/null | awk '
        /^Thread/ { if (line != "") print line; line = "  T" $2 ":"; next }
        /^#/ {
            fn = ""
            for (i = 2; i <= NF; i++) if ($i == "in") { fn = $(i + 1); break }
            if (fn == "") fn = $2
            gsub(/\(anonymous namespace\)::/, "", fn)
            sub(/\(.*/, "", fn)
            gsub(/fastrma::(detail::)?/, "", fn)
            gsub(/std::/, "", fn)
            line = line " " fn
        }
        END { if (line != "") print line }'
done
