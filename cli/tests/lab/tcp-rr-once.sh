#!/bin/sh
# tcp_rr once: (re)creates the namespaces, since unbinding a NIC removes its netdev.
set -eu
ip netns del ab-a 2>/dev/null || true; ip netns del ab-b 2>/dev/null || true
sleep 1
ip netns add ab-a; ip netns add ab-b
ip link set eth0 netns ab-a; ip link set eth1 netns ab-b
ip -n ab-a addr add 10.77.0.1/24 dev eth0; ip -n ab-a link set eth0 up
ip -n ab-b addr add 10.77.0.2/24 dev eth1; ip -n ab-b link set eth1 up
ip netns exec ab-b netserver -4 -L 10.77.0.2 >/dev/null 2>&1
sleep 2
ip netns exec ab-a netperf -H 10.77.0.2 -L 10.77.0.1 -t TCP_RR -l 4 -P 0 -- -r 1024,1024
pkill netserver || true
ip netns del ab-a; ip netns del ab-b
sleep 1
