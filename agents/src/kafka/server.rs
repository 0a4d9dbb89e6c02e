//! Accepts Kafka connections, bounded by [`CONNECTION_COUNT_MAX`].

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::Agent;
use crate::limits::CONNECTION_COUNT_MAX;

/// Serves Kafka clients on `listener` until `stop` turns true.
pub async fn run(agent: Arc<Agent>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
    let connections = Arc::new(Semaphore::new(CONNECTION_COUNT_MAX));
    loop {
        let Ok(permit) = connections.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let agent = agent.clone();
                tokio::spawn(async move {
                    super::connection::serve(agent, stream, peer).await;
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
