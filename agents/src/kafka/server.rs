//! Accepts Kafka connections, bounded by [`CONNECTION_COUNT_MAX`].

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::Agent;
use crate::limits::CONNECTION_COUNT_MAX;

/// Longest TLS handshake; a client that stalls it is dropped.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves Kafka clients on `listener` until `stop` turns true, over TLS when `tls` is given.
pub async fn run(
    agent: Arc<Agent>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let connections = Arc::new(Semaphore::new(CONNECTION_COUNT_MAX));
    loop {
        let Ok(permit) = connections.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let (agent, tls) = (agent.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => super::connection::serve(agent, stream, peer).await,
                        Some(acceptor) => {
                            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                                Ok(Ok(stream)) => super::connection::serve(agent, stream, peer).await,
                                Ok(Err(e)) => tracing::info!(%peer, error = %e, "TLS handshake failed"),
                                Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
                            }
                        }
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                // Usually a file-descriptor limit: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
