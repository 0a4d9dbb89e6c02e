//! Which Kafka connections the listener holds, and which it lets in: Kafka's `max.connections`
//! and `max.connections.per.ip` (with overrides), plus a reserve for proven clients. A
//! connection is *unproven* until it authenticates (with SASL) or sends its first complete
//! request (without); when the listener is full, the oldest unproven connection is closed to
//! admit a new one, so sockets that connect and say nothing can never lock clients out. An
//! authenticated connection counts toward its tenant's share of the listener, so one tenant's
//! clients, from however many addresses, cannot take every place.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use floe_metadata::locks::MutexRecovery;
use tokio::sync::Notify;

/// Limits of the Kafka listener's connections.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Connections held at once (Kafka's `max.connections`).
    pub max_connections: usize,
    /// Connections from one address (Kafka's `max.connections.per.ip`).
    pub max_per_ip: usize,
    /// Per-address exceptions to `max_per_ip` (Kafka's `max.connections.per.ip.overrides`).
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// Authenticated connections of one tenant's users.
    pub max_per_tenant: usize,
    /// A connection that sends no request for this long is closed (`connections.max.idle.ms`).
    pub idle: Duration,
    /// With SASL, a connection that has not authenticated within this long is closed.
    pub authentication_timeout: Duration,
    /// Largest frame before authentication (Kafka's `sasl.server.max.receive.size`).
    pub unauthenticated_frame_bytes_max: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_per_ip: 1_000,
            per_ip_overrides: HashMap::new(),
            max_per_tenant: 2_500,
            idle: Duration::from_secs(600),
            authentication_timeout: Duration::from_secs(10),
            unauthenticated_frame_bytes_max: 512 * 1024,
        }
    }
}

impl ConnectionLimits {
    fn max_for(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides.get(&ip).copied().unwrap_or(self.max_per_ip)
    }
}

/// Why a connection was not let in.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} connections from this address")]
    PerIp(usize),
    #[error("{0} connections, none of them unproven")]
    Full(usize),
    #[error("the tenant holds its {0} connections on this agent")]
    PerTenant(usize),
}

/// The listener's connections.
#[derive(Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    /// Authenticated connections by tenant.
    per_tenant: HashMap<String, usize>,
    /// Unproven connections by admission order (oldest first), with how to close each.
    unproven: BTreeMap<u64, Arc<Eviction>>,
    next_id: u64,
}

#[derive(Debug)]
struct Eviction {
    ip: IpAddr,
    closed: Notify,
    /// Set (under the table's lock) when the connection was chosen to make room: its place was
    /// given back then.
    evicted: AtomicBool,
}

/// A connection let in; dropping it gives its place back.
#[derive(Debug)]
pub struct Admitted {
    table: Arc<Connections>,
    id: u64,
    eviction: Arc<Eviction>,
    /// The tenant it authenticated as, once it has.
    tenant: std::sync::OnceLock<String>,
}

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self { limits, held: Mutex::new(Held::default()) })
    }

    pub fn limits(&self) -> &ConnectionLimits {
        &self.limits
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // The counts stay consistent under every critical section, so a poisoned lock is usable.
        self.held.lock_recovered()
    }

    /// Lets a connection from `ip` in, closing the oldest unproven one if the listener is full.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        let mut held = self.held();
        let from_ip = held.per_ip.get(&ip).copied().unwrap_or(0);
        let max_for_ip = self.limits.max_for(ip);
        if from_ip >= max_for_ip {
            return Err(Refusal::PerIp(max_for_ip));
        }
        if held.total >= self.limits.max_connections {
            let Some((_, oldest)) = held.unproven.pop_first() else {
                return Err(Refusal::Full(self.limits.max_connections));
            };
            // Its place is given back now, not when its task gets round to closing it.
            held.total -= 1;
            release_ip(&mut held.per_ip, oldest.ip);
            oldest.evicted.store(true, Ordering::Relaxed);
            oldest.closed.notify_one();
            crate::metrics::CONNECTIONS_CLOSED.with_label_values(&["evicted"]).inc();
        }
        held.total += 1;
        *held.per_ip.entry(ip).or_default() += 1;
        let id = held.next_id;
        held.next_id += 1;
        let eviction = Arc::new(Eviction { ip, closed: Notify::new(), evicted: AtomicBool::new(false) });
        held.unproven.insert(id, eviction.clone());
        Ok(Admitted { table: self.clone(), id, eviction, tenant: std::sync::OnceLock::new() })
    }

    /// Connections held now.
    pub fn count(&self) -> usize {
        self.held().total
    }
}

impl crate::metrics::ListenerConnections for Connections {
    fn connection_counts(&self) -> (usize, Vec<(String, usize)>) {
        let held = self.held();
        (held.total, held.per_tenant.iter().map(|(tenant, n)| (tenant.clone(), *n)).collect())
    }
}

