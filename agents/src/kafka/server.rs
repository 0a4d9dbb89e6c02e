//! Accepts Kafka connections, within the limits of [`super::connections`].

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::connections::{Connections, Refusal};
use crate::Agent;

/// Longest TLS handshake; a client that stalls it is dropped.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves Kafka clients on `listener` until `stop` turns true, over TLS when `tls` is given.
pub async fn run(
    agent: Arc<Agent>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let connections = Connections::new(agent.config.connections.clone());
    let weak = Arc::downgrade(&connections);
    let counted: std::sync::Weak<dyn crate::metrics::ListenerConnections> = weak;
    crate::metrics::count_connections("kafka", counted);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Refused by closing at once, as Kafka does; accepting is what keeps the
                // listener's queue from filling while its limits are reached.
                let admitted = match connections.admit(peer.ip()) {
                    Ok(admitted) => admitted,
                    Err(refusal) => {
                        let reason = match refusal {
                            Refusal::PerIp(_) => "per_ip",
                            Refusal::Full(_) => "full",
                            Refusal::PerTenant(_) => "per_tenant",
                        };
                        crate::metrics::CONNECTIONS_CLOSED.with_label_values(&[reason]).inc();
                        tracing::debug!(%peer, %refusal, "Kafka connection refused");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (agent, tls) = (agent.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => super::connection::serve(agent, stream, peer, admitted).await,
                        Some(acceptor) => {
                            let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                            let handshake = tokio::select! {
                                done = handshake => done,
                                () = admitted.evicted() => return,
                            };
                            match handshake {
                                Ok(Ok(stream)) => super::connection::serve(agent, stream, peer, admitted).await,
                                Ok(Err(e)) => {
                                    crate::log_limited!(tracing::Level::INFO, %peer, error = %e, "TLS handshake failed")
                                }
                                Err(_) => crate::log_limited!(tracing::Level::INFO, %peer, "TLS handshake timed out"),
                            }
                        }
                    }
                });
            }
            Err(e) => {
                // Usually a file-descriptor limit: back off briefly instead of spinning.
                crate::log_limited!(tracing::Level::WARN, error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Admits one connection the caller accepted itself and returns the future that serves it until
/// the client closes it: how tests (over an in-memory `tokio::io::duplex`) and embedders hand the
/// agent a connection without a listener. `connections` is the table whose limits it counts
/// against, as [`run`]'s is for its listener; `peer` is the address it is taken to come from
/// (limits per address, zones, ACL hosts). `Err`: refused by those limits, as [`run`] refuses a
/// socket by closing it. The future is `Send` (to be spawned) when `S` is.
pub fn serve_stream<S>(
    agent: Arc<Agent>,
    connections: &Arc<Connections>,
    stream: S,
    peer: SocketAddr,
) -> Result<impl Future<Output = ()> + use<S>, Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let admitted = connections.admit(peer.ip())?;
    Ok(super::connection::serve(agent, stream, peer, admitted))
}
