#!/usr/bin/env bash
# Several "hosts" on one machine: network namespaces joined by veth pairs to
# a bridge, each with eth0 at 10.99.X.(i+1)/24 and a decoy (docker0 + its veth
# peer) whose addresses reach nothing, to exercise interface selection.
#   hosts.sh up N          create hosts 0..N-1
#   hosts.sh down          remove them (idempotent)
#   hosts.sh run I CMD...  run CMD inside host I (own hostname: tutti-hI)
#   hosts.sh addr I        host I's eth0 address
#   hosts.sh kill I        SIGKILL every process in host I (a host that dies)
#   hosts.sh cut I         take host I's link to the bridge down (a cable pulled)
#   hosts.sh stop|cont I   SIGSTOP / SIGCONT every process in host I (a stalled host)
# Names carry TUTTI_NETNS_ID (default: this shell's parent pid), so parallel
# runs do not collide; export it before `up` and keep it for the other verbs.
# Needs root and iproute2; where namespaces cannot be made, `up` prints
# "SKIPPED: network namespaces unavailable" and exits 77.
set -u
SKIP=77
ID=$(printf '%04x' $(( ${TUTTI_NETNS_ID:-$PPID} % 65536 )))
NET=$(( 0x$ID % 250 + 1 ))      # 10.99.NET.0/24: differs between runs, for readable logs
BR="tb$ID"

ns() { echo "tutti-h$ID-$1"; }
veth() { echo "tv${ID}h$1"; }

skip() {
  echo "SKIPPED: network namespaces unavailable ($1)"
  exit $SKIP
}

have_ip() {
  command -v ip >/dev/null 2>&1 && return 0
  # CI runs as root on Debian: fetch iproute2 once when it is missing.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get install -y -qq iproute2 || { apt-get update -qq && apt-get install -y -qq iproute2; }) \
      >/dev/null 2>&1
  fi
  command -v ip >/dev/null 2>&1
}

down() {
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^tutti-h$ID-"); do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  for l in $(ip -o link show 2>/dev/null | sed -nE "s/^[0-9]+: (tv${ID}h[0-9]+)@.*/\1/p"); do
    ip link del "$l" 2>/dev/null
  done
  ip link del "$BR" 2>/dev/null
  return 0
}

up() {
  local n=$1
  have_ip || skip "no iproute2 (ip)"
  [ "$(id -u)" = 0 ] || skip "not root"
  if ip netns list 2>/dev/null | grep -q "^tutti-h$ID-"; then
    echo "hosts.sh: hosts with id $ID exist already (another run, or run hosts.sh down)" >&2
    return 1
  fi
  ip netns add "$(ns 0)" 2>/dev/null || skip "ip netns add failed"
  ip link add "$BR" type bridge 2>/dev/null || { down; skip "cannot create a bridge"; }
  ip link set "$BR" up
  for ((i = 0; i < n; i++)); do
    local h
    h=$(ns $i)
    [ "$i" = 0 ] || ip netns add "$h" || { down; return 1; }
    ip -n "$h" link set lo up
    # The decoy first, so that it comes first in the interface list: the
    # default rule must still skip it by name, and its address (the same in
    # every host) reaches only the host itself.
    ip -n "$h" link add docker0 type veth peer name "veth${ID}d" &&
      ip -n "$h" addr add 10.98.0.1/24 dev docker0 &&
      ip -n "$h" addr add 10.97.0.1/24 dev "veth${ID}d" &&
      ip -n "$h" link set docker0 up && ip -n "$h" link set "veth${ID}d" up || { down; return 1; }
    ip link add "$(veth $i)" type veth peer name eth0 netns "$h" &&
      ip link set "$(veth $i)" master "$BR" up &&
      ip -n "$h" addr add "10.99.$NET.$((i + 1))/24" dev eth0 &&
      ip -n "$h" link set eth0 up || { down; return 1; }
  done
}

run() {
  local i=$1
  shift
  if command -v unshare >/dev/null 2>&1; then
    # A hostname of its own, so that error texts name the host.
    exec ip netns exec "$(ns $i)" unshare --uts sh -c 'hostname "$0" && exec "$@"' "tutti-h$i" "$@"
  fi
  exec ip netns exec "$(ns $i)" "$@"
}

case "${1:-}" in
  up) up "${2:?hosts.sh up N}" ;;
  down) down ;;
  run) shift; run "$@" ;;
  addr) echo "10.99.$NET.$((${2:?hosts.sh addr I} + 1))" ;;
  kill) ip netns pids "$(ns "${2:?hosts.sh kill I}")" | xargs -r kill -9 ;;
  cut) ip link set "$(veth "${2:?hosts.sh cut I}")" down ;;
  stop | cont) ip netns pids "$(ns "${2:?hosts.sh $1 I}")" | xargs -r kill -"${1^^}" ;;
  *) echo "usage: hosts.sh up N | down | run I CMD... | addr I | kill I | cut I | stop I | cont I" >&2
    exit 2 ;;
esac
