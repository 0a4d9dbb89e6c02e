//! Connection churn (`--attacks churn`): Kafka connections opened and dropped at once, by a few
//! loops each as fast as it can, every fourth after half a frame. Before issue 52's fix an
//! agent gave each connection 64 KiB read and write buffers before authentication, and 70,000
//! short connections took one from 38 MB to 1.02 GB.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::{Counters, Stop, connect_from};

/// Loops churning at once. Each holds at most one connection, so the attack's sockets stay
/// this few whatever its rate.
pub(super) const CHURNERS: usize = 4;
/// Every this many connections send half a frame before they are dropped.
const HALF_FRAME_EVERY: usize = 4;
/// The half frame's length prefix: just under the 512 KiB allowed before authentication, so an
/// agent that sized a buffer by it would hold that much for the connection.
const HALF_FRAME_LENGTH: u32 = 500 * 1024;
/// Bytes of the half frame sent, its length prefix included.
const HALF_FRAME_SENT_BYTES: usize = 1024;
/// Pause after a connection that could not be made (the listen queue full), so that a refused
/// loop does not spin.
const CONNECT_FAILED_PAUSE: Duration = Duration::from_millis(10);

/// Opens and drops connections to `targets` in turn (from the `first`th) until `stop`.
pub(super) async fn run(source: IpAddr, targets: Vec<SocketAddr>, first: usize, stop: Stop, counters: Arc<Counters>) {
    let half_frame = half_frame();
    let mut n = first;
    while !stop.is_set() {
        let Some(&to) = targets.get(n % targets.len().max(1)) else { return };
        n += 1;
        let Ok(mut conn) = connect_from(source, to).await else {
            counters.churn_connect_failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(CONNECT_FAILED_PAUSE).await;
            continue;
        };
        // Dropped with a reset rather than closed: an orderly close would leave this side's
        // socket in TIME_WAIT for a minute, and the loop would spend the source address's
        // ephemeral ports within seconds.
        let _ = conn.set_zero_linger();
        if n.is_multiple_of(HALF_FRAME_EVERY) && conn.write_all(&half_frame).await.is_ok() {
            counters.churned_half_frames.fetch_add(1, Ordering::Relaxed);
        }
        drop(conn);
        counters.churned.fetch_add(1, Ordering::Relaxed);
    }
}

/// A frame's length prefix and the start of its request (an ApiVersions v3 header), cut short.
fn half_frame() -> Vec<u8> {
    let mut frame = HALF_FRAME_LENGTH.to_be_bytes().to_vec();
    // api_key 18, api_version 3, correlation id 1, client id "churn" (5 bytes).
    frame.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 5]);
    frame.extend_from_slice(b"churn");
    frame.resize(HALF_FRAME_SENT_BYTES, 0);
    frame
}
