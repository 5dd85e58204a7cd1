//! PCI addresses as the kernel writes them (`0000:00:02.0`): the one rule of what is one, shared
//! by the data model (row keys, `--fail-if` names) and the host crate (sysfs paths).

/// Whether a name is a PCI address (`0000:00:02.0`: domain, bus and device in hex, function 0-7).
pub fn is_pci_address(name: &str) -> bool {
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let Some((domain_bus_device, function)) = name.split_once('.') else {
        return false;
    };
    let parts: Vec<&str> = domain_bus_device.split(':').collect();
    matches!(parts.as_slice(), [domain, bus, device] if hex(domain, 4) && hex(bus, 2) && hex(device, 2))
        && function.len() == 1
        && function.bytes().all(|b| (b'0'..=b'7').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_have_one_rule() {
        assert!(is_pci_address("0000:00:02.0"));
        assert!(is_pci_address("10de:af:1f.7"));
        for name in [
            "nvme0n1",
            "eth0",
            "0000:00:02",
            "0000:00:02.8",
            "000:00:02.0",
            "pci0000:00",
            "0000:0g:02.0",
            "",
        ] {
            assert!(!is_pci_address(name), "{name}");
        }
    }
}
