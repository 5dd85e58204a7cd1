use super::*;
use crate::fake::Fake;

// `ip -j addr show dev eth0` on a Debian host (iproute2 6.1), addresses shortened.
const ADDR: &str = r#"[{"ifindex":4,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1400,"qdisc":"pfifo_fast","operstate":"UP","group":"default","txqlen":1000,"link_type":"ether","address":"02:fc:00:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[{"family":"inet","local":"192.0.2.2","prefixlen":24,"broadcast":"192.0.2.255","scope":"global","label":"eth0","valid_life_time":4294967295,"preferred_life_time":4294967295},{"family":"inet6","local":"fd00::2","prefixlen":64,"scope":"global","nodad":true,"valid_life_time":4294967295,"preferred_life_time":4294967295},{"family":"inet6","local":"fe80::fc:ff:fe00:1","prefixlen":64,"scope":"link","valid_life_time":4294967295,"preferred_life_time":4294967295}]}]"#;
const DOWN: &str = r#"[{"ifindex":5,"ifname":"eth1","flags":["BROADCAST","MULTICAST"],"mtu":1500,"qdisc":"noop","operstate":"DOWN","group":"default","txqlen":1000,"link_type":"ether","address":"52:54:00:12:34:57","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[]}]"#;

#[test]
fn nic_state_keeps_global_addresses_and_the_up_flag() {
    let state = parse_nic_state(ADDR, "eth0").unwrap();
    assert!(state.up);
    assert_eq!(state.addresses, ["192.0.2.2/24", "fd00::2/64"]);
    let state = parse_nic_state(DOWN, "eth1").unwrap();
    assert!(!state.up);
    assert!(state.addresses.is_empty());
    assert!(parse_nic_state(DOWN, "eth7").is_err());
}

#[test]
fn operstate_is_read() {
    assert_eq!(parse_operstate(DOWN).as_deref(), Some("DOWN"));
    assert_eq!(parse_operstate("[]"), None);
}

#[test]
fn default_routes_come_from_procfs() {
    let fake = Fake::new();
    assert!(default_route_interfaces(&fake.root()).is_empty());
    fake.write(
        "proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
         eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n\
         eth1\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n",
    );
    fake.write(
        "proc/net/ipv6_route",
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth2\n\
         00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n",
    );
    assert_eq!(default_route_interfaces(&fake.root()), ["eth0", "eth2"]);
}

#[test]
fn the_nic_of_the_default_route_and_missing_ones_are_not_moved() {
    let fake = Fake::new();
    let root = fake.root();
    assert_eq!(check_movable(&root, "eth0"), Ok(()));
    assert_eq!(
        nic_pci_address(&root, "eth0")
            .map(|a| a.to_string())
            .as_deref(),
        Some(crate::fake::NIC)
    );
    assert_eq!(
        check_movable(&root, "eth9"),
        Err(Unmovable::NoSuchNic("eth9".into()))
    );
    fake.write(
        "proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
         eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n",
    );
    let refused = check_movable(&root, "eth0").unwrap_err();
    assert!(refused
        .to_string()
        .contains("carries this host's default route"));
}
