//! The kernel's device events (uevents, the netlink broadcast udev reads), as the changes that
//! move a device's series to other labels: a PCI function bound to a driver or unbound from one
//! (VFIO passthrough and back), added or removed (hotplug, SR-IOV VFs), a network interface
//! renamed. `serve` accounts the counts made so far to the labels they were made under, then
//! reads the device's new labels, so no interval straddles a rebind.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What happened to a device, of the changes that can change its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Bound,
    Unbound,
    Renamed,
}

impl Change {
    /// Whether the device's labels until now are those its counts so far were made under
    /// (the driver that is leaving, the device that goes): account first, then read the new ones.
    /// Otherwise the new labels already held while the counts were made (a driver's probe maps
    /// before the kernel announces the binding): read them first.
    pub fn ends_labels(self) -> bool {
        matches!(self, Change::Removed | Change::Unbound)
    }
}

/// A device's change, from one uevent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceChange {
    pub change: Change,
    /// The device's path under /sys (`/devices/pci0000:00/0000:00:04.0`).
    pub devpath: String,
}

/// The change one uevent message announces, if it is one that can change a row's labels:
/// bind, unbind, add and remove of a PCI function, and the rename (`move`) of a network
/// interface. Other subsystems (block, vfio, a veth's add) and udev's own messages are `None`.
pub fn parse(message: &[u8]) -> Option<DeviceChange> {
    let mut fields = message.split(|&b| b == 0);
    // The kernel's header is `ACTION@DEVPATH`; udev's rebroadcast starts `libudev`.
    fields.next().filter(|header| header.contains(&b'@'))?;
    let (mut action, mut devpath, mut subsystem) = (None, None, None);
    for field in fields {
        let Some((key, value)) = std::str::from_utf8(field).ok()?.split_once('=') else {
            continue;
        };
        match key {
            "ACTION" => action = Some(value),
            "DEVPATH" => devpath = Some(value),
            "SUBSYSTEM" => subsystem = Some(value),
            _ => {}
        }
    }
    let change = match (subsystem?, action?) {
        ("pci", "add") => Change::Added,
        ("pci", "remove") => Change::Removed,
        ("pci", "bind") => Change::Bound,
        ("pci", "unbind") => Change::Unbound,
        ("net", "move") => Change::Renamed,
        _ => return None,
    };
    Some(DeviceChange {
        change,
        devpath: devpath?.to_string(),
    })
}

/// The kernel's uevent broadcast, read by one socket.
pub struct Uevents {
    socket: OwnedFd,
}

/// The kernel's multicast group of uevents (udev's rebroadcast is group 2).
const KERNEL_GROUP: u32 = 1;

impl Uevents {
    /// Joins the broadcast; fails where netlink uevents are not reachable (some containers).
    pub fn open() -> std::io::Result<Uevents> {
        // SAFETY: socket has no memory preconditions; the result is checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_KOBJECT_UEVENT,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a socket just opened and owned by nothing else.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        address.nl_groups = KERNEL_GROUP;
        // SAFETY: address is a valid sockaddr_nl and its size is passed with it.
        let bound = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                std::ptr::from_ref(&address).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Uevents { socket })
    }

    /// The next change that can move a device's series, waiting for it; other uevents are
    /// skipped.
    pub fn next_change(&self) -> std::io::Result<DeviceChange> {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            // SAFETY: buffer is valid for writes of its length.
            let received = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            };
            if received < 0 {
                let error = std::io::Error::last_os_error();
                match error.raw_os_error() {
                    // A burst the socket could not hold: the periodic re-read covers it.
                    Some(libc::EINTR) | Some(libc::ENOBUFS) => continue,
                    _ => return Err(error),
                }
            }
            if let Some(change) = parse(&buffer[..received as usize]) {
                return Ok(change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(header: &str, fields: &[&str]) -> Vec<u8> {
        let mut bytes = header.as_bytes().to_vec();
        for field in fields {
            bytes.push(0);
            bytes.extend_from_slice(field.as_bytes());
        }
        bytes.push(0);
        bytes
    }

    #[test]
    fn a_pci_rebind_is_an_unbind_then_a_bind() {
        let path = "/devices/pci0000:00/0000:00:04.0";
        let unbind = message(
            &format!("unbind@{path}"),
            &[
                "ACTION=unbind",
                &format!("DEVPATH={path}"),
                "SUBSYSTEM=pci",
                "SEQNUM=2214",
            ],
        );
        let bind = message(
            &format!("bind@{path}"),
            &[
                "ACTION=bind",
                &format!("DEVPATH={path}"),
                "SUBSYSTEM=pci",
                "DRIVER=vfio-pci",
                "PCI_SLOT_NAME=0000:00:04.0",
            ],
        );
        for (bytes, change, ends) in [
            (unbind, Change::Unbound, true),
            (bind, Change::Bound, false),
        ] {
            let parsed = parse(&bytes).expect("a change");
            assert_eq!(parsed.change, change);
            assert_eq!(parsed.devpath, path);
            assert_eq!(parsed.change.ends_labels(), ends);
        }
    }

    #[test]
    fn renames_hotplug_and_nothing_else() {
        let net = "/devices/pci0000:00/0000:00:05.0/net/eth0";
        let cases = [
            (vec!["ACTION=move", "SUBSYSTEM=net"], Some(Change::Renamed)),
            (vec!["ACTION=add", "SUBSYSTEM=pci"], Some(Change::Added)),
            (
                vec!["ACTION=remove", "SUBSYSTEM=pci"],
                Some(Change::Removed),
            ),
            (vec!["ACTION=add", "SUBSYSTEM=net"], None),
            (vec!["ACTION=remove", "SUBSYSTEM=block"], None),
            (vec!["ACTION=add", "SUBSYSTEM=vfio"], None),
            (vec!["ACTION=change"], None),
        ];
        for (fields, expected) in cases {
            let mut all = fields.clone();
            let devpath = format!("DEVPATH={net}");
            all.push(&devpath);
            let parsed = parse(&message("x@y", &all)).map(|c| c.change);
            assert_eq!(parsed, expected, "{fields:?}");
        }
        // udev's rebroadcast has no `ACTION@DEVPATH` header; a message without DEVPATH is none.
        let udev = message("libudev", &["ACTION=bind", "SUBSYSTEM=pci", "DEVPATH=/d"]);
        assert_eq!(parse(&udev), None);
        assert_eq!(
            parse(&message("bind@/d", &["ACTION=bind", "SUBSYSTEM=pci"])),
            None
        );
        assert_eq!(parse(b""), None);
    }
}
