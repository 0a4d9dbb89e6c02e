//! TLS handshakes in progress on the metadata port, bounded per source address and in total so
//! that connections which never finish one cannot keep agents and peers out.
//!
//! A new connection always gets to try: past a bound the oldest unfinished handshake (of the
//! same address first) is given up for it. A certificate of the cluster CA finishes in
//! milliseconds, so a stranger holding handshakes open only ever evicts its own.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::locks::MutexRecovery;

/// Handshakes in progress on one node.
pub(crate) const HANDSHAKES_MAX: usize = 512;
/// Handshakes in progress from one source address.
pub(crate) const HANDSHAKES_PER_ADDRESS_MAX: usize = 32;

#[derive(Default)]
struct Table {
    next: u64,
    /// Oldest first: the address and how to tell the handshake it was given up.
    open: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
    per_address: HashMap<IpAddr, usize>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<oneshot::Sender<()>> {
        let (address, evict) = self.open.remove(&id)?;
        if let Some(n) = self.per_address.get_mut(&address) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&address);
            }
        }
        Some(evict)
    }

    fn oldest_of(&self, address: IpAddr) -> Option<u64> {
        self.open.iter().find(|(_, (a, _))| *a == address).map(|(id, _)| *id)
    }
}

#[derive(Clone)]
pub(crate) struct Handshakes {
    table: Arc<Mutex<Table>>,
    max: usize,
    per_address_max: usize,
}

impl Default for Handshakes {
    fn default() -> Self {
        Self::new(HANDSHAKES_MAX, HANDSHAKES_PER_ADDRESS_MAX)
    }
}

/// One handshake's place; dropping it frees the place. `evicted` resolves when it was given up
/// for a newer connection.
pub(crate) struct Ticket {
    id: u64,
    handshakes: Handshakes,
    pub(crate) evicted: oneshot::Receiver<()>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.handshakes.table.lock_recovered().remove(self.id);
    }
}

impl Handshakes {
    pub(crate) fn new(max: usize, per_address_max: usize) -> Self {
        Self { table: Arc::default(), max: max.max(1), per_address_max: per_address_max.max(1) }
    }

    /// A place for a handshake from `address`, giving up the oldest one of that address past
    /// its bound, else the oldest of all past the node's.
    pub(crate) fn begin(&self, address: IpAddr) -> Ticket {
        let mut table = self.table.lock_recovered();
        let crowded = table.per_address.get(&address).copied().unwrap_or(0) >= self.per_address_max;
        let victim = if crowded {
            table.oldest_of(address)
        } else if table.open.len() >= self.max {
            table.open.keys().next().copied()
        } else {
            None
        };
        if let Some(evict) = victim.and_then(|id| table.remove(id)) {
            tracing::debug!(%address, crowded, "metadata TLS handshake given up for a newer connection");
            let _ = evict.send(());
        }
        let id = table.next;
        table.next += 1;
        let (evict, evicted) = oneshot::channel();
        table.open.insert(id, (address, evict));
        *table.per_address.entry(address).or_default() += 1;
        drop(table);
        Ticket { id, handshakes: self.clone(), evicted }
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.table.lock_recovered().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn an_address_past_its_bound_gives_up_its_own_oldest_handshake() {
        let handshakes = Handshakes::new(100, 2);
        let mut a1 = handshakes.begin(ip(1));
        let mut a2 = handshakes.begin(ip(1));
        let mut b1 = handshakes.begin(ip(2));
        let _a3 = handshakes.begin(ip(1));
        assert!(a1.evicted.try_recv().is_ok(), "the oldest of the crowded address is given up");
        assert!(a2.evicted.try_recv().is_err());
        assert!(b1.evicted.try_recv().is_err(), "another address is not touched");
        assert_eq!(handshakes.open(), 3);
    }

    #[test]
    fn past_the_node_bound_the_oldest_of_all_is_given_up_and_finished_ones_free_their_place() {
        let handshakes = Handshakes::new(2, 10);
        let mut first = handshakes.begin(ip(1));
        let second = handshakes.begin(ip(2));
        let mut third = handshakes.begin(ip(3));
        assert!(first.evicted.try_recv().is_ok());
        drop(second);
        assert_eq!(handshakes.open(), 1);
        let _fourth = handshakes.begin(ip(4));
        assert!(third.evicted.try_recv().is_err(), "room was freed, nothing given up");
        drop(first);
        assert_eq!(handshakes.open(), 2, "an evicted ticket's drop frees nothing twice");
    }
}
