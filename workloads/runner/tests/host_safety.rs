//! Safety checks against this machine's real state, without changing it.

use iommutop_workloads::netns;
use iommutop_workloads::{ErrorClass, WorkloadError};

/// The NIC this host reaches its network by is never moved into a namespace. A host without a
/// default route cannot show it: the test fails saying so rather than pass on nothing (the
/// refusal itself is also checked on a made-up /proc in `iommutop_host::nic`'s unit tests).
#[test]
fn the_nic_carrying_the_default_route_is_refused() {
    let devices = iommutop_host::nic::default_route_interfaces(&iommutop_host::HostRoot::system());
    let dev = devices.first().unwrap_or_else(|| {
        panic!(
            "this host has no default route (/proc/net/route, /proc/net/ipv6_route), so there is \
             no NIC whose refusal to check: run this test on a host with a network"
        )
    });
    match netns::check_movable(dev) {
        Err(e @ WorkloadError::Refused(_)) => {
            assert_eq!(e.class(), ErrorClass::Usage);
            assert!(e.to_string().contains("default route"), "{e}");
        }
        other => panic!("{dev} carries the default route and was not refused: {other:?}"),
    }
}

#[test]
fn a_nic_that_does_not_exist_is_a_parameter_error() {
    let err = netns::check_movable("iommutop-none0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "parameter `nics`: no network interface `iommutop-none0` here (see `ip link`)"
    );
}
