//! SR-IOV in listings: a physical function's virtual functions are listed right under it, PF
//! first, whatever order the rows are otherwise in (by key, by DMA maps), so that a NIC's VFs
//! are read with the NIC that hosts them.

use crate::snapshot::Device;
use iommutop_abi::pci::PciAddress;
use std::collections::BTreeSet;

/// Where a row stands in a listing that keeps virtual functions with their physical function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// Not a virtual function.
    Own,
    /// A virtual function listed right under its physical function's row.
    UnderPhysfn(PciAddress),
    /// A virtual function whose physical function has no row in the listing (it did no DMA, or
    /// was filtered out): it is listed where the first of its siblings falls, saying whose it is.
    PhysfnAbsent(PciAddress),
}

impl Nesting {
    /// The physical function of a virtual function's row.
    pub fn physfn(self) -> Option<PciAddress> {
        match self {
            Nesting::Own => None,
            Nesting::UnderPhysfn(pf) | Nesting::PhysfnAbsent(pf) => Some(pf),
        }
    }
}

/// `rows` in their order, except that each virtual function follows its physical function's row
/// (in their order among `rows`), and the virtual functions of a physical function without a
/// row stay together where the first of them falls.
pub fn vfs_under_physfn<'a>(rows: &[&'a Device]) -> Vec<(&'a Device, Nesting)> {
    let physfns: BTreeSet<PciAddress> = rows
        .iter()
        .filter(|row| row.physfn.is_none())
        .filter_map(|row| row.pci_address)
        .collect();
    let mut placed = vec![false; rows.len()];
    let mut listed = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        if placed[index] {
            continue;
        }
        let (pf, nesting) = match row.physfn {
            Some(pf) if physfns.contains(&pf) => continue,
            Some(pf) => (pf, Nesting::PhysfnAbsent(pf)),
            None => {
                placed[index] = true;
                listed.push((*row, Nesting::Own));
                match row.pci_address {
                    Some(address) => (address, Nesting::UnderPhysfn(address)),
                    None => continue,
                }
            }
        };
        for (sibling, vf) in rows.iter().enumerate() {
            if !placed[sibling] && vf.physfn == Some(pf) {
                placed[sibling] = true;
                listed.push((*vf, nesting));
            }
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::sriov_report;

    fn keys(listed: &[(&Device, Nesting)]) -> Vec<String> {
        listed.iter().map(|(d, _)| d.key.to_string()).collect()
    }

    #[test]
    fn vfs_follow_their_pf_however_the_rows_are_sorted() {
        let report = sriov_report();
        let by_key: Vec<&Device> = report.devices.iter().collect();
        let listed = vfs_under_physfn(&by_key);
        assert_eq!(
            keys(&listed),
            [
                "0000:00:02.0",
                "0000:00:0c.0",
                "0000:00:1c.0",
                "0000:00:1c.2",
                "0000:00:1c.4",
                "0000:00:0d.0",
                "deferred"
            ]
        );
        let pf: PciAddress = "0000:00:0c.0".parse().expect("address");
        let nestings: Vec<Nesting> = listed.iter().map(|(_, n)| *n).collect();
        assert_eq!(nestings[1], Nesting::Own);
        assert_eq!(nestings[2..5], [Nesting::UnderPhysfn(pf); 3]);
        assert_eq!(nestings[5], Nesting::Own);
        // Reversed, the PF still comes first and its VFs keep their own order under it.
        let reversed: Vec<&Device> = report.devices.iter().rev().collect();
        assert_eq!(
            keys(&vfs_under_physfn(&reversed)),
            [
                "deferred",
                "0000:00:0d.0",
                "0000:00:0c.0",
                "0000:00:1c.4",
                "0000:00:1c.2",
                "0000:00:1c.0",
                "0000:00:02.0"
            ]
        );
    }

    #[test]
    fn vfs_without_their_pf_stay_together_and_say_whose_they_are() {
        let report = sriov_report();
        let rows: Vec<&Device> = report
            .devices
            .iter()
            .filter(|d| d.key != "0000:00:0c.0" && d.key != "0000:00:1c.2")
            .collect();
        // 1c.4 first, 0d.0 between the two VFs.
        let shuffled = [rows[0], rows[3], rows[1], rows[2], rows[4]];
        let listed = vfs_under_physfn(&shuffled);
        assert_eq!(
            keys(&listed),
            [
                "0000:00:02.0",
                "0000:00:1c.4",
                "0000:00:1c.0",
                "0000:00:0d.0",
                "deferred"
            ]
        );
        let pf: PciAddress = "0000:00:0c.0".parse().expect("address");
        assert_eq!(listed[1].1, Nesting::PhysfnAbsent(pf));
        assert_eq!(listed[2].1, Nesting::PhysfnAbsent(pf));
        assert_eq!(listed[3].1.physfn(), None);
    }

    #[test]
    fn rows_without_vfs_keep_their_order() {
        let report = crate::report::fixtures::full_report();
        let rows: Vec<&Device> = report.devices.iter().rev().collect();
        let listed = vfs_under_physfn(&rows);
        assert_eq!(keys(&listed), ["deferred", "0000:00:02.0"]);
        assert!(listed.iter().all(|(_, n)| *n == Nesting::Own));
    }
}
