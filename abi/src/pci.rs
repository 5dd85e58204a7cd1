//! PCI addresses as the kernel writes them (`0000:00:02.0`): the one rule of what is one, shared
//! by the data model (row keys, `--fail-if` names) and the host crate (sysfs paths).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A PCI function's address: domain, bus and device in hex, function 0-7. Read in either case,
/// written as the kernel writes it (`%04x:%02x:%02x.%d`), in JSON as that string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    pub domain: u16,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

/// Text that is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a PCI address: expected DOMAIN:BUS:DEVICE.FUNCTION in hex with a function \
     0-7, as `lspci -D` prints them (`0000:00:02.0`)"
)]
pub struct PciAddressError {
    pub text: String,
}

impl FromStr for PciAddress {
    type Err = PciAddressError;

    fn from_str(text: &str) -> Result<PciAddress, PciAddressError> {
        let refuse = || PciAddressError {
            text: text.to_string(),
        };
        let hex = |s: &str, len: usize| {
            (s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u16::from_str_radix(s, 16).ok())
                .flatten()
        };
        let (domain_bus_device, function) = text.split_once('.').ok_or_else(refuse)?;
        let parts: Vec<&str> = domain_bus_device.split(':').collect();
        let [domain, bus, device] = parts.as_slice() else {
            return Err(refuse());
        };
        let function = match function.as_bytes() {
            [digit @ b'0'..=b'7'] => digit - b'0',
            _ => return Err(refuse()),
        };
        let byte = |s: &str| hex(s, 2).and_then(|n| u8::try_from(n).ok());
        Ok(PciAddress {
            domain: hex(domain, 4).ok_or_else(refuse)?,
            bus: byte(bus).ok_or_else(refuse)?,
            device: byte(device).ok_or_else(refuse)?,
            function,
        })
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Serialize for PciAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PciAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PciAddress, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether a name is a PCI address (`0000:00:02.0`: domain, bus and device in hex, function 0-7).
pub fn is_pci_address(name: &str) -> bool {
    name.parse::<PciAddress>().is_ok()
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
            "0000:00:02.00",
            "000:00:02.0",
            "0000:00:00:02.0",
            "pci0000:00",
            "0000:0g:02.0",
            "+000:00:02.0",
            "",
        ] {
            assert!(!is_pci_address(name), "{name}");
        }
    }

    #[test]
    fn an_address_writes_back_as_the_kernel_wrote_it() {
        for text in ["0000:00:02.0", "10de:af:1f.7", "ffff:ff:ff.7"] {
            let address: PciAddress = text.parse().expect(text);
            assert_eq!(address.to_string(), text);
            let json = serde_json::to_string(&address).expect("encodes");
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(
                serde_json::from_str::<PciAddress>(&json).expect("decodes"),
                address
            );
        }
        let upper: PciAddress = "10DE:AF:1F.7".parse().expect("either case");
        assert_eq!(upper.to_string(), "10de:af:1f.7");
        assert_eq!(
            upper,
            PciAddress {
                domain: 0x10de,
                bus: 0xaf,
                device: 0x1f,
                function: 7
            }
        );
    }

    #[test]
    fn a_refusal_names_the_text_and_the_form() {
        let err = "eth0".parse::<PciAddress>().unwrap_err();
        assert_eq!(err.text, "eth0");
        assert!(err.to_string().contains("`0000:00:02.0`"), "{err}");
        assert!(serde_json::from_str::<PciAddress>("\"0000:00:02.9\"").is_err());
    }

    /// Addresses sort as their text does, so maps keyed by either list rows in the same order.
    #[test]
    fn addresses_sort_as_their_text() {
        let mut texts = [
            "0000:01:00.0",
            "0000:00:1f.3",
            "0001:00:00.0",
            "0000:00:02.0",
        ];
        let mut addresses: Vec<PciAddress> = texts.iter().map(|t| t.parse().unwrap()).collect();
        texts.sort_unstable();
        addresses.sort_unstable();
        let written: Vec<String> = addresses.iter().map(PciAddress::to_string).collect();
        assert_eq!(written, texts);
    }
}
