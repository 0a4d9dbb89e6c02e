//! TLS for the HTTP listener. Handshakes run in their own tasks (bounded in time) and finished
//! connections are handed to axum through a channel, so a client that stalls its handshake
//! never holds up the accept loop.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::connections::{Counted, LimitedListener};

/// Longest TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for axum to take them.
const READY_MAX: usize = 1024;

/// A listener whose connections have completed a TLS handshake.
#[derive(Debug)]
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<Counted>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Handshakes over the connections `listener` lets in, so they count (and idle out) from
    /// their first byte.
    pub(crate) fn new(mut listener: LimitedListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_MAX);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = listener.accept_counted().await;
                let (acceptor, ready_tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = ready_tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Self { ready, local_addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<Counted>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept task ends only when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
