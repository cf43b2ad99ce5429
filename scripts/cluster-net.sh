#!/bin/sh
# The network of a cluster test run: one network namespace per node, each with a veth pair
# whose outer end is on a bridge that also holds an address of the host side, so the test (in
# the host namespace) reaches every node and the nodes reach each other. Needs root.
#
#   cluster-net.sh up RUN N      make namespaces lw-RUN-1..N, print one address per line
#                                (the first line is the host's address on the bridge)
#   cluster-net.sh down RUN      remove everything of RUN (also what a crashed run left)
#   cluster-net.sh cut RUN K     cut node K off the network (its link down): a partition
#   cluster-net.sh heal RUN K    bring it back
#
# RUN is 1 to 6 characters of [a-z0-9], unique per run, so parallel runs do not collide: every
# interface name is at most 15 characters (lwb-RUN, lwv-RUN-K). The subnet 10.S.T.0/24 comes from
# RUN's hash and is checked to be unused on the host.
set -eu

cmd=${1:?usage: cluster-net.sh up|down|cut|heal RUN [N|K]}
run=${2:?run id}
case $run in *[!a-z0-9]* | '' ) echo "bad run id $run" >&2; exit 2 ;; esac
[ ${#run} -le 6 ] || { echo "run id longer than 6: $run" >&2; exit 2; }
bridge="lwb-$run"

subnet() {
  sum=$(printf '%s' "$run" | cksum | cut -d' ' -f1)
  echo "10.$((200 + sum % 50)).$(((sum / 50) % 256))"
}

case $cmd in
up)
  count=${3:?node count}
  net=$(subnet)
  if ip -4 addr | grep -q "inet $net\."; then echo "subnet $net.0/24 in use" >&2; exit 1; fi
  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  ip link set "$bridge" up
  echo "$net.1"
  k=1
  while [ "$k" -le "$count" ]; do
    ns="lw-$run-$k"
    ip netns add "$ns"
    ip link add "lwv-$run-$k" type veth peer name "lwp-$run-$k"
    ip link set "lwp-$run-$k" netns "$ns"
    ip link set "lwv-$run-$k" master "$bridge" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "lwp-$run-$k" name eth0
    ip -n "$ns" addr add "$net.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    echo "$net.$((k + 1))"
    k=$((k + 1))
  done
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}' | grep "^lw-$run-" || true); do
    # Whatever still runs in the namespace goes with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" || true
  done
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^lwv-$run-" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  ;;
cut) ip link set "lwv-$run-${3:?node}" down ;;
heal) ip link set "lwv-$run-${3:?node}" up ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
