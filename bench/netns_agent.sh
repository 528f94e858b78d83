#!/usr/bin/env bash
# mpirun's remote shell for namespace hosts (bench/run_netns.sh): Open MPI
# runs `AGENT HOST COMMAND...` where it would run ssh; HOST is the eth0
# address of a host made by tests/netns/hosts.sh (TUTTI_NETNS_ID in the
# environment), and COMMAND runs inside that host's namespace.
host=$1
shift
hosts="bash $(cd "$(dirname "$0")/.." && pwd)/tests/netns/hosts.sh"
for i in 0 1 2 3 4 5 6 7; do
  if [ "$($hosts addr $i)" = "$host" ]; then
    exec $hosts run "$i" sh -c "$*"
  fi
done
echo "netns_agent.sh: no namespace host has address $host" >&2
exit 1
