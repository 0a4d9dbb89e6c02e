//! The HTTP listener's connections, counted and bounded as the Kafka listener's are: at most so
//! many at once and from one address (past either, a new connection is closed at once), and a
//! connection with no request in progress that neither sends nor receives a byte for a while is
//! closed. Event streams send a keep-alive every 15 s, so only idle sockets go quiet.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use floe_metadata::locks::MutexRecovery;
use prometheus::{IntCounterVec, register_int_counter_vec};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Limits of the HTTP listener's connections.
#[derive(Clone, Copy, Debug)]
pub struct HttpConnectionLimits {
    pub max_connections: usize,
    pub max_per_ip: usize,
    /// A connection silent both ways this long is closed.
    pub idle: Duration,
}

impl Default for HttpConnectionLimits {
    fn default() -> Self {
        Self { max_connections: 10_000, max_per_ip: 4_000, idle: Duration::from_secs(60) }
    }
}

static CLOSED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_http_connections_closed_total",
        "HTTP connections closed or refused by a connection limit, by reason (per_ip, full, idle)",
        &["reason"]
    )
    .expect("unique")
});

#[derive(Debug, Default)]
struct Held {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The listener's connections.
#[derive(Debug)]
struct Table {
    limits: HttpConnectionLimits,
    held: Mutex<Held>,
}

impl Table {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock_recovered()
    }

    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Place, &'static str> {
        let mut held = self.held();
        if held.total >= self.limits.max_connections {
            return Err("full");
        }
        let from_ip = held.per_ip.entry(ip).or_default();
        if *from_ip >= self.limits.max_per_ip {
            return Err("per_ip");
        }
        *from_ip += 1;
        held.total += 1;
        Ok(Place { table: self.clone(), ip })
    }
}

impl floe_agent::metrics::ListenerConnections for Table {
    fn connection_counts(&self) -> (usize, Vec<(String, usize)>) {
        // HTTP requests authenticate one by one; a connection has no tenant.
        (self.held().total, Vec::new())
    }
}

/// A connection's place; given back when dropped.
#[derive(Debug)]
struct Place {
    table: Arc<Table>,
    ip: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.table.held();
        held.total -= 1;
        if let Some(n) = held.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.per_ip.remove(&self.ip);
            }
        }
    }
}

/// A TCP listener that lets in only what its limits allow.
#[derive(Debug)]
pub(crate) struct LimitedListener {
    listener: TcpListener,
    table: Arc<Table>,
}

impl LimitedListener {
    /// A listener whose connections count as `name`'s in `floe_connections`.
    pub(crate) fn new(listener: TcpListener, limits: HttpConnectionLimits, name: &'static str) -> Self {
        let table = Arc::new(Table { limits, held: Mutex::default() });
        let weak = Arc::downgrade(&table);
        let counted: std::sync::Weak<dyn floe_agent::metrics::ListenerConnections> = weak;
        floe_agent::metrics::count_connections(name, counted);
        Self { listener, table }
    }

    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection within the limits; those past them are closed at once.
    pub(crate) async fn accept_counted(&mut self) -> (Counted, SocketAddr) {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, most often: wait rather than spin.
                    floe_agent::log_limited!(tracing::Level::WARN, error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match self.table.admit(peer.ip()) {
                Ok(place) => {
                    let _ = stream.set_nodelay(true);
                    let idle = self.table.limits.idle;
                    let deadline = Box::pin(tokio::time::sleep(idle));
                    let requests = Arc::default();
                    return (Counted { stream, _place: place, idle, deadline, requests }, peer);
                }
                Err(reason) => {
                    CLOSED.with_label_values(&[reason]).inc();
                    tracing::debug!(%peer, reason, "HTTP connection refused");
                }
            }
        }
    }
}

impl axum::serve::Listener for LimitedListener {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.accept_counted().await
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        LimitedListener::local_addr(self)
    }
}

/// A TCP connection holding its place, closed when silent both ways for the idle limit while
/// no request of it is in progress.
#[derive(Debug)]
pub(crate) struct Counted {
    stream: TcpStream,
    _place: Place,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    requests: Busy,
}

/// Requests in progress on one connection (`busy` counts them).
pub(crate) type Busy = Arc<AtomicUsize>;

impl Counted {
    fn active(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// What [`busy`] counts this connection's requests in.
    pub(crate) fn requests(&self) -> Busy {
        self.requests.clone()
    }
}

/// Counts each request as in progress on its connection until its response is ready, so a
/// long-poll is never taken for an idle connection.
pub(crate) async fn busy(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let Some(requests) =
        request.extensions().get::<axum::extract::ConnectInfo<crate::auth::Peer>>().map(|c| c.0.1.clone())
    else {
        return next.run(request).await;
    };
    struct InProgress(Busy);
    impl Drop for InProgress {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
    requests.fetch_add(1, Ordering::Relaxed);
    let _in_progress = InProgress(requests);
    next.run(request).await
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.active();
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) if self.requests.load(Ordering::Relaxed) > 0 => {
                    // A request is being answered: not idle; look again a whole limit later.
                    self.active();
                    let _ = self.deadline.as_mut().poll(cx);
                    Poll::Pending
                }
                Poll::Ready(()) => {
                    CLOSED.with_label_values(&["idle"]).inc();
                    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle HTTP connection")))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.active();
        }
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.active();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_bounded_in_all_and_per_address_and_given_back() {
        let limits = HttpConnectionLimits { max_connections: 3, max_per_ip: 2, idle: Duration::from_secs(60) };
        let table = Arc::new(Table { limits, held: Mutex::default() });
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let first = [table.admit(a).expect("1"), table.admit(a).expect("2")];
        assert_eq!(table.admit(a).err(), Some("per_ip"));
        let other = table.admit(b).expect("3");
        assert_eq!(table.admit(b).err(), Some("full"));
        drop(first);
        assert!(table.admit(a).is_ok(), "places come back");
        drop(other);
        assert_eq!(table.held().total, 0);
        assert!(table.held().per_ip.is_empty());
    }
}
