//! `iommutop serve`'s bad input on the build machine, no lab: each ends in one line naming the
//! input and the fix, with its own exit code, before any probe is attached.

mod support;

use assert_cmd::Command;
use std::net::TcpListener;
use support::*;

fn serve(listen: &str) -> std::process::Output {
    Command::cargo_bin("iommutop")
        .expect("binary built")
        .args(["serve", "--listen", listen])
        .output()
        .expect("runs")
}

fn as_nobody(args: &[&str]) -> std::process::Output {
    std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(assert_cmd::cargo::cargo_bin("iommutop"))
        .args(args)
        .output()
        .expect("setpriv runs (util-linux)")
}

#[test]
fn a_port_in_use_is_exit_5() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = taken.local_addr().expect("bound").to_string();
    assert_one_line_error(
        &serve(&address),
        5,
        &[&address, "in use by another program", "--listen"],
    );
}

#[test]
fn text_that_is_not_an_address_is_a_usage_error() {
    for bad in ["localhost:9464", "9464", "127.0.0.1:99999", "0.0.0.0"] {
        assert_one_line_error(&serve(bad), 2, &[bad, "not an ADDR:PORT"]);
    }
}

#[test]
fn an_address_of_no_interface_here_is_a_usage_error() {
    // TEST-NET-1 (RFC 5737): never assigned to this machine.
    assert_one_line_error(
        &serve("192.0.2.1:9464"),
        2,
        &[
            "192.0.2.1:9464",
            "no interface of this machine has that address",
        ],
    );
}

#[test]
fn without_root_the_error_says_which_privileges() {
    let output = as_nobody(&["serve", "--listen", "127.0.0.1:0"]);
    assert_one_line_error(&output, 3, &["needs root, or CAP_BPF and CAP_PERFMON"]);
}

#[test]
fn a_privileged_port_without_root_says_which_capability() {
    let output = as_nobody(&["serve", "--listen", "127.0.0.1:1"]);
    assert_one_line_error(&output, 3, &["127.0.0.1:1", "CAP_NET_BIND_SERVICE"]);
}