fn release_ip(per_ip: &mut HashMap<IpAddr, usize>, ip: IpAddr) {
    if let Some(n) = per_ip.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            per_ip.remove(&ip);
        }
    }
}

impl Admitted {
    /// The connection authenticated (or, without SASL, sent a request): it is no longer closed
    /// to make room.
    pub fn proven(&self) {
        self.table.held().unproven.remove(&self.id);
    }

    /// The connection authenticated as a user of `tenant`: it is proven, and takes one of the
    /// tenant's places, unless the tenant holds them all. A re-authentication keeps its place.
    pub fn proven_as(&self, tenant: &str) -> Result<(), Refusal> {
        if self.tenant.get().is_some() {
            return Ok(());
        }
        let mut held = self.table.held();
        let max = self.table.limits.max_per_tenant;
        let count = held.per_tenant.get(tenant).copied().unwrap_or(0);
        if count >= max {
            return Err(Refusal::PerTenant(max));
        }
        held.per_tenant.insert(tenant.to_owned(), count + 1);
        held.unproven.remove(&self.id);
        let _ = self.tenant.set(tenant.to_owned());
        Ok(())
    }

    /// Resolves when the connection was closed to make room for another.
    pub async fn evicted(&self) {
        self.eviction.closed.notified().await;
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut held = self.table.held();
        held.unproven.remove(&self.id);
        if !self.eviction.evicted.load(Ordering::Relaxed) {
            held.total -= 1;
            release_ip(&mut held.per_ip, self.eviction.ip);
        }
        if let Some(tenant) = self.tenant.get()
            && let Some(count) = held.per_tenant.get_mut(tenant)
        {
            *count -= 1;
            if *count == 0 {
                held.per_tenant.remove(tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: usize, max_per_ip: usize) -> ConnectionLimits {
        ConnectionLimits { max_connections, max_per_ip, ..ConnectionLimits::default() }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_tenant_holds_at_most_its_share_of_authenticated_connections() {
        let l = ConnectionLimits { max_per_tenant: 2, ..limits(100, 100) };
        let table = Connections::new(l);
        let acme: Vec<Admitted> = (0..3).map(|i| table.admit(ip(10 + i)).expect("admitted")).collect();
        assert_eq!(acme[0].proven_as("acme"), Ok(()));
        assert_eq!(acme[0].proven_as("acme"), Ok(()), "a re-authentication keeps its place");
        assert_eq!(acme[1].proven_as("acme"), Ok(()));
        assert_eq!(acme[2].proven_as("acme"), Err(Refusal::PerTenant(2)), "from any address");
        let globex = table.admit(ip(20)).expect("admitted");
        assert_eq!(globex.proven_as("globex"), Ok(()), "another tenant is not held back");
        let mut acme = acme;
        drop(acme.remove(0));
        assert_eq!(acme[1].proven_as("acme"), Ok(()), "a closed connection gives the tenant's place back");
        drop(acme);
        drop(globex);
        assert!(table.held().per_tenant.is_empty() && table.count() == 0);
    }

    #[test]
    fn an_address_past_its_limit_is_refused_and_overrides_apply() {
        let mut l = limits(100, 2);
        l.per_ip_overrides.insert(ip(3), 1);
        let table = Connections::new(l);
        let a = [table.admit(ip(2)), table.admit(ip(2))];
        assert!(a.iter().all(Result::is_ok));
        assert_eq!(table.admit(ip(2)).err(), Some(Refusal::PerIp(2)));
        let b = table.admit(ip(3));
        assert!(b.is_ok());
        assert_eq!(table.admit(ip(3)).err(), Some(Refusal::PerIp(1)));
        drop(a);
        assert!(table.admit(ip(2)).is_ok(), "a closed connection gives its place back");
        drop(b);
        assert_eq!(table.count(), 0);
    }

    #[tokio::test]
    async fn a_full_listener_closes_the_oldest_unproven_connection_and_never_a_proven_one() {
        let table = Connections::new(limits(2, 10));
        let proven = table.admit(ip(1)).expect("room");
        proven.proven();
        let idle = table.admit(ip(2)).expect("room");
        let newcomer = table.admit(ip(3)).expect("the idle connection makes room");
        tokio::time::timeout(Duration::from_secs(1), idle.evicted()).await.expect("the idle one is told to close");
        assert_eq!(table.count(), 2);
        newcomer.proven();
        assert_eq!(table.admit(ip(4)).err(), Some(Refusal::Full(2)), "only proven connections are left");
        drop(idle);
        assert_eq!(table.count(), 2, "an evicted connection's place was already given back");
        drop(newcomer);
        drop(proven);
        assert_eq!(table.count(), 0);
        assert!(table.held().per_ip.is_empty());
    }
}
