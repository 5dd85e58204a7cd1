#!/bin/sh
# Runs inside a lab guest: TCP_RR between the two e1000e (one per network namespace) recorded by
# iommutop with one-second intervals. Usage: tcp-rr.sh IOMMUTOP REPORT
set -eu
iommutop=$1
report=$2
ip netns add rr-a && ip netns add rr-b
ip link set eth0 netns rr-a && ip link set eth1 netns rr-b
ip -n rr-a addr add 10.77.0.1/24 dev eth0 && ip -n rr-a link set eth0 up
ip -n rr-b addr add 10.77.0.2/24 dev eth1 && ip -n rr-b link set eth1 up
ip netns exec rr-b netserver -4 -L 10.77.0.2 >/dev/null 2>&1
sleep 2
"$iommutop" record --interval 1 --json "$report" -- ip netns exec rr-a \
	netperf -H 10.77.0.2 -L 10.77.0.1 -t TCP_RR -l 5 -P 0 -- -r 1024,1024 >/dev/null
