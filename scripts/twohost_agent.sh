#!/bin/bash
# twohost_agent.sh — the rsh agent of scripts/twohost.sh (Open MPI's plm_rsh_agent, hydra's
# -launcher-exec): called as `twohost_agent.sh [ssh options] HOST COMMAND...`, runs COMMAND
# on HOST's namespace under HOST's name. See `twohost.sh agent`.
exec bash "$(dirname "${BASH_SOURCE[0]}")/twohost.sh" agent "$@"
