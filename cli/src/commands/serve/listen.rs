//! The address `serve` listens on: parsed strictly (no name lookups) and bound before anything
//! is attached, so that a wrong or taken address fails at once with a line that says what to do.

use crate::exit::{Failure, Outcome};
use anyhow::anyhow;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};

/// `ADDR:PORT` as given to `--listen`: an IPv4 address, or an IPv6 one in brackets.
pub fn parse_listen_address(text: &str) -> Outcome<SocketAddr> {
    text.parse().map_err(|_| {
        Failure::usage(anyhow!(
            "--listen `{text}` is not an ADDR:PORT: give e.g. 127.0.0.1:9464, [::1]:9464, or \
             0.0.0.0:9464 for every interface"
        ))
    })
}

/// A non-blocking listener on `address`, or the reason in the user's terms.
pub fn bind(address: SocketAddr) -> Outcome<TcpListener> {
    let listener = TcpListener::bind(address).map_err(|e| bind_failure(address, e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Failure::from(anyhow!("cannot listen on {address}: {e}")))?;
    Ok(listener)
}

fn bind_failure(address: SocketAddr, error: std::io::Error) -> Failure {
    match error.kind() {
        ErrorKind::AddrInUse => Failure::in_use(anyhow!(
            "cannot listen on {address}: the port is in use by another program; stop it, or \
             choose another port with --listen ADDR:PORT"
        )),
        ErrorKind::AddrNotAvailable => Failure::usage(anyhow!(
            "cannot listen on {address}: no interface of this machine has that address; give \
             one of its own addresses with --listen, or 0.0.0.0 for every interface"
        )),
        ErrorKind::PermissionDenied => Failure::environment(anyhow!(
            "cannot listen on {address}: ports below 1024 need root or CAP_NET_BIND_SERVICE; \
             choose a port above 1023 with --listen ADDR:PORT"
        )),
        _ => Failure::from(anyhow!("cannot listen on {address}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Code;

    #[test]
    fn addresses_parse_without_name_lookups() {
        assert!(parse_listen_address("127.0.0.1:9464").is_ok());
        assert!(parse_listen_address("[::1]:9464").is_ok());
        for bad in [
            "localhost:9464",
            "127.0.0.1",
            "9464",
            "300.1.1.1:80",
            "::1:9464",
            "",
        ] {
            let failure = parse_listen_address(bad).expect_err(bad);
            assert_eq!(failure.code, Code::Usage, "{bad}");
            assert!(failure.to_string().contains(bad), "{failure}");
        }
    }

    #[test]
    fn a_taken_port_is_its_own_exit_code() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = taken.local_addr().expect("bound address");
        let failure = bind(address).expect_err("the port is taken");
        assert_eq!(failure.code, Code::InUse);
        assert!(failure.to_string().contains(&address.to_string()));
    }
}
