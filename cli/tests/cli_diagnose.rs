//! `diagnose` and `record --domain` on the host: mistakes in what is asked are one-line usage
//! errors (exit 2) before anything is attached or switched. Needs no root and no IOMMU.

mod support;

use assert_cmd::Command;
use support::assert_one_line_error;

fn iommutop(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("iommutop")
        .expect("built")
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn diagnose_refuses_what_it_cannot_do_in_one_line() {
    for (args, needle) in [
        (
            &["diagnose", "--ab", "--", "true"][..],
            "--ab needs --device ADDR with a command",
        ),
        (
            &["diagnose", "--profile", "no-such-profile"][..],
            "no-such-profile: no such profile",
        ),
        (
            &["diagnose", "--set", "nics=eth0,eth1", "--", "true"][..],
            "give --profile (with --set) or a command after --, not both",
        ),
        (
            &["diagnose", "--", "/no/such/program"][..],
            "cannot run `/no/such/program`",
        ),
    ] {
        assert_one_line_error(&iommutop(args), 2, &[needle]);
    }
}

#[test]
fn record_domain_names_a_device_that_is_not_there() {
    let output = iommutop(&[
        "record",
        "--domain",
        "identity",
        "--device",
        "0000:ff:1f.7",
        "--",
        "true",
    ]);
    assert_one_line_error(
        &output,
        2,
        &["no PCI device, NIC or disk named `0000:ff:1f.7`"],
    );
}
